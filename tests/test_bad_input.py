"""Bad input never escapes the taxonomy (property-based, against ``fake`` and ``local``).

Every public function, given arbitrary values for its parameters, either
works or raises a taxonomy error, ``TypeError`` or ``UnknownProvider`` — never
``OverflowError``, ``RecursionError``, ``UnicodeEncodeError``, another
``ValueError`` or an internal error — and a refused ``spawn``/``exec`` starts
nothing.

Safety: on ``local`` the program run by the property tests is always ``true``
or ``cat`` (values that are not a usable program name are drawn, never another
program), the stdin tests run ``head``, ``sh`` and ``sleep``, which touch
nothing but their stdin, and ``write_file`` paths stay under the sandbox's own
``/tmp``; every sandbox lives in the test's temporary directory.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import managoat_sandbox as sandbox
from managoat_sandbox import SandboxError, config
from managoat_sandbox.errors import CommandExited, Invalid, NotFound, UnknownProvider
from managoat_sandbox.types import Handle

ALLOWED = (SandboxError, TypeError, UnknownProvider)

_selfref: list[Any] = []
_selfref.append(_selfref)
_deep: list[Any] = [b"x"]
for _ in range(5000):
    _deep = [_deep]

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**64),
    st.sampled_from([10**400, -(10**400), 2**63]),
    st.builds(pow, st.just(-10), st.just(5001)),  # too long for repr()
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300]),
)
texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a\x00b", "A=B", "=", "é", "\ud800", "a\udcffb"]),
)
leaves = st.one_of(
    st.none(), st.booleans(), numbers, texts, st.binary(max_size=20), st.just(object())
)
anything = st.one_of(
    st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(texts, inner, max_size=3),
        ),
        max_leaves=8,
    ),
    st.just(_selfref),
    st.just(_deep),
)
programs = st.one_of(
    st.sampled_from(["true", "", "tr\x00ue", "tr\ud800ue"]),
    leaves.filter(lambda v: not isinstance(v, str)),
)
deep_path = "/tmp/" + "d/" * 3000 + "f"
paths = st.one_of(
    st.text(alphabet="abcdefgh-_", min_size=1, max_size=12).map(lambda name: f"/tmp/{name}"),
    st.sampled_from(["", "/tmp/a\x00b", deep_path, "/tmp/", "/tmp"]),
    leaves.filter(lambda v: not isinstance(v, str)),
)
optional_timeouts = st.one_of(st.none(), numbers, leaves)


@pytest.fixture(params=["fake", "local"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Handle]:
    provider = request.param
    if provider == "local":
        config.configure("local", root=str(tmp_path / "root"))
    handle = sandbox.create(provider, "fuzzed")
    yield handle
    sandbox.destroy(handle)


def _call(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except ALLOWED:
        return None
    except BaseException as error:  # the property under test: nothing else escapes
        pytest.fail(f"{fn.__name__} raised {type(error).__name__}: {error!r}")


def _program(box: Handle, cmd: Any) -> Any:
    """On fake, ``true`` is spelt as its script language's exit."""
    if box.provider == "fake" and cmd == "true":
        return "emit"
    return cmd


def _drain(command: Any, timeout: Any) -> None:
    """Read the (short) stream to its end; expiry of a tiny timeout is the documented
    ``TimeoutError``, not an escape."""
    try:
        for _ in sandbox.iter_frames(command, timeout=timeout):
            pass
    except TimeoutError:
        pass


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(
    cmd=programs, args=anything, env=anything, dir=anything, timeout=optional_timeouts, merge=leaves
)
def test_exec_raises_only_taxonomy_errors(
    box: Handle, cmd: Any, args: Any, env: Any, dir: Any, timeout: Any, merge: Any
) -> None:
    before = sandbox.list_sessions(box)
    result = _call(
        sandbox.exec,
        box,
        _program(box, cmd),
        args,
        env=env,
        dir=dir,
        timeout=timeout,
        stderr_to_stdout=merge,
    )
    if result is None:
        assert sandbox.list_sessions(box) == before, "a refused exec left a session"


@PROPERTY
@given(
    cmd=programs,
    args=anything,
    env=anything,
    dir=anything,
    owner=anything,
    flags=st.tuples(leaves, leaves, leaves),
)
def test_spawn_raises_only_taxonomy_errors(
    box: Handle, cmd: Any, args: Any, env: Any, dir: Any, owner: Any, flags: Any
) -> None:
    stdin, tty, detachable = flags
    before = sandbox.list_sessions(box)
    command = _call(
        sandbox.spawn,
        box,
        _program(box, cmd),
        args,
        env=env,
        dir=dir,
        owner=owner if owner is not None else queue.Queue(),
        stdin=stdin,
        tty=tty,
        detachable=detachable,
    )
    if command is None:
        assert sandbox.list_sessions(box) == before, "a refused spawn left a session"
    else:
        sandbox.stop_command(command)


@PROPERTY
@given(path=paths, data=anything, mode=st.one_of(st.none(), numbers, leaves))
def test_write_file_raises_only_taxonomy_errors(
    box: Handle, path: Any, data: Any, mode: Any
) -> None:
    _call(sandbox.write_file, box, path, data, mode=mode)


@PROPERTY
@given(data=anything, timeout=optional_timeouts)
def test_write_stdin_and_iter_frames_raise_only_taxonomy_errors(
    box: Handle, data: Any, timeout: Any
) -> None:
    cat = "emit" if box.provider == "fake" else "cat"
    args = ["stay"] if box.provider == "fake" else []
    command = sandbox.spawn(box, cat, args, stdin=True)
    try:
        _call(sandbox.write_stdin, command, data)
        sandbox.close_stdin(command)
        _call(_drain, command, timeout)
    finally:
        sandbox.stop_command(command)


@PROPERTY
@given(session=anything, timeout=anything, mode=anything)
def test_terminate_session_raises_only_taxonomy_errors(
    box: Handle, session: Any, timeout: Any, mode: Any
) -> None:
    _call(sandbox.terminate_session, box, session, timeout=timeout, mode=mode)


@PROPERTY
@given(session=anything, owner=anything, stdin=leaves)
def test_attach_raises_only_taxonomy_errors(
    box: Handle, session: Any, owner: Any, stdin: Any
) -> None:
    command = _call(sandbox.attach, box, session, owner=owner, stdin=stdin)
    if command is not None:
        sandbox.stop_command(command)


@settings(max_examples=60, deadline=None)
@given(
    provider=st.one_of(st.sampled_from(["fake", "nope"]), leaves), name=anything, timeout=anything
)
def test_create_new_raises_only_taxonomy_errors(provider: Any, name: Any, timeout: Any) -> None:
    handle = _call(sandbox.create_new, provider, name, timeout=timeout)
    if handle is not None:
        sandbox.destroy(handle)


@settings(max_examples=60, deadline=None)
@given(
    provider=st.one_of(st.sampled_from(["fake", "local", "nope"]), leaves),
    capability=st.one_of(st.sampled_from(sorted(sandbox.KNOWN_CAPABILITIES)), anything),
)
def test_supports_and_capabilities_raise_only_taxonomy_errors(
    provider: Any, capability: Any
) -> None:
    _call(sandbox.supports, provider, capability)
    _call(sandbox.capabilities, provider)


@pytest.mark.parametrize("capability", ["nope", "", "\x00", "a\ud800"])
def test_an_unknown_capability_is_invalid(capability: str) -> None:
    with pytest.raises(Invalid) as caught:
        sandbox.supports("local", capability)
    assert caught.value.detail[0] == "capability"


# -- lone surrogates: text no provider can carry -----------------------------------------

SURROGATE = "a\ud800"


def test_a_name_with_a_lone_surrogate_is_invalid(box: Handle) -> None:
    for call in (sandbox.create, sandbox.create_new, sandbox.build_handle):
        with pytest.raises(Invalid):
            call(box.provider, SURROGATE)
    with pytest.raises((Invalid, NotFound)):  # a handle built by hand names no sandbox
        sandbox.get(Handle(box.provider, SURROGATE))


def test_a_lone_surrogate_in_a_command_is_invalid_and_starts_nothing(box: Handle) -> None:
    program = _program(box, "true")
    calls = [
        lambda: sandbox.exec(box, SURROGATE),
        lambda: sandbox.exec(box, program, [SURROGATE]),
        lambda: sandbox.exec(box, program, env={"A": SURROGATE}),
        lambda: sandbox.exec(box, program, env={SURROGATE: "a"}),
        lambda: sandbox.exec(box, program, dir=SURROGATE),
        lambda: sandbox.spawn(box, program, ["\udcff"]),
    ]
    for call in calls:
        with pytest.raises(Invalid):
            call()
    assert sandbox.list_sessions(box) == []


def test_data_with_a_lone_surrogate_is_invalid(box: Handle) -> None:
    with pytest.raises(Invalid) as caught:
        sandbox.write_file(box, "/tmp/f", ["ok", SURROGATE])
    assert caught.value.detail[0] == "data"
    cat = "emit" if box.provider == "fake" else "cat"
    command = sandbox.spawn(box, cat, ["stay"] if box.provider == "fake" else [], stdin=True)
    try:
        with pytest.raises(Invalid) as caught:
            sandbox.write_stdin(command, SURROGATE)
        assert caught.value.detail[0] == "data"
    finally:
        sandbox.stop_command(command)


def test_a_checkpoint_comment_with_a_lone_surrogate_is_invalid(tmp_path: Path) -> None:
    config.configure("local", root=str(tmp_path / "root"))
    handle = sandbox.create("local", "comment")
    try:
        with pytest.raises(Invalid):
            sandbox.create_checkpoint(handle, comment=SURROGATE)
    finally:
        sandbox.destroy(handle)


# -- numbers: NaN, negatives, ints too long to print -------------------------------------


def test_nan_and_negative_timeouts_are_invalid(box: Handle) -> None:
    with pytest.raises(Invalid):
        sandbox.exec(box, _program(box, "true"), timeout=float("nan"))
    with pytest.raises(Invalid):
        sandbox.create_new(box.provider, "nan", timeout=float("nan"))
    cat = "emit" if box.provider == "fake" else "cat"
    command = sandbox.spawn(box, cat, ["stay"] if box.provider == "fake" else [], stdin=True)
    try:
        with pytest.raises(Invalid):
            list(sandbox.iter_frames(command, timeout=float("nan")))
        with pytest.raises(Invalid):
            sandbox.iter_frames(command, timeout=-1)
        with pytest.raises(Invalid):
            sandbox.exec(box, _program(box, "true"), timeout=-1)
    finally:
        sandbox.stop_command(command)


def test_an_int_too_long_to_print_is_refused_not_printed(box: Handle) -> None:
    huge = 10**5000
    with pytest.raises(Invalid):
        sandbox.read_file(box, "/tmp/f", max_bytes=-huge)
    with pytest.raises(Invalid):
        sandbox.write_file(box, "/tmp/f", b"", mode=huge)
    with pytest.raises(Invalid):
        sandbox.terminate_session(box, "s1", timeout=huge)
    with pytest.raises(Invalid):
        sandbox.exec(box, _program(box, "true"), timeout=huge)


@pytest.mark.parametrize("huge", [2**64, 10**5000], ids=["2**64", "10**5000"])
def test_a_limit_too_large_for_the_kernel_is_invalid(tmp_path: Path, huge: int) -> None:
    config.configure("local", root=str(tmp_path / "root"))
    try:
        with pytest.raises(Invalid):
            sandbox.create("local", "limits", limits={"memory": huge})
    finally:
        for name in sandbox.list_all_names("local"):
            sandbox.destroy(sandbox.build_handle("local", name))


def test_iter_frames_of_a_command_that_delivers_to_a_callback_is_invalid(box: Handle) -> None:
    command = sandbox.spawn(box, _program(box, "true"), owner=lambda frame: None)
    try:
        with pytest.raises(Invalid):
            list(sandbox.iter_frames(command, timeout=1))
    finally:
        sandbox.stop_command(command)


# -- stdin whose reader is gone ------------------------------------------------------------

#: More than the agent holds for a process plus a pipe's buffer: some of it is still
#: being written when the reader goes away, whenever that happens.
FLOOD = b"x" * (4 * 1024 * 1024)


@pytest.fixture
def local_box(tmp_path: Path) -> Iterator[Handle]:
    config.configure("local", root=str(tmp_path / "root"))
    handle = sandbox.create("local", "stdin")
    yield handle
    sandbox.destroy(handle)


def test_a_write_pending_when_the_process_exits_is_command_exited(local_box: Handle) -> None:
    command = sandbox.spawn(local_box, "head", ["-c", "1"], stdin=True)
    with pytest.raises(CommandExited):
        sandbox.write_stdin(command, FLOOD)
    frames = list(sandbox.iter_frames(command, timeout=30))
    assert frames[-1] == sandbox.Exit(command.ref, 0)


def test_a_write_to_a_stdin_its_process_closed_is_command_exited(local_box: Handle) -> None:
    """Deterministically the agent's "closed" answer: the pipe broke, the process lives on."""
    script = "head -c 1 >/dev/null; exec 0<&-; exec sleep 600"
    command = sandbox.spawn(local_box, "sh", ["-c", script], stdin=True)
    try:
        with pytest.raises(CommandExited):
            sandbox.write_stdin(command, FLOOD)
    finally:
        sandbox.stop_command(command)


def test_a_write_after_close_stdin_is_still_stdin_not_open(local_box: Handle) -> None:
    command = sandbox.spawn(local_box, "sh", ["-c", "exec sleep 600"], stdin=True)
    try:
        sandbox.close_stdin(command)
        with pytest.raises(Invalid) as caught:
            sandbox.write_stdin(command, "late")
        assert caught.value.detail == "stdin_not_open"
    finally:
        sandbox.stop_command(command)
