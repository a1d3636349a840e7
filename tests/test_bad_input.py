"""Bad input never escapes the taxonomy (property-based, against ``fake`` and ``local``).

Every public function, given arbitrary values for its parameters, either
works or raises a taxonomy error, ``TypeError`` or ``ValueError`` (which
``UnknownProvider`` is) — never ``OverflowError``, ``RecursionError`` or an
internal error — and a refused ``spawn``/``exec`` starts nothing.

Safety: on ``local`` the program run is always ``true`` or ``cat`` (values
that are not a usable program name are drawn, never another program), and
``write_file`` paths stay under the sandbox's own ``/tmp``; every sandbox
lives in the test's temporary directory.
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
from managoat_sandbox.types import Handle

ALLOWED = (SandboxError, TypeError, ValueError)

_selfref: list[Any] = []
_selfref.append(_selfref)
_deep: list[Any] = [b"x"]
for _ in range(5000):
    _deep = [_deep]

numbers = st.one_of(
    st.integers(),
    st.integers(min_value=2**62, max_value=2**64),
    st.sampled_from([10**400, -(10**400), 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300]),
)
texts = st.one_of(st.text(max_size=20), st.sampled_from(["", "\x00", "a\x00b", "A=B", "=", "é"]))
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
    st.sampled_from(["true", "", "tr\x00ue"]), leaves.filter(lambda v: not isinstance(v, str))
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
