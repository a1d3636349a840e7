"""The conformance suite: a ``unittest.TestCase`` mixin every adapter runs.

An adapter proves it keeps the contract by running this suite from its own
tests, putting the mixin *before* ``unittest.TestCase``::

    import unittest
    from managoat_sandbox.testing.conformance import ConformanceTests

    class RunnerConformanceTest(ConformanceTests, unittest.TestCase):
        adapter = MyRunner()
        fixtures = {
            "exec_ok": ("bash", ["-lc", "echo hello"], "hello"),
            "exec_fail": ("bash", ["-lc", "echo oops; exit 3"], 3),
            "spawn_ok": ("bash", ["-lc", "echo hello"]),
            "spawn_stay": ("bash", ["-lc", "echo ready; cat"]),
        }

Class attributes:

``adapter`` (required)
    An :class:`~managoat_sandbox.Adapter` instance, or an adapter class that
    is instantiated once per test class (in ``setUpClass``). The suite calls
    the adapter directly, never the facade; the instance in use is
    ``adapter_instance``.
``fixtures`` (required)
    Commands the adapter can run. Required: ``exec_ok`` ``(cmd, args,
    expected_stdout_part)`` exits 0; ``exec_fail`` ``(cmd, args, code)``
    exits nonzero; ``spawn_ok`` ``(cmd, args)`` prints stdout, then exits 0;
    ``spawn_stay`` ``(cmd, args)`` prints stdout, then echoes stdin until EOF
    and exits 0. Optional, each turning on the tests that need it:
    ``spawn_drop`` ``(cmd, args)`` — the transport closes without an exit;
    ``exec_slow`` ``(cmd, args)`` — runs for at least 5 s, printing as it
    goes; ``exec_mixed`` ``(cmd, args, out_part, err_part)`` — prints to both
    streams; ``spawn_bulk`` ``(cmd, args, nbytes)`` — prints exactly
    ``nbytes`` bytes of stdout, then exits 0 (spawned, and run by ``exec``
    against its ``max_bytes``); ``print_file`` ``(cmd, args)`` — prints the
    file whose path is appended as its last argument; ``make_private``
    ``(cmd, args)`` — takes every permission off the path appended as its
    last argument (``chmod 000``); ``exec_late_child`` ``(cmd, args, early,
    late)`` — prints ``early`` and exits 0 while a background child it
    started, holding its stdout, prints ``late`` about half a second later
    (well within :data:`LATE_CHILD_BOUND`); ``exec_ordered`` ``(cmd, args,
    expected_merged)`` — writes to stdout and stderr in turn, and
    ``expected_merged`` is all of it in the order written; ``spawn_deaf``
    ``(cmd, args)`` — prints a line once it ignores a graceful termination
    (SIGTERM), then runs on for at least 10 s; ``exec_killed`` ``(cmd, args,
    signum)`` — prints stdout, then kills itself with signal ``signum``, best
    by signalling its own process group (``bash -c 'echo up; kill -9 0'``):
    a command's group is its own, so that reaches nothing else. Give
    ``exec_ordered`` only where ``stderr_to_stdout`` gives the command one
    pipe for both streams: where the provider's protocol delivers them apart,
    the merge is by arrival and no order can be promised. Expected parts are
    ``str`` (compared as UTF-8) or ``bytes``.
``name_factory``
    Looked up on the class and called with no arguments; mints sandbox names
    (for adapters whose names carry routing). The default,
    :func:`default_name`, is unique across processes and runs.
``frame_timeout``
    Seconds each frame wait may take (default 1.0). Waits that need several
    frames use a documented multiple of it.
``spawn_opts``
    Keyword arguments merged *under* each test's own ``spawn`` arguments
    (``owner`` and ``stdin``, which win), e.g. ``{"detachable": True}``.
``files_root``
    An absolute directory the ``read_file``/``list_files`` tests may write
    under (default ``/tmp``); each test uses a fresh subdirectory.
``elsewhere``
    Looked up on the class and called with no arguments, like
    ``name_factory``; returns a context manager under which the adapter's
    configuration names *another place* for its sandboxes — another
    ``local.root``, another endpoint (the same server under another address
    will do), another Fake world. It turns on the test that a handle acts on
    the sandbox it was made for, whatever the configuration is when it is used,
    or fails with a taxonomy error; never a success that did not act on it.
    Default ``None``: that test is skipped.

Gating: a test that needs a capability the adapter does not advertise, or an
optional fixture that is not given, is skipped with a reason naming what is
missing (the checkpoint-coherence test is skipped when ``checkpoint`` *is*
advertised). Capabilities are read from ``adapter.capabilities()`` when the
test runs. A missing required fixture fails the tests that need it; an
unknown fixture name fails the whole class (a typo would otherwise skip), and
so does a fixture not of its shape (:data:`FIXTURE_SHAPES`), naming the fixture
and what each of its fields must be.

Every test destroys the sandboxes and stops the commands it made (cleanup
errors are logged, not raised). Every wait is bounded: nothing here sleeps to
win a race; the frame waits are waits on a condition with a deadline.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import secrets
import tempfile
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

from .. import reasons
from ..contract import KNOWN_CAPABILITIES, Adapter, Capability
from ..errors import (
    AlreadyExists,
    CommandExited,
    DeadlineExpired,
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    SandboxError,
    Truncated,
    Unavailable,
)
from ..frames import Error, Exit, Frame, Stderr, Stdout
from ..types import Command, ExecResult, FileInfo, Handle, Info, NetworkPolicy, Session
from .conformance_trees import TransferTests
from .mailbox import Mailbox, has_ref, is_exit, is_stdout, is_terminal

if TYPE_CHECKING:
    from unittest import TestCase as _Base
else:
    _Base = object

__all__ = [
    "FIXTURE_FIELDS",
    "FIXTURE_SHAPES",
    "OPTIONAL_FIXTURES",
    "REQUIRED_FIXTURES",
    "ConformanceTests",
    "default_name",
]

log = logging.getLogger("managoat_sandbox.testing")

REQUIRED_FIXTURES = frozenset({"exec_ok", "exec_fail", "spawn_ok", "spawn_stay"})
OPTIONAL_FIXTURES = frozenset(
    {
        "spawn_drop",
        "exec_slow",
        "exec_mixed",
        "spawn_bulk",
        "print_file",
        "make_private",
        "exec_late_child",
        "exec_ordered",
        "spawn_deaf",
        "exec_killed",
    }
)

#: Each fixture's fields, in order (their meaning: the module docs, ``fixtures``). What
#: each field must be is :data:`FIXTURE_FIELDS`; ``setUpClass`` checks every fixture
#: given against this table and fails the class naming the fixture and its shape.
FIXTURE_SHAPES: Mapping[str, tuple[str, ...]] = {
    "exec_ok": ("cmd", "args", "expected_stdout_part"),
    "exec_fail": ("cmd", "args", "code"),
    "spawn_ok": ("cmd", "args"),
    "spawn_stay": ("cmd", "args"),
    "spawn_drop": ("cmd", "args"),
    "exec_slow": ("cmd", "args"),
    "exec_mixed": ("cmd", "args", "out_part", "err_part"),
    "spawn_bulk": ("cmd", "args", "nbytes"),
    "print_file": ("cmd", "args"),
    "make_private": ("cmd", "args"),
    "exec_late_child": ("cmd", "args", "early", "late"),
    "exec_ordered": ("cmd", "args", "expected_merged"),
    "spawn_deaf": ("cmd", "args"),
    "exec_killed": ("cmd", "args", "signum"),
}


def _is_args(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str | bytes)
        and all(isinstance(arg, str) for arg in value)
    )


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_signum(value: object) -> bool:
    return _is_count(value) and 0 < cast(int, value) < 128


def _is_part(value: object) -> bool:
    return isinstance(value, str | bytes)


#: What each fixture field must be: a check, and its description in the failure message.
FIXTURE_FIELDS: Mapping[str, tuple[Callable[[object], bool], str]] = {
    "cmd": (lambda value: isinstance(value, str), "a str"),
    "args": (_is_args, "a list of str"),
    "code": (_is_count, "an int"),
    "nbytes": (_is_count, "an int"),
    "signum": (_is_signum, "a signal number, 1-127"),
    **{
        part: (_is_part, "a str or bytes")
        for part in (
            "expected_stdout_part",
            "out_part",
            "err_part",
            "early",
            "late",
            "expected_merged",
        )
    },
}


def _shape_error(owner: str, name: str, value: object) -> str | None:
    """Why ``value`` is not the shape :data:`FIXTURE_SHAPES` gives fixture ``name``
    (naming the fixture, its fields and what each must be), or ``None`` when it is."""
    fields = FIXTURE_SHAPES.get(name)
    if fields is None:
        return None
    wrong = (
        not isinstance(value, Sequence)
        or isinstance(value, str | bytes)
        or len(value) != len(fields)
        or not all(
            FIXTURE_FIELDS[field][0](item) for field, item in zip(fields, value, strict=True)
        )
    )
    if not wrong:
        return None
    wanted = ", ".join(f"{field} {FIXTURE_FIELDS[field][1]}" for field in fields)
    return (
        f"{owner}.fixtures[{name!r}] must be a tuple ({', '.join(fields)}) of "
        f"{len(fields)} items — {wanted}; got {value!r}"
    )


#: How long "no further terminal frame" is watched for (docs/protocols/contract.md#quiet-window).
QUIET_WINDOW = 0.05
#: How long "nothing after stop_command" is watched for.
STOP_QUIET_WINDOW = 0.1
#: The exec-deadline test's timeout, and the bound on how long exec may take with it.
EXEC_DEADLINE = 0.5
EXEC_DEADLINE_BOUND = 4.0
CONCURRENT_EXECS = 8
#: The concurrent-exec batch bound, in frame timeouts. ``exec`` has no
#: per-frame wait to bound, so the batch gets a generous multiple, only so
#: that an adapter that deadlocks fails the test instead of hanging it.
CONCURRENT_EXEC_BOUND_FRAMES = 30
#: The attacher's own budget, in frame timeouts: it outlives the test's three
#: bounded waits that precede its last report (replay, the original owner's
#: echo, the tail), plus one for the attach call itself.
ATTACHER_BUDGET_FRAMES = 4
#: How many chunks the exit-ordering test has echoed right before the command exits.
BURST_CHUNKS = 64
#: Seconds the ``exec_late_child`` command may take beyond one frame timeout (its
#: background child prints about half a second after the main process exits).
LATE_CHILD_BOUND = 5.0
#: The timeout of the termination the ``spawn_deaf`` command outlasts.
DEAF_TERMINATION_TIMEOUT = 0.5
#: How many times the merged-order test runs ``exec_ordered``: an adapter that merges
#: by arrival gets the order right by chance in some runs, rarely in all of them.
ORDER_RUNS = 5

_E = TypeVar("_E", bound=Exception)

_names = itertools.count(1)
_RUN = secrets.token_hex(3)


def default_name() -> str:
    """``conformance-<pid>-<run token>-<counter>``: unique across threads, processes and runs."""
    return f"conformance-{os.getpid()}-{_RUN}-{next(_names)}"


def _as_bytes(value: str | bytes) -> bytes:
    return value.encode("utf-8") if isinstance(value, str) else bytes(value)


def _stdout_of(frames: Sequence[Frame]) -> bytes:
    return b"".join(frame.data for frame in frames if isinstance(frame, Stdout))


def _collect_stdout(
    box: Mailbox,
    ref: Hashable,
    enough: Callable[[bytes], bool],
    *,
    deadline: float,
    what: str,
    initial: bytes = b"",
) -> bytes:
    """Accumulate stdout of ``ref`` until ``enough(collected)``, by the monotonic ``deadline``.

    Chunk boundaries are not promised, so promises about output are checked
    on the accumulated bytes. Raises ``AssertionError`` naming ``what`` was
    awaited and what arrived.
    """
    collected = initial
    try:
        while not enough(collected):
            frame = box.expect(is_stdout(ref), max(deadline - time.monotonic(), 0.0))
            collected += cast(Stdout, frame).data
    except AssertionError as error:
        raise AssertionError(
            f"stdout of {ref!r} never had {what}; collected {collected!r} ({error})"
        ) from None
    return collected


class ConformanceTests(TransferTests):
    """The contract's promises as tests; mix into ``unittest.TestCase`` (see the module docs)."""

    adapter: ClassVar[Adapter | type[Adapter]]
    fixtures: ClassVar[Mapping[str, Sequence[Any]]]
    name_factory: ClassVar[Callable[[], str]] = default_name
    frame_timeout: ClassVar[float] = 1.0
    spawn_opts: ClassVar[Mapping[str, Any]] = {}
    files_root: ClassVar[str] = "/tmp"
    elsewhere: ClassVar[Callable[[], AbstractContextManager[object]] | None] = None

    #: The adapter under test, resolved from ``adapter`` once per test class.
    adapter_instance: ClassVar[Adapter]

    @classmethod
    def setUpClass(cls) -> None:
        """Resolve ``adapter`` (a class is instantiated once); refuse unknown fixture names,
        and fixtures not of the shape :data:`FIXTURE_SHAPES` gives them (``ValueError``
        naming each such fixture, its fields and what each must be).

        A misspelt optional fixture would otherwise just skip its tests, and a misshapen
        one fail deep inside a test.
        """
        super().setUpClass()
        unknown = set(getattr(cls, "fixtures", {})) - REQUIRED_FIXTURES - OPTIONAL_FIXTURES
        if unknown:
            raise ValueError(f"{cls.__name__}.fixtures has unknown names: {sorted(unknown)}")
        misshapen = [
            error
            for name, value in getattr(cls, "fixtures", {}).items()
            if (error := _shape_error(cls.__name__, name, value)) is not None
        ]
        if misshapen:
            raise ValueError("; ".join(misshapen))
        declared = getattr(cls, "adapter", None)
        if isinstance(declared, type) and issubclass(declared, Adapter):
            cls.adapter_instance = declared()
        elif isinstance(declared, Adapter):
            cls.adapter_instance = declared
        else:
            raise TypeError(f"{cls.__name__}.adapter must be an Adapter instance or subclass")

    # -- helpers ----------------------------------------------------------

    def _fixture(self, key: str) -> Sequence[Any]:
        """The fixture ``key``: a missing optional one skips, a missing required one fails."""
        fixtures = getattr(self, "fixtures", {})
        if key in fixtures:
            return tuple(fixtures[key])
        if key in REQUIRED_FIXTURES:
            self.fail(
                f"the required fixture {key!r} is missing from {type(self).__name__}.fixtures"
            )
        self.skipTest(f"the optional fixture {key!r} is not provided")

    def _require(self, capability: str) -> None:
        if capability not in self.adapter_instance.capabilities():
            self.skipTest(f"the adapter does not advertise the {capability!r} capability")

    def _name(self) -> str:
        return type(self).name_factory()

    @staticmethod
    def _quietly(operation: Callable[..., object], *args: object) -> None:
        """Run a cleanup step; a failure is logged, never raised."""
        try:
            operation(*args)
        except Exception as error:
            log.warning("conformance cleanup %s failed: %r", operation.__name__, error)

    def _created(self) -> Handle:
        """A new sandbox, destroyed when the test ends."""
        adapter = self.adapter_instance
        handle = adapter.create(self._name())
        self.addCleanup(self._quietly, adapter.destroy, handle)
        return handle

    def _spawn(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str],
        *,
        owner: Mailbox,
        stdin: bool,
        detachable: bool | None = None,
        dir: str | None = None,
    ) -> Command:
        """Spawn with ``spawn_opts`` under this test's options (``detachable`` and ``dir``
        too, when given); stopped when the test ends."""
        adapter = self.adapter_instance
        options: dict[str, Any] = {**self.spawn_opts, "owner": owner, "stdin": stdin}
        if detachable is not None:
            options["detachable"] = detachable
        if dir is not None:
            options["dir"] = dir
        command = adapter.spawn(handle, cmd, args, **options)
        self.addCleanup(self._quietly, adapter.stop_command, command)
        return command

    def _raises(
        self,
        expected: type[_E] | tuple[type[_E], ...],
        operation: Callable[..., object],
        *args: Any,
        **kwargs: Any,
    ) -> _E:
        """Call ``operation`` and return the error it raised, which must be ``expected``.

        A different exception (another taxonomy class, say) or a normal
        return is a test *failure* naming both, not an error escaping the test.
        """
        names = " or ".join(
            cls.__name__ for cls in (expected if isinstance(expected, tuple) else (expected,))
        )
        try:
            operation(*args, **kwargs)
        except Exception as error:
            if not isinstance(error, expected):
                self.fail(f"{operation.__name__} must raise {names}, raised {error!r}")
            return error
        self.fail(f"{operation.__name__} must raise {names}, returned normally")

    def _terminal(self, box: Mailbox, ref: Hashable) -> Frame:
        """The command's terminal frame, within one frame timeout."""
        return box.expect(is_terminal(ref), self.frame_timeout)

    def _assert_one_terminal_last(self, box: Mailbox, ref: Hashable) -> None:
        """No second terminal frame within the quiet window, and nothing after the first."""
        box.refute(is_terminal(ref), QUIET_WINDOW)
        frames = box.history(ref)
        terminals = [frame for frame in frames if frame.terminal]
        self.assertEqual(
            len(terminals), 1, f"exactly one terminal frame per command, got {terminals}"
        )
        self.assertTrue(frames[-1].terminal, f"a frame followed the terminal frame: {frames[-1]!r}")

    # -- identity ---------------------------------------------------------

    def test_build_handle_is_pure_and_provider_tagged(self) -> None:
        """build_handle is pure and repeatable; the handle carries the provider tag and the name."""
        adapter = self.adapter_instance
        name = self._name()
        handle = adapter.build_handle(name)
        self.assertIsInstance(handle, Handle)
        self.assertEqual(handle.provider, adapter.provider)
        self.assertEqual(handle.name, name)
        self.assertEqual(adapter.build_handle(name), handle, "build_handle must be repeatable")

    def test_capabilities_are_a_frozenset_of_known_names(self) -> None:
        """capabilities() is a frozenset drawn only from KNOWN_CAPABILITIES."""
        capabilities = self.adapter_instance.capabilities()
        self.assertIsInstance(capabilities, frozenset)
        unknown = set(capabilities) - KNOWN_CAPABILITIES
        self.assertFalse(unknown, f"unknown capabilities advertised: {sorted(map(str, unknown))}")

    def test_public_url_agrees_with_the_advertised_capability(self) -> None:
        """A URL means public_url is advertised and starts with http; None means it is not.

        ``NotSupported`` counts as "not advertised" too; any other taxonomy
        error is accepted, since the capability claim is what is under test.
        """
        adapter = self.adapter_instance
        handle = self._created()
        advertised = Capability.PUBLIC_URL in adapter.capabilities()
        try:
            url = adapter.public_url(handle)
        except NotSupported:
            self.assertFalse(advertised, "advertises 'public_url' but raises NotSupported")
            return
        except SandboxError:
            return
        if url is None:
            self.assertFalse(advertised, "advertises 'public_url' but answers None")
        else:
            self.assertTrue(advertised, "returned a URL without advertising 'public_url'")
            self.assertIsInstance(url, str)
            self.assertTrue(url.startswith("http"), f"public_url must be openable, got: {url!r}")

    # -- lifecycle --------------------------------------------------------

    def test_create_new_refuses_adoption_and_mints_a_new_incarnation_after_destroy(self) -> None:
        """create_new never adopts a taken name, and after destroy it mints a new instance id."""
        self._require(Capability.CREATE_NEW)
        adapter = self.adapter_instance
        name = self._name()
        first = adapter.create_new(name)
        self.addCleanup(self._quietly, adapter.destroy, first)
        self.assertIsInstance(first.instance_id, str)
        self.assertTrue(first.instance_id, "create_new must return a non-empty instance_id")
        self._raises((AlreadyExists, Invalid), adapter.create_new, name)
        adapter.destroy(first)
        second = adapter.create_new(name)
        self.addCleanup(self._quietly, adapter.destroy, second)
        self.assertIsInstance(second.instance_id, str)
        self.assertNotEqual(first.instance_id, second.instance_id)
        adapter.destroy(second)

    def test_create_is_name_keyed_and_adopts_an_existing_sandbox(self) -> None:
        """Creating the same name twice adopts the sandbox; both handles name it and work."""
        adapter = self.adapter_instance
        first = self._created()
        second = adapter.create(first.name)
        self.assertEqual(first.name, second.name)
        self.assertIsInstance(adapter.get(first), Info)
        self.assertIsInstance(adapter.get(second), Info)

    def test_get_on_missing_sandbox_is_exactly_not_found(self) -> None:
        """get on a sandbox that never existed raises NotFound, not a transient error."""
        adapter = self.adapter_instance
        self._raises(NotFound, adapter.get, adapter.build_handle(self._name()))

    def test_destroy_tolerates_a_missing_sandbox_and_is_definitive(self) -> None:
        """destroy of a never-created sandbox succeeds; after destroy, get raises NotFound."""
        adapter = self.adapter_instance
        adapter.destroy(adapter.build_handle(self._name()))
        handle = self._created()
        adapter.destroy(handle)
        self._raises(NotFound, adapter.get, handle)

    def test_a_handle_acts_on_its_own_sandbox_whatever_the_configuration_is_now(self) -> None:
        """A handle made under one configuration and used under another (``elsewhere``)
        reaches the sandbox it was made for, or raises a taxonomy error: ``destroy``
        never reports success while that sandbox lives on — in either direction."""
        elsewhere = type(self).elsewhere
        if elsewhere is None:
            self.skipTest("the class gives no 'elsewhere' (another configured place)")
        adapter = self.adapter_instance
        made_here = self._created()
        with elsewhere():
            destroyed = self._destroy_reported(made_here)
        self._check_destroy(made_here, destroyed, nullcontext)
        with elsewhere():
            made_there = adapter.create(self._name())
        self.addCleanup(self._destroy_within, elsewhere, made_there)
        self._check_destroy(made_there, self._destroy_reported(made_there), elsewhere)

    def _destroy_reported(self, handle: Handle) -> bool:
        """Whether ``destroy`` reported success (a taxonomy error is a refusal)."""
        try:
            self.adapter_instance.destroy(handle)
        except SandboxError:
            return False
        return True

    def _destroy_within(
        self, place: Callable[[], AbstractContextManager[object]], handle: Handle
    ) -> None:
        with place():
            self._quietly(self.adapter_instance.destroy, handle)

    def _check_destroy(
        self,
        handle: Handle,
        destroyed: bool,
        place: Callable[[], AbstractContextManager[object]],
    ) -> None:
        """Under ``place`` (the configuration ``handle`` was made under): gone if a
        ``destroy`` under the other one reported success, else still there."""
        adapter = self.adapter_instance
        with place():
            if destroyed:
                try:
                    adapter.get(handle)
                except NotFound:
                    return
                self.fail(
                    "destroy under another configuration reported success, "
                    "but the sandbox the handle was made for runs on"
                )
            self.assertIsInstance(adapter.get(handle), Info)

    def test_list_all_names_is_the_full_view_as_a_frozenset(self) -> None:
        """list_all_names returns a frozenset holding every sandbox, a new one included."""
        handle = self._created()
        names = self.adapter_instance.list_all_names()
        self.assertIsInstance(names, frozenset)
        self.assertIn(handle.name, names)

    def test_suspend_and_resume_are_total_and_resume_returns_a_usable_handle(self) -> None:
        """suspend and resume succeed on a live sandbox, and the resumed handle answers get."""
        self._require(Capability.SUSPEND)
        adapter = self.adapter_instance
        handle = self._created()
        adapter.suspend(handle)
        resumed = adapter.resume(handle)
        self.assertIsInstance(resumed, Handle)
        self.assertIsInstance(adapter.get(resumed), Info)

    # -- files ------------------------------------------------------------

    def _files_dir(self) -> str:
        return f"{self.files_root.rstrip('/')}/conformance-{secrets.token_hex(4)}"

    def test_read_file_returns_what_write_file_wrote_byte_for_byte(self) -> None:
        """read_file gives back exactly the bytes written, binary content included,
        and honours ``max_bytes``: at the size, the bytes; one under, Truncated."""
        self._require(Capability.READ_FILE)
        adapter = self.adapter_instance
        handle = self._created()
        path = f"{self._files_dir()}/every-byte.bin"
        data = bytes(range(256)) * 257 + b"\r\n\x00end"
        adapter.write_file(handle, path, data)
        read = adapter.read_file(handle, path)
        self.assertIsInstance(read, bytes)
        self.assertEqual(read, data)
        self.assertEqual(adapter.read_file(handle, path, max_bytes=len(data)), data)
        error = self._raises(Truncated, adapter.read_file, handle, path, max_bytes=len(data) - 1)
        self.assertEqual(error.detail, ("max_bytes", len(data) - 1))
        empty = f"{self._files_dir()}/empty"
        adapter.write_file(handle, empty, b"")
        self.assertEqual(adapter.read_file(handle, empty), b"")

    def _refuses_missing_and_wrong_kind(
        self, capability: str, operation: str, *, wrong_kind: str
    ) -> None:
        """``operation`` on nothing is NotFound, and on a ``wrong_kind`` ("dir" or
        "file") entry, or on a path that leads through a file, is Invalid."""
        self._require(capability)
        adapter = self.adapter_instance
        handle = self._created()
        directory = self._files_dir()
        adapter.write_file(handle, f"{directory}/file", b"x")
        call = getattr(adapter, operation)
        self._raises(NotFound, call, handle, f"{directory}/missing")
        self._raises(
            Invalid, call, handle, directory if wrong_kind == "dir" else f"{directory}/file"
        )
        self._raises(Invalid, call, handle, f"{directory}/file/below")

    def test_read_file_of_a_missing_path_is_not_found_and_of_a_directory_invalid(self) -> None:
        """Nothing at the path is NotFound; a directory, or a path through a file, is
        Invalid."""
        self._refuses_missing_and_wrong_kind(Capability.READ_FILE, "read_file", wrong_kind="dir")

    def test_list_files_shows_files_and_directories_with_their_facts(self) -> None:
        """A listing holds each entry once, with name, absolute path, type and size
        (mode, where reported, as written)."""
        self._require(Capability.LIST_FILES)
        adapter = self.adapter_instance
        handle = self._created()
        directory = self._files_dir()
        adapter.write_file(handle, f"{directory}/three.txt", b"abc", mode=0o640)
        adapter.write_file(handle, f"{directory}/sub/inner.txt", b"inner")
        entries = adapter.list_files(handle, directory)
        self.assertTrue(all(isinstance(e, FileInfo) for e in entries), entries)
        by_name = {e.name: e for e in entries}
        self.assertEqual(sorted(by_name), ["sub", "three.txt"], entries)
        three, sub = by_name["three.txt"], by_name["sub"]
        self.assertEqual(
            (three.path, three.type, three.size), (f"{directory}/three.txt", "file", 3)
        )
        if three.mode is not None:
            self.assertEqual(three.mode & 0o777, 0o640)
        self.assertEqual((sub.path, sub.type), (f"{directory}/sub", "dir"))
        inner = adapter.list_files(handle, f"{directory}/sub")
        self.assertEqual([(e.name, e.type, e.size) for e in inner], [("inner.txt", "file", 5)])

    def test_list_files_of_a_missing_path_is_not_found_and_of_a_file_invalid(self) -> None:
        """Nothing at the path is NotFound; a file, or a path through one, is Invalid
        (not a directory)."""
        self._refuses_missing_and_wrong_kind(Capability.LIST_FILES, "list_files", wrong_kind="file")

    def test_file_operations_not_advertised_are_not_supported(self) -> None:
        """Without ``read_file``/``list_files`` the operation is NotSupported, never a guess."""
        adapter = self.adapter_instance
        capabilities = adapter.capabilities()
        missing = [
            c for c in (Capability.READ_FILE, Capability.LIST_FILES) if c not in capabilities
        ]
        if not missing:
            self.skipTest("the adapter advertises read_file and list_files")
        handle = self._created()
        path = f"{self._files_dir()}/file"
        if Capability.READ_FILE in missing:
            self._raises(NotSupported, adapter.read_file, handle, path)
        if Capability.LIST_FILES in missing:
            self._raises(NotSupported, adapter.list_files, handle, self.files_root)

    # -- exec -------------------------------------------------------------

    def test_an_isolated_sandbox_cannot_read_the_caller_s_files(self) -> None:
        """With ``isolation`` advertised, a path means the sandbox's own file, never the
        caller's: a command given the path of a secret file on the caller's machine
        reads the sandbox's file of that name (written first, so the test cannot pass
        by a command that reads nothing)."""
        self._require(Capability.ISOLATION)
        cmd, args = self._fixture("print_file")
        secret = f"caller-secret-{secrets.token_hex(8)}"
        with tempfile.TemporaryDirectory() as directory:
            path = os.path.join(directory, "secret.txt")
            with open(path, "w") as target:
                target.write(secret)
            handle = self._created()
            self.adapter_instance.write_file(handle, path, b"the sandbox's own")
            result = self.adapter_instance.exec(handle, cmd, [*args, path])
        self.assertNotIn(secret.encode(), result.output + result.stderr)
        self.assertIn(b"the sandbox's own", result.output)

    def test_file_operations_have_the_sandbox_user_s_rights(self) -> None:
        """read_file, list_files and write_file act as the sandbox's user: what its
        commands may not read, list or write is ``Denied`` to them too."""
        self._require(Capability.READ_FILE)
        self._require(Capability.LIST_FILES)
        cmd, args = self._fixture("make_private")
        adapter = self.adapter_instance
        handle = self._created()
        base = f"{self.files_root}/private-{secrets.token_hex(4)}"
        adapter.write_file(handle, f"{base}/file.txt", b"kept from the caller")
        adapter.write_file(handle, f"{base}/closed/inside.txt", b"x")
        for path in (f"{base}/file.txt", f"{base}/closed"):
            result = adapter.exec(handle, cmd, [*args, path])
            self.assertEqual(result.exit_code, 0, result.stderr)
        with self.assertRaises(Denied):
            adapter.read_file(handle, f"{base}/file.txt")
        with self.assertRaises(Denied):
            adapter.list_files(handle, f"{base}/closed")
        with self.assertRaises(Denied):
            adapter.write_file(handle, f"{base}/closed/new.txt", b"y")

    def test_exec_collects_output_with_zero_exit(self) -> None:
        """exec returns ExecResult(output, 0) whose output holds the expected stdout."""
        cmd, args, expected = self._fixture("exec_ok")
        result = self.adapter_instance.exec(self._created(), cmd, args)
        self.assertIsInstance(result, ExecResult)
        self.assertIsInstance(result.output, bytes)
        self.assertEqual(result.exit_code, 0)
        self.assertIn(_as_bytes(expected), result.output)

    def test_exec_returns_a_nonzero_exit_as_data(self) -> None:
        """A nonzero exit is returned as the exact code in ExecResult, never raised."""
        cmd, args, code = self._fixture("exec_fail")
        result = self.adapter_instance.exec(self._created(), cmd, args)
        self.assertIsInstance(result, ExecResult)
        self.assertEqual(result.exit_code, code)

    def test_exec_in_a_missing_dir_is_invalid_and_the_sandbox_runs_on(self) -> None:
        """exec with a ``dir`` that does not exist raises ``Invalid(("dir", ...))`` (not an
        exit code, not the provider's own words), and the next exec on the sandbox runs
        as usual."""
        adapter = self.adapter_instance
        handle = self._created()
        cmd, args, expected = self._fixture("exec_ok")
        missing = f"/managoat-conformance-missing-{secrets.token_hex(4)}/dir"
        with self.assertRaises(Invalid) as caught:
            adapter.exec(handle, cmd, args, dir=missing)
        self.assertEqual(reasons.reason_of(caught.exception), reasons.DIR, caught.exception)
        result = adapter.exec(handle, cmd, args)
        self.assertEqual(result.exit_code, 0)
        self.assertIn(_as_bytes(expected), result.output)

    def test_spawn_in_a_missing_dir_is_invalid_and_the_sandbox_runs_on(self) -> None:
        """spawn with a ``dir`` that does not exist raises ``Invalid(("dir", ...))`` (no
        command starts to fail there), and the next spawn on the sandbox runs to its
        Exit(0)."""
        handle = self._created()
        cmd, args = self._fixture("spawn_ok")
        missing = f"/managoat-conformance-missing-{secrets.token_hex(4)}/dir"
        refused = self._raises(
            Invalid,
            self._spawn,
            handle,
            cmd,
            args,
            owner=Mailbox(),
            stdin=False,
            dir=missing,
        )
        self.assertEqual(reasons.reason_of(refused), reasons.DIR, refused)
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))

    def test_exec_deadline_is_one_bound_that_output_never_extends(self) -> None:
        """A finite exec timeout raises Unavailable(("exec_timeout", t)) in time, output or not.

        With 0.5 s against a command that prints for at least 5 s, exec
        raises well before the command would finish (a bound, not a race);
        ``timeout=0`` raises the same at once (within one frame timeout).
        """
        cmd, args = self._fixture("exec_slow")
        adapter = self.adapter_instance
        handle = self._created()
        started = time.monotonic()
        error = self._raises(Unavailable, adapter.exec, handle, cmd, args, timeout=EXEC_DEADLINE)
        elapsed = time.monotonic() - started
        self.assertEqual(error.detail, (reasons.EXEC_TIMEOUT, EXEC_DEADLINE))
        self.assertLess(elapsed, EXEC_DEADLINE_BOUND, "exec outlived its deadline")
        started = time.monotonic()
        error = self._raises(Unavailable, adapter.exec, handle, cmd, args, timeout=0)
        elapsed = time.monotonic() - started
        self.assertEqual(error.detail, (reasons.EXEC_TIMEOUT, 0))
        self.assertLess(elapsed, self.frame_timeout, "timeout=0 must raise at once")

    def test_an_expired_exec_deadline_is_deadline_expired_and_a_timeout_error(self) -> None:
        """Every expired deadline raises one type: exec's is ``DeadlineExpired(("exec_timeout",
        t))``, an ``Unavailable`` that ``except TimeoutError`` catches too.

        Both with 0.5 s against a command that prints for at least 5 s
        (``exec_slow``) and with ``timeout=0``, which expires before anything runs.
        """
        cmd, args = self._fixture("exec_slow")
        adapter = self.adapter_instance
        handle = self._created()
        for timeout in (EXEC_DEADLINE, 0):
            error = self._raises(DeadlineExpired, adapter.exec, handle, cmd, args, timeout=timeout)
            self.assertIsInstance(error, TimeoutError, "DeadlineExpired must be a TimeoutError")
            self.assertIsInstance(error, Unavailable, "DeadlineExpired must be an Unavailable")
            self.assertEqual(error.detail, (reasons.EXEC_TIMEOUT, timeout))

    def test_a_negative_or_nan_exec_timeout_is_invalid_before_anything_runs(self) -> None:
        """exec with a negative or NaN ``timeout`` is ``Invalid`` (naming ``timeout`` and its
        range), raised at once before anything runs — never a deadline's expiry — and the
        sandbox runs on."""
        cmd, args, expected = self._fixture("exec_ok")
        adapter = self.adapter_instance
        handle = self._created()
        for timeout in (-1, -0.5, float("nan")):
            started = time.monotonic()
            error = self._raises(Invalid, adapter.exec, handle, cmd, args, timeout=timeout)
            elapsed = time.monotonic() - started
            self.assertLess(elapsed, self.frame_timeout, f"timeout={timeout} must fail at once")
            self.assertIn("timeout", str(error), f"Invalid must name the timeout: {error!r}")
        self.assertIn(_as_bytes(expected), adapter.exec(handle, cmd, args).output)

    def test_exec_output_past_max_bytes_is_truncated(self) -> None:
        """exec holds at most ``max_bytes`` bytes of output: a command printing exactly
        ``nbytes`` comes back whole with ``max_bytes=nbytes``, and one byte less is
        ``Truncated(("max_bytes", nbytes - 1))``, after which the sandbox runs on."""
        cmd, args, nbytes = self._fixture("spawn_bulk")
        adapter = self.adapter_instance
        handle = self._created()
        result = adapter.exec(handle, cmd, args, max_bytes=nbytes)
        self.assertEqual((len(result.output), result.exit_code), (nbytes, 0))
        error = self._raises(Truncated, adapter.exec, handle, cmd, args, max_bytes=nbytes - 1)
        self.assertEqual(error.detail, (reasons.MAX_BYTES, nbytes - 1))
        ok_cmd, ok_args, expected = self._fixture("exec_ok")
        self.assertIn(_as_bytes(expected), adapter.exec(handle, ok_cmd, ok_args).output)

    def test_exec_merges_stderr_only_when_asked(self) -> None:
        """stderr_to_stdout=True collects both streams; by default stderr is left out."""
        cmd, args, out_part, err_part = self._fixture("exec_mixed")
        adapter = self.adapter_instance
        handle = self._created()
        merged = adapter.exec(handle, cmd, args, stderr_to_stdout=True)
        self.assertIn(_as_bytes(out_part), merged.output)
        self.assertIn(_as_bytes(err_part), merged.output)
        plain = adapter.exec(handle, cmd, args)
        self.assertIn(_as_bytes(out_part), plain.output)
        self.assertNotIn(_as_bytes(err_part), plain.output)

    def test_exec_keeps_stderr_apart_unless_merged(self) -> None:
        """Unmerged, the result's ``stderr`` holds the command's stderr (and never its
        stdout); merged, ``stderr`` is empty. Unpacking stays two elements."""
        cmd, args, out_part, err_part = self._fixture("exec_mixed")
        adapter = self.adapter_instance
        handle = self._created()
        plain = adapter.exec(handle, cmd, args)
        output, code = plain
        self.assertEqual((output, code), (plain.output, plain.exit_code))
        self.assertIsInstance(plain.stderr, bytes)
        self.assertIn(_as_bytes(err_part), plain.stderr)
        self.assertNotIn(_as_bytes(out_part), plain.stderr)
        merged = adapter.exec(handle, cmd, args, stderr_to_stdout=True)
        self.assertEqual(merged.stderr, b"")

    def test_output_of_a_background_child_comes_before_the_end(self) -> None:
        """A command ends once its output reached end of file — every writer closed, as
        with ``subprocess`` — not when its main process exits: what a background child
        still holding stdout prints afterwards is in ``exec``'s result and arrives
        before a spawn's Exit, whose code is the main process's (0)."""
        cmd, args, early, late = self._fixture("exec_late_child")
        adapter = self.adapter_instance
        handle = self._created()
        bound = self.frame_timeout + LATE_CHILD_BOUND
        result = adapter.exec(handle, cmd, args, timeout=bound)
        self.assertEqual(result.exit_code, 0)
        self.assertIn(_as_bytes(early), result.output)
        self.assertIn(
            _as_bytes(late), result.output, "exec lost output written after the main exit"
        )
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        end = box.expect(is_terminal(command.ref), bound)
        self.assertEqual(end, Exit(command.ref, 0))
        frames = box.history(command.ref)
        before_end = _stdout_of(frames[: frames.index(end)])
        self.assertIn(_as_bytes(early), before_end)
        self.assertIn(
            _as_bytes(late), before_end, "the Exit came before the background child's output"
        )
        self._assert_one_terminal_last(box, command.ref)

    def test_a_command_killed_by_a_signal_ends_with_128_plus_its_number(self) -> None:
        """A command a signal killed ends as shells report it, 128 + the signal's number
        (137 for SIGKILL), on every provider: ``exec``'s ``exit_code`` and a spawn's
        ``Exit`` alike, after the output it printed — never -1, never an error, nothing
        added to its stderr — and the sandbox runs the next command as before."""
        cmd, args, signum = self._fixture("exec_killed")
        ok_cmd, ok_args, ok_part = self._fixture("exec_ok")
        adapter = self.adapter_instance
        handle = self._created()
        result = adapter.exec(handle, cmd, args, timeout=5 * self.frame_timeout)
        self.assertEqual(result.exit_code, 128 + signum, f"exec's exit code, output {result!r}")
        self.assertNotEqual(result.output, b"", "exec lost what the command printed first")
        self.assertEqual(result.stderr, b"", "something else wrote into the command's stderr")
        after = adapter.exec(handle, ok_cmd, ok_args, timeout=5 * self.frame_timeout)
        self.assertEqual(after.exit_code, 0, f"the next command failed: {after!r}")
        self.assertIn(_as_bytes(ok_part), after.output)
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        end = self._terminal(box, command.ref)
        self.assertEqual(end, Exit(command.ref, 128 + signum))
        frames = box.history(command.ref)
        self.assertNotEqual(_stdout_of(frames[: frames.index(end)]), b"")
        self.assertEqual([frame for frame in frames if isinstance(frame, Stderr)], [])
        self._assert_one_terminal_last(box, command.ref)

    def test_merged_output_keeps_the_order_the_command_wrote(self) -> None:
        """With ``stderr_to_stdout=True`` the command's stdout and stderr are one pipe (as
        ``2>&1``): ``output`` is exactly what it wrote, in its order, every run, and
        ``stderr`` is empty."""
        cmd, args, expected = self._fixture("exec_ordered")
        adapter = self.adapter_instance
        handle = self._created()
        for run in range(ORDER_RUNS):
            result = adapter.exec(handle, cmd, args, stderr_to_stdout=True)
            self.assertEqual(
                (result.output, result.stderr, result.exit_code),
                (_as_bytes(expected), b"", 0),
                f"run {run + 1} of {ORDER_RUNS}: merged output not in the order written",
            )

    def test_concurrent_exec_on_one_sandbox_from_threads(self) -> None:
        """Several threads exec on one sandbox at once; every call gets its own full result."""
        cmd, args, expected = self._fixture("exec_ok")
        adapter = self.adapter_instance
        handle = self._created()
        bound = CONCURRENT_EXEC_BOUND_FRAMES * self.frame_timeout
        start = threading.Barrier(CONCURRENT_EXECS)
        results: list[ExecResult | Exception | None] = [None] * CONCURRENT_EXECS

        def run(slot: int) -> None:
            try:
                start.wait(bound)
                results[slot] = adapter.exec(handle, cmd, args)
            except Exception as error:
                results[slot] = error

        threads = [
            threading.Thread(target=run, args=(slot,), name=f"conformance-exec-{slot}", daemon=True)
            for slot in range(CONCURRENT_EXECS)
        ]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + bound
        for thread in threads:
            thread.join(max(deadline - time.monotonic(), 0))
        self.assertFalse(
            [thread.name for thread in threads if thread.is_alive()],
            f"concurrent exec calls still running after {bound} s",
        )
        for result in results:
            if not isinstance(result, ExecResult):
                self.fail(f"a concurrent exec failed: {result!r}")
            self.assertEqual(result.exit_code, 0)
            self.assertIn(_as_bytes(expected), result.output)

    # -- streaming commands -----------------------------------------------

    def test_frames_carry_the_ref_and_output_precedes_exactly_one_terminal_frame(self) -> None:
        """Every frame carries the command's ref; stdout bytes, then exactly one Exit(0), last."""
        cmd, args = self._fixture("spawn_ok")
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=False)
        first = cast(Stdout, box.expect(is_stdout(command.ref), self.frame_timeout))
        self.assertIsInstance(first.data, bytes)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))
        self._assert_one_terminal_last(box, command.ref)
        for frame in box.history():
            self.assertIsInstance(frame, (Stdout, Stderr, Exit, Error))
            self.assertEqual(frame.ref, command.ref, f"a frame with a foreign ref: {frame!r}")

    def test_stream_closed_without_exit_is_an_error_frame_never_an_exit(self) -> None:
        """A transport that closes without an exit ends in an Error frame, never a made-up Exit."""
        cmd, args = self._fixture("spawn_drop")
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=False)
        box.expect(is_stdout(command.ref), self.frame_timeout)
        end = self._terminal(box, command.ref)
        self.assertIsInstance(
            end, Error, f"closed without exit must be an Error frame, got {end!r}"
        )
        box.refute(is_exit(command.ref), QUIET_WINDOW)
        self._assert_one_terminal_last(box, command.ref)

    def test_error_frame_carries_a_taxonomy_error(self) -> None:
        """The reason of a terminal Error frame is a SandboxError instance."""
        cmd, args = self._fixture("spawn_drop")
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=False)
        end = self._terminal(box, command.ref)
        if not isinstance(end, Error):
            self.fail(f"closed without exit must be an Error frame, got {end!r}")
        self.assertIsInstance(end.reason, SandboxError)

    def test_write_stdin_after_exit_is_command_exited(self) -> None:
        """write_stdin is total: on a command that has exited it raises
        CommandExited("exited")."""
        cmd, args = self._fixture("spawn_ok")
        adapter = self.adapter_instance
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=True)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))
        error = self._raises(CommandExited, adapter.write_stdin, command, b"late\n")
        self.assertEqual(error.detail, reasons.EXITED)

    def test_stdin_round_trips_into_a_live_command_and_eof_ends_it(self) -> None:
        """Bytes written to stdin come back as stdout; close_stdin ends the command with Exit(0)."""
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=True)
        box.expect(is_stdout(command.ref), self.frame_timeout)
        adapter.write_stdin(command, b"ping")
        _collect_stdout(
            box,
            command.ref,
            lambda data: b"ping" in data,
            deadline=time.monotonic() + self.frame_timeout,
            what="the echoed 'ping'",
        )
        adapter.close_stdin(command)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))

    def test_an_owner_callback_that_raises_is_reported_and_delivery_goes_on(self) -> None:
        """An owner callback that raises is reported as Python reports an exception that
        ends a thread — through ``threading.excepthook``, shown by default — and
        delivery goes on: the command's one terminal frame still arrives."""
        cmd, args = self._fixture("spawn_ok")
        handle = self._created()
        failure = RuntimeError("an owner callback failed (conformance test)")
        reported: list[BaseException | None] = []
        original = threading.excepthook

        def hook(report: threading.ExceptHookArgs) -> None:
            if report.exc_value is failure:
                reported.append(report.exc_value)
            else:
                original(report)

        threading.excepthook = hook
        self.addCleanup(setattr, threading, "excepthook", original)
        box = Mailbox()
        raised = threading.Event()

        def owner(frame: Frame) -> None:
            box(frame)
            if not raised.is_set():
                raised.set()
                raise failure

        adapter = self.adapter_instance
        options: dict[str, Any] = {**self.spawn_opts, "owner": owner, "stdin": False}
        command = adapter.spawn(handle, cmd, args, **options)
        self.addCleanup(self._quietly, adapter.stop_command, command)
        terminal = self._terminal(box, command.ref)
        self.assertIsInstance(terminal, Exit, "a raising callback must not end the command")
        self.assertEqual(
            reported, [failure], "the callback's exception never reached threading.excepthook"
        )

    def test_stop_command_is_idempotent_and_silences_the_local_end(self) -> None:
        """stop_command succeeds twice; then nothing is delivered and stdin is
        CommandExited("detached")."""
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=True)
        box.expect(is_stdout(command.ref), self.frame_timeout)
        adapter.stop_command(command)
        box.clear()  # delivered before stop_command returned: allowed
        adapter.stop_command(command)
        box.refute(has_ref(command.ref), STOP_QUIET_WINDOW)
        for operation, data in ((adapter.write_stdin, (b"after-stop",)), (adapter.close_stdin, ())):
            error = self._raises(CommandExited, operation, command, *data)
            self.assertEqual(error.detail, reasons.DETACHED, f"{operation.__name__} after stop")

    def test_output_written_right_before_exit_arrives_before_the_exit(self) -> None:
        """Every chunk a command writes just before it exits is delivered before its Exit.

        ``spawn_stay`` is sent :data:`BURST_CHUNKS` lines at once and then EOF,
        so it echoes them all and exits right after the last one. When the
        terminal frame arrives, every echoed line must already have been
        delivered: an adapter that lets the exit overtake output it still
        holds fails here, whatever the size of what it holds.
        """
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=True)
        lines = [f"burst-{n:03d}\n".encode() for n in range(BURST_CHUNKS)]
        for line in lines:
            adapter.write_stdin(command, line)
        adapter.close_stdin(command)
        end = self._terminal(box, command.ref)
        self.assertEqual(end, Exit(command.ref, 0))
        frames = box.history(command.ref)
        before_exit = _stdout_of(frames[: frames.index(end)])
        late = [line for line in lines if line not in before_exit]
        self.assertFalse(
            late,
            f"{len(late)} of {len(lines)} lines echoed before the exit were not delivered "
            f"before the Exit frame (first: {late[:1]})",
        )
        self._assert_one_terminal_last(box, command.ref)

    def test_large_output_arrives_complete_then_one_exit(self) -> None:
        """A large output arrives whole (exactly nbytes of stdout), then exactly one Exit(0)."""
        cmd, args, nbytes = self._fixture("spawn_bulk")
        box = Mailbox()
        command = self._spawn(self._created(), cmd, args, owner=box, stdin=False)
        received = 0
        while True:
            frame = box.expect(has_ref(command.ref), self.frame_timeout)
            if isinstance(frame, Stdout):
                received += len(frame.data)
            elif frame.terminal:
                break
        self.assertEqual(frame, Exit(command.ref, 0))
        self.assertEqual(received, nbytes, "stdout bytes lost or duplicated")
        self._assert_one_terminal_last(box, command.ref)

    # -- detachable sessions ----------------------------------------------

    def test_attach_replays_from_byte_zero_then_tails(self) -> None:
        """attach replays the session's stdout from byte zero, then tails; both owners get output.

        A separate attacher thread attaches with its own mailbox and reports
        the replayed prefix (as many bytes as the original owner saw before
        the attach) and the tail that follows a write through the original
        command. Chunk boundaries are not promised, so bytes are compared.
        """
        self._require(Capability.ATTACH)
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        timeout = self.frame_timeout
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=True)
        pre_attach = cast(Stdout, box.expect(is_stdout(command.ref), timeout))
        sessions = adapter.list_sessions(handle)
        self.assertTrue(sessions, "list_sessions must list the spawned session")
        reports: queue.Queue[tuple[str, Any]] = queue.Queue()
        attacher = threading.Thread(
            target=self._attacher,
            args=(handle, sessions[0].id, len(pre_attach.data), reports),
            name="conformance-attacher",
            daemon=True,
        )
        attacher.start()
        self.assertEqual(self._report(reports, "replayed"), pre_attach.data)
        adapter.write_stdin(command, b"after-attach")
        _collect_stdout(
            box,
            command.ref,
            lambda data: b"after-attach" in data,
            deadline=time.monotonic() + timeout,
            what="'after-attach' (the original owner stays subscribed)",
        )
        self.assertIn(b"after-attach", self._report(reports, "tailed"))
        attacher.join(timeout)
        self.assertFalse(attacher.is_alive(), f"the attacher did not finish within {timeout} s")

    def _attacher(
        self,
        handle: Handle,
        session_id: str,
        replay_length: int,
        reports: queue.Queue[tuple[str, Any]],
    ) -> None:
        """The attach test's concurrent actor; reports ("kind", payload) or ("error", exc)."""
        adapter = self.adapter_instance
        deadline = time.monotonic() + ATTACHER_BUDGET_FRAMES * self.frame_timeout
        box = Mailbox()
        try:
            attached = adapter.attach(handle, session_id, owner=box, stdin=True)
        except Exception as error:
            reports.put(("error", error))
            return
        try:
            replay = _collect_stdout(
                box,
                attached.ref,
                lambda data: len(data) >= replay_length,
                deadline=deadline,
                what=f"{replay_length} replayed bytes",
            )
            reports.put(("replayed", replay[:replay_length]))
            tail = _collect_stdout(
                box,
                attached.ref,
                lambda data: b"after-attach" in data,
                deadline=deadline,
                what="'after-attach'",
                initial=replay[replay_length:],
            )
            reports.put(("tailed", tail))
        except Exception as error:
            reports.put(("error", error))
        finally:
            self._quietly(adapter.stop_command, attached)

    def _report(self, reports: queue.Queue[tuple[str, Any]], kind: str) -> Any:
        """The attacher's next report, which must be ``kind``, within one frame timeout."""
        try:
            got, payload = reports.get(timeout=self.frame_timeout)
        except queue.Empty:
            self.fail(f"the attacher reported no {kind} within {self.frame_timeout} s")
        if got == "error":
            self.fail(f"the attacher failed before reporting {kind}: {payload!r}")
        self.assertEqual(got, kind)
        return payload

    def test_attach_to_finished_session_replays_output_and_real_exit(self) -> None:
        """Attaching to a finished session replays its stdout, then its real Exit; stdin is closed.

        The attached command is not connected: write_stdin and close_stdin
        raise CommandExited("exited").
        """
        self._require(Capability.ATTACH)
        cmd, args, code = self._fixture("exec_fail")
        adapter = self.adapter_instance
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, code))
        sessions = adapter.list_sessions(handle)
        self.assertTrue(sessions, "list_sessions must list finished sessions")
        replay_box = Mailbox()
        attached = adapter.attach(handle, sessions[0].id, owner=replay_box, stdin=True)
        self.addCleanup(self._quietly, adapter.stop_command, attached)
        self.assertNotEqual(attached.ref, command.ref, "attach must mint a new ref")
        self.assertEqual(self._terminal(replay_box, attached.ref), Exit(attached.ref, code))
        self._assert_one_terminal_last(replay_box, attached.ref)
        self.assertEqual(
            _stdout_of(replay_box.history(attached.ref)), _stdout_of(box.history(command.ref))
        )
        for operation, data in ((adapter.write_stdin, (b"late",)), (adapter.close_stdin, ())):
            error = self._raises(CommandExited, operation, attached, *data)
            self.assertEqual(error.detail, reasons.EXITED, f"{operation.__name__} after the end")

    def test_stop_command_leaves_a_detachable_session_running(self) -> None:
        """stop_command detaches only this end: the detachable session goes on.

        A ``spawn_stay`` session spawned ``detachable=True`` is stopped; a
        new attach must then reach it live — what it writes is echoed, and
        EOF ends it with its real Exit(0). An adapter whose stop_command ends
        the remote process fails here.
        """
        self._require(Capability.ATTACH)
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        timeout = self.frame_timeout
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=True, detachable=True)
        box.expect(is_stdout(command.ref), timeout)
        adapter.stop_command(command)
        sessions = adapter.list_sessions(handle)
        self.assertEqual(len(sessions), 1, f"expected exactly one session, got {sessions}")
        rejoined_box = Mailbox()
        rejoined = adapter.attach(handle, sessions[0].id, owner=rejoined_box, stdin=True)
        self.addCleanup(self._quietly, adapter.stop_command, rejoined)
        try:
            adapter.write_stdin(rejoined, b"still-running\n")
        except SandboxError as error:
            self.fail(f"the session did not outlive stop_command: write_stdin raised {error!r}")
        _collect_stdout(
            rejoined_box,
            rejoined.ref,
            lambda data: b"still-running" in data,
            deadline=time.monotonic() + timeout,
            what="the echo of 'still-running' (the session must outlive stop_command)",
        )
        adapter.close_stdin(rejoined)
        self.assertEqual(self._terminal(rejoined_box, rejoined.ref), Exit(rejoined.ref, 0))

    def test_list_sessions_says_how_a_session_ended_and_never_guesses(self) -> None:
        """A listed session says whether its command ended, and its exit code, only as known.

        While a ``spawn_stay`` session runs, its entry is not ``ended=True`` and
        has no ``exit_code``. Once an ``exec_fail`` spawn's ``Exit(code)`` has
        arrived its entry is not ``ended=False``, and with ``ended=True`` its
        ``exit_code`` is that real code or None (not recorded), never another; the
        ``spawn_stay`` session once ended by EOF likewise (code 0). An entry whose
        ``ended`` is None or False has no ``exit_code``. A provider that forgets
        finished sessions may leave them out.
        """
        self._require(Capability.ATTACH)
        stay_cmd, stay_args = self._fixture("spawn_stay")
        cmd, args, code = self._fixture("exec_fail")
        adapter = self.adapter_instance
        handle = self._created()

        def entries() -> dict[str | None, Session]:
            found: dict[str | None, Session] = {s.id: s for s in adapter.list_sessions(handle)}
            for session in found.values():
                if session.ended is not True:
                    self.assertIsNone(session.exit_code, f"an exit code but not ended: {session}")
            return found

        def check_ended(session: Session | None, real: int) -> None:
            if session is not None:
                self.assertIsNot(session.ended, False, f"listed as running after {real}")
                if session.ended:
                    self.assertIn(session.exit_code, (real, None), f"a guessed exit: {session}")

        box, failed_box = Mailbox(), Mailbox()
        running = self._spawn(handle, stay_cmd, stay_args, owner=box, stdin=True, detachable=True)
        box.expect(is_stdout(running.ref), self.frame_timeout)
        failed = self._spawn(handle, cmd, args, owner=failed_box, stdin=False, detachable=True)
        self.assertEqual(self._terminal(failed_box, failed.ref), Exit(failed.ref, code))
        listed = entries()
        check_ended(listed.get(failed.session_id), code)
        live = listed.get(running.session_id)
        if live is not None:
            self.assertIsNot(live.ended, True, f"a running session listed as ended: {live}")
        adapter.close_stdin(running)
        self.assertEqual(self._terminal(box, running.ref), Exit(running.ref, 0))
        check_ended(entries().get(running.session_id), 0)

    def test_terminate_session_stops_a_detached_session_and_keeps_the_sandbox(self) -> None:
        """terminate_session on a detached session succeeds twice; the sandbox stays usable."""
        self._require(Capability.TERMINATE_SESSION)
        cmd, args = self._fixture("spawn_stay")
        ok_cmd, ok_args, expected = self._fixture("exec_ok")
        adapter = self.adapter_instance
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=True)
        box.expect(is_stdout(command.ref), self.frame_timeout)
        sessions = adapter.list_sessions(handle)
        self.assertEqual(len(sessions), 1, f"expected exactly one session, got {sessions}")
        adapter.stop_command(command)
        timeout = min(self.frame_timeout, 30)
        adapter.terminate_session(handle, sessions[0].id, timeout=timeout)
        adapter.terminate_session(handle, sessions[0].id, timeout=timeout)
        self.assertIsInstance(adapter.get(handle), Info)
        result = adapter.exec(handle, ok_cmd, ok_args)
        self.assertEqual(result.exit_code, 0)
        self.assertIn(_as_bytes(expected), result.output)

    def test_a_termination_the_session_outlasts_is_deadline_expired(self) -> None:
        """A graceful terminate_session whose session ignores it past the timeout raises
        ``DeadlineExpired("termination_timeout")`` (a ``TimeoutError``) on every adapter —
        never ``termination_unconfirmed``. Where the provider's graceful stop cannot be
        ignored it may succeed instead, and then the session has ended."""
        self._require(Capability.TERMINATE_SESSION)
        cmd, args = self._fixture("spawn_deaf")
        adapter = self.adapter_instance
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        box.expect(is_stdout(command.ref), self.frame_timeout)
        [session] = adapter.list_sessions(handle)
        try:
            adapter.terminate_session(handle, session.id, timeout=DEAF_TERMINATION_TIMEOUT)
        except DeadlineExpired as error:
            self.assertEqual(error.detail, reasons.TERMINATION_TIMEOUT)
            return
        except SandboxError as error:
            self.fail(
                "a termination that outlasts its timeout must be "
                f"DeadlineExpired('termination_timeout'), got {error!r}"
            )
        self.assertTrue(
            self._terminal(box, command.ref).terminal,
            "terminate_session succeeded but the session did not end",
        )

    def test_a_detachable_spawn_returns_its_session_id_which_lists_and_attaches(self) -> None:
        """spawn(detachable=True).session_id is a str that list_sessions names, and
        attaching to it rejoins that command (its output, then its exit)."""
        self._require(Capability.ATTACH)
        cmd, args = self._fixture("spawn_stay")
        adapter = self.adapter_instance
        handle = self._created()
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=True, detachable=True)
        self.assertIsInstance(command.session_id, str)
        first = cast(Stdout, box.expect(is_stdout(command.ref), self.frame_timeout))
        self.assertIn(command.session_id, [session.id for session in adapter.list_sessions(handle)])
        attached_box = Mailbox()
        attached = adapter.attach(handle, cast(str, command.session_id), owner=attached_box)
        self.addCleanup(self._quietly, adapter.stop_command, attached)
        self.assertEqual(attached.session_id, command.session_id)
        replay = _collect_stdout(
            attached_box,
            attached.ref,
            lambda out: len(out) >= len(first.data),
            deadline=time.monotonic() + self.frame_timeout,
            what="the attached replay",
        )
        self.assertTrue(replay.startswith(first.data), f"replay {replay!r} vs {first.data!r}")
        adapter.close_stdin(command)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))
        self.assertEqual(self._terminal(attached_box, attached.ref), Exit(attached.ref, 0))

    def test_terminate_session_of_an_ended_or_absent_session_is_one_answer(self) -> None:
        """terminate_session of a session that has ended succeeds in every advertised mode;
        of an absent one (never there, forgotten) it succeeds gracefully and is
        Unavailable("termination_unconfirmed") in force mode — whatever the provider
        remembers, the answer is the same."""
        self._require(Capability.TERMINATE_SESSION)
        cmd, args = self._fixture("spawn_ok")
        adapter = self.adapter_instance
        force = Capability.FORCE_TERMINATE_SESSION in adapter.capabilities()
        handle = self._created()
        timeout = min(self.frame_timeout, 30)
        absent = f"nosuchsession{secrets.token_hex(4)}"
        try:
            adapter.terminate_session(handle, absent, timeout=timeout)
        except SandboxError as error:
            self.fail(f"graceful termination of an absent session must succeed, raised {error!r}")
        if force:
            unconfirmed = self._raises(
                Unavailable,
                adapter.terminate_session,
                handle,
                absent,
                timeout=timeout,
                mode="force",
            )
            self.assertEqual(unconfirmed.detail, reasons.TERMINATION_UNCONFIRMED)
        box = Mailbox()
        command = self._spawn(handle, cmd, args, owner=box, stdin=False)
        self.assertEqual(self._terminal(box, command.ref), Exit(command.ref, 0))
        sessions = adapter.list_sessions(handle)
        self.assertEqual(len(sessions), 1, f"expected exactly one session, got {sessions}")
        for mode in ("graceful", "force") if force else ("graceful",):
            adapter.terminate_session(handle, sessions[0].id, timeout=timeout, mode=mode)

    # -- capability coherence ---------------------------------------------

    def test_empty_allowlist_is_accepted_as_deny_all(self) -> None:
        """apply_network_policy accepts allow=[] (deny all egress) and a non-empty allowlist."""
        self._require(Capability.NETWORK_POLICY)
        adapter = self.adapter_instance
        handle = self._created()
        adapter.apply_network_policy(handle, NetworkPolicy(allow=[]))
        adapter.apply_network_policy(handle, NetworkPolicy(allow=["api.example.com"]))

    def test_operations_behind_an_unadvertised_capability_are_not_supported(self) -> None:
        """Each operation behind a capability the adapter does not advertise (suspend
        and resume, attach, terminate_session, apply_network_policy, create_new)
        raises NotSupported: never a success, never another error."""
        adapter = self.adapter_instance
        capabilities = adapter.capabilities()
        gated: list[tuple[str, Callable[[Handle], object]]] = [
            (Capability.SUSPEND, adapter.suspend),
            (Capability.SUSPEND, adapter.resume),
            (Capability.ATTACH, lambda handle: adapter.attach(handle, "absent-session")),
            (
                Capability.TERMINATE_SESSION,
                lambda handle: adapter.terminate_session(handle, "absent-session"),
            ),
            (
                Capability.NETWORK_POLICY,
                lambda handle: adapter.apply_network_policy(handle, NetworkPolicy(allow=[])),
            ),
            (Capability.CREATE_NEW, lambda _handle: adapter.create_new(self._name())),
        ]
        missing = [(name, call) for name, call in gated if name not in capabilities]
        if not missing:
            self.skipTest("the adapter advertises every capability-gated operation checked here")
        handle = self._created()
        for name, call in missing:
            with self.subTest(capability=name):
                self._raises(NotSupported, call, handle)

    def test_unadvertised_checkpointing_raises_not_supported(self) -> None:
        """Without the checkpoint capability, create and restore raise NotSupported."""
        adapter = self.adapter_instance
        if Capability.CHECKPOINT in adapter.capabilities():
            self.skipTest(
                "the adapter advertises 'checkpoint'; this test covers adapters that do not"
            )
        handle = self._created()
        self._raises(NotSupported, adapter.create_checkpoint, handle)
        self._raises(NotSupported, adapter.restore_checkpoint, handle, "cp-1")
