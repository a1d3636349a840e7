"""The reference adapter: real, in-memory, thread-safe, provider ``"fake"``.

Commands are scripts (:mod:`managoat_sandbox.testing.script`): the command
name is recorded, each argument is an instruction. Every spawn is a detachable
session whose "process" is a thread; each command (spawn or attach) is one
subscription with its own reader thread, fed through an inbox, so replay and
subscription happen in one critical section and no frame is lost or doubled.

Files are bytes stored at the path given; the only directories are ``/``
and those holding a written file, so ``exec``/``spawn`` with any other
``dir`` is ``Invalid(("dir", ...))``, as on a real sandbox.

Each instance has its own state, in *worlds*: the setting ``("fake",
"world")`` (default ``"default"``) names the one ``create``, ``create_new``,
``build_handle`` and ``list_all_names`` use, as ``local.root`` names a
directory or a hosted adapter's URL a control plane. A handle carries the
world it was made in (``Handle.private``) and every operation on it acts
there, whatever is configured when it runs; a handle whose ``private`` is
``None`` uses the configured world. Test-side controls: :meth:`Fake.reset`,
:meth:`Fake.policy`, :meth:`Fake.file` and :meth:`Fake.fail_next`.
"""

from __future__ import annotations

import copy
import itertools
import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import attrs

from .. import _args, config, reasons
from .._collect import collect_frames
from .._deadline import Deadline
from .._streaming import Stream, new_ref
from ..contract import Adapter, Capability, Owner
from ..errors import (
    AlreadyExists,
    CommandExited,
    Invalid,
    NotFound,
    NotSupported,
    SandboxError,
    Unavailable,
)
from ..files import collect
from ..frames import Error, Exit, Frame, Stderr, Stdout
from ..reasons import Reason
from ..types import (
    Command,
    ExecResult,
    FileInfo,
    Handle,
    Info,
    NetworkPolicy,
    Session,
    TransferProgress,
)
from . import fake_tree
from .script import Deaf, Drop, Emit, ExitWith, Instruction, Sleep, Stay, parse

__all__ = ["Fake"]

_EOF = object()
_KILL = object()
_WAKE = object()

#: Operations ``fail_next`` can make fail (``build_handle`` and ``stop_command`` are exempt).
FAULTABLE = frozenset(
    {
        "create", "create_new", "get", "destroy", "list_all_names", "suspend", "resume",
        "write_file", "read_file", "list_files", "exec", "spawn", "write_stdin",
        "close_stdin", "list_sessions", "attach", "terminate_session",
        "apply_network_policy", "public_url", "create_checkpoint", "restore_checkpoint",
        "upload", "download",
    }
)  # fmt: skip


#: The world of a Fake when ``("fake", "world")`` is not configured.
DEFAULT_WORLD = "default"


def configured_world() -> str:
    """The Fake world the configuration names now."""
    world = config.get("fake", "world")
    return world if isinstance(world, str) else DEFAULT_WORLD


@attrs.define(eq=False)
class _Subscription:
    """One command's view of a session: its stream and the inbox feeding it."""

    stream: Stream
    inbox: queue.SimpleQueue[Any] = attrs.field(factory=queue.SimpleQueue)


@attrs.define(eq=False)
class _Session:
    """A detachable session: the script's thread, its output buffer, its verdict."""

    id: str
    command: str
    created_at: datetime
    buffer: list[tuple[str, Any]] = attrs.field(factory=list)
    verdict: tuple[str, Any] | None = None
    subscribers: list[_Subscription] = attrs.field(factory=list)
    stdin: queue.SimpleQueue[Any] = attrs.field(factory=queue.SimpleQueue)
    killed: threading.Event = attrs.field(factory=threading.Event)
    #: Set by every kill but a graceful termination (which a ``deaf`` pause ignores).
    forced: threading.Event = attrs.field(factory=threading.Event)
    thread: threading.Thread | None = None


@attrs.define(eq=False)
class _Sandbox:
    status: str = "running"
    files: dict[str, bytes] = attrs.field(factory=dict)
    modes: dict[str, int] = attrs.field(factory=dict)
    #: Directories an upload made (with their modes), and the links it made.
    dirs: dict[str, int] = attrs.field(factory=dict)
    links: dict[str, str] = attrs.field(factory=dict)
    policy: NetworkPolicy | None = None
    sessions: dict[str, _Session] = attrs.field(factory=dict)
    instance_id: str | None = None


@attrs.frozen(eq=False)
class _CommandState:
    """What a Fake ``Command.private`` holds."""

    subscription: _Subscription
    session: _Session


def _is_dir(sandbox: _Sandbox, path: str) -> bool:
    """``/``, a directory an upload made, or one holding a file or link."""
    prefix = path.rstrip("/") + "/"
    return (
        prefix == "/"
        or prefix[:-1] in sandbox.dirs
        or any(name.startswith(prefix) for name in (*sandbox.files, *sandbox.links, *sandbox.dirs))
    )


def _file_on_the_way(sandbox: _Sandbox, path: str) -> str | None:
    """The written file that ``path`` leads through (``/f`` for ``/f/x``), if any."""
    parts = path.strip("/").split("/")[:-1]
    for end in range(1, len(parts) + 1):
        ancestor = "/" + "/".join(parts[:end])
        if ancestor in sandbox.files:
            return ancestor
    return None


def _missing(sandbox: _Sandbox, path: str) -> SandboxError:
    """Why nothing is at ``path``: ``Invalid`` when it leads through a file, as the
    providers answer, else ``NotFound``."""
    through = _file_on_the_way(sandbox, path)
    if through is not None:
        return Invalid(Reason.PATH, problem=f"{through!r} is not a directory")
    return NotFound(Reason.PATH, path=path)


def _listing(sandbox: _Sandbox, path: str) -> list[FileInfo]:
    """The entries directly under directory ``path``: written files, uploaded
    directories and links, and the directories their paths imply."""
    prefix = path.rstrip("/") + "/"
    entries: dict[str, FileInfo] = {}
    for name in (*sandbox.files, *sandbox.links, *sandbox.dirs):
        if not name.startswith(prefix):
            continue
        first, _, rest = name[len(prefix) :].partition("/")
        full = prefix + first
        if rest or full in sandbox.dirs:
            mode = sandbox.dirs.get(full, 0o755)
            entries.setdefault(first, FileInfo(first, full, "dir", 0, mode))
        elif full in sandbox.links:
            entries[first] = FileInfo(first, full, "symlink", len(sandbox.links[full]), 0o777)
        else:
            data = sandbox.files[full]
            entries[first] = FileInfo(
                first, full, "file", len(data), sandbox.modes.get(full, _DEFAULT_MODE)
            )
    return list(entries.values())


#: The permission bits of a file written without a mode.
_DEFAULT_MODE = 0o644


def _check_dir(sandbox: _Sandbox, dir: str | None) -> None:
    """``Invalid(("dir", ...))`` unless ``dir`` is ``None``, ``/``, or a directory holding
    a written file (the Fake's only directories)."""
    if dir is None:
        return
    prefix = dir.rstrip("/") + "/"
    if not _is_dir(sandbox, prefix):
        raise Invalid(Reason.DIR, problem=reasons.no_such_dir(dir))


def _exec_frames(program: Sequence[Instruction], deadline: Deadline) -> Iterator[Frame]:
    """The frames (``ref`` ``None``) of ``program`` run as an exec, as it runs: ``sleep``
    and ``deaf`` really wait, but a pause that would outlast ``deadline`` waits out only
    what is left of it and raises its error; ``stay`` meets a closed stdin (nothing);
    ``drop`` is an ``Error`` (``Unavailable("closed_before_exit")``) and the end. At the
    program's end comes the ``Exit`` with the code of its last ``exit`` (else 0)."""
    code = 0
    for step in program:
        if isinstance(step, Emit):
            yield (Stderr if step.stream == 2 else Stdout)(None, step.data)
        elif isinstance(step, Sleep | Deaf):
            remaining = deadline.remaining()
            if remaining is not None and remaining < step.seconds:
                threading.Event().wait(remaining)
                raise deadline.error()
            threading.Event().wait(step.seconds)
        elif isinstance(step, ExitWith):
            code = step.code
        elif isinstance(step, Drop):
            yield Error(None, Unavailable(Reason.CLOSED_BEFORE_EXIT))
            return
    yield Exit(None, code)


class Fake(Adapter):
    """In-memory reference adapter; see the module docstring."""

    provider = "fake"

    _CAPABILITIES = frozenset(
        {
            Capability.SUSPEND,
            Capability.NETWORK_POLICY,
            Capability.ATTACH,
            Capability.PUBLIC_URL,
            Capability.TERMINATE_SESSION,
            Capability.FORCE_TERMINATE_SESSION,
            Capability.CREATE_NEW,
            Capability.READ_FILE,
            Capability.LIST_FILES,
            Capability.TRANSFER,
        }
    )

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._worlds: dict[str, dict[str, _Sandbox]] = {}
        self._faults: dict[str, list[SandboxError]] = {}
        self._ids = itertools.count(1)

    # -- test-side controls ---------------------------------------------------

    def reset(self) -> None:
        """Forget every sandbox and fault; end every session silently."""
        with self._lock:
            sandboxes = [box for world in self._worlds.values() for box in world.values()]
            self._worlds.clear()
            self._faults.clear()
            subscriptions = []
            for sandbox in sandboxes:
                for session in sandbox.sessions.values():
                    subscriptions.extend(session.subscribers)
                    session.subscribers.clear()
                    self._kill(session)
        for sub in subscriptions:
            sub.stream.stop()

    def policy(self, name: str) -> NetworkPolicy | None:
        """The last policy applied to ``name`` (in the configured world), verbatim, or
        ``None``."""
        with self._lock:
            sandbox = self._world().get(name)
            return None if sandbox is None else sandbox.policy

    def file(self, name: str, path: str) -> bytes | None:
        """The bytes written at ``path`` in ``name`` (in the configured world), or ``None``."""
        with self._lock:
            sandbox = self._world().get(name)
            return None if sandbox is None else sandbox.files.get(path)

    def fail_next(self, operation: str, error: SandboxError, times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` raise ``error``."""
        if operation not in FAULTABLE:
            raise ValueError(f"cannot inject faults into {operation!r}; one of {sorted(FAULTABLE)}")
        if not isinstance(error, SandboxError):
            raise TypeError("error must be a taxonomy error (a SandboxError instance)")
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise ValueError("times must be an int >= 1")
        with self._lock:
            self._faults.setdefault(operation, []).extend([error] * times)

    def _inject(self, operation: str) -> None:
        with self._lock:
            pending = self._faults.get(operation)
            if not pending:
                return
            error = pending.pop(0)
        raise copy.copy(error)

    # -- identity and lifecycle -----------------------------------------------

    def capabilities(self) -> frozenset[str]:
        return self._CAPABILITIES

    def build_handle(self, name: str) -> Handle:
        return Handle(self.provider, name, private=configured_world())

    def _world(self, handle: Handle | None = None) -> dict[str, _Sandbox]:
        """The sandboxes of ``handle``'s world (without one: of the configured world);
        called with the lock held."""
        where = None if handle is None else handle.private
        if not isinstance(where, str):
            where = configured_world()
        return self._worlds.setdefault(where, {})

    def _sandbox(self, handle: Handle) -> _Sandbox:
        sandbox = self._world(handle).get(handle.name)
        if sandbox is None:
            raise NotFound(Reason.SANDBOX, name=handle.name)
        return sandbox

    def create(self, name: str, **opts: Any) -> Handle:
        self._inject("create")
        handle = self.build_handle(name)
        with self._lock:
            self._world(handle).setdefault(name, _Sandbox())
        return handle

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        if opts:
            raise TypeError(f"unknown create_new options: {sorted(opts)}")
        self._inject("create_new")
        world = configured_world()
        with self._lock:
            sandboxes = self._worlds.setdefault(world, {})
            if name in sandboxes:
                raise AlreadyExists(Reason.SANDBOX, name=name)
            instance_id = f"fake-{next(self._ids)}"
            sandboxes[name] = _Sandbox(instance_id=instance_id)
        return Handle(self.provider, name, instance_id=instance_id, private=world)

    def get(self, handle: Handle) -> Info:
        self._inject("get")
        with self._lock:
            sandbox = self._sandbox(handle)
            raw = (
                {}
                if sandbox.instance_id is None
                else {"name": handle.name, "id": sandbox.instance_id}
            )
            return Info(status=sandbox.status, raw=raw)  # type: ignore[arg-type]

    def destroy(self, handle: Handle) -> None:
        """Remove the sandbox; its running sessions end as if the machine vanished."""
        self._inject("destroy")
        with self._lock:
            sandbox = self._world(handle).pop(handle.name, None)
            if sandbox is None:
                return
            for session in sandbox.sessions.values():
                if self._kill(session):
                    self._conclude(session, ("error", Unavailable(Reason.CLOSED_BEFORE_EXIT)))

    def list_all_names(self) -> frozenset[str]:
        self._inject("list_all_names")
        with self._lock:
            return frozenset(self._world())

    def suspend(self, handle: Handle) -> None:
        self._inject("suspend")
        with self._lock:
            self._sandbox(handle).status = "suspended"

    def resume(self, handle: Handle) -> Handle:
        self._inject("resume")
        with self._lock:
            self._sandbox(handle).status = "running"
        return handle

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Store the bytes at ``path`` verbatim, with ``mode`` (default 0o644)."""
        payload = bytes(data)
        self._inject("write_file")
        with self._lock:
            sandbox = self._sandbox(handle)
            sandbox.files[path] = payload
            sandbox.modes[path] = _DEFAULT_MODE if mode is None else mode

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes written at ``path``; a directory (a prefix of written files), or a
        path through a written file, is ``Invalid``, anything else ``NotFound``."""
        self._inject("read_file")
        with self._lock:
            sandbox = self._sandbox(handle)
            data = sandbox.files.get(path)
            if data is None:
                if _is_dir(sandbox, path):
                    raise Invalid(Reason.PATH, problem=f"{path!r} is a directory")
                raise _missing(sandbox, path)
        return collect((data,), max_bytes)

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """The written files directly under ``path`` and the directories their paths imply."""
        self._inject("list_files")
        with self._lock:
            sandbox = self._sandbox(handle)
            if path in sandbox.files:
                raise Invalid(Reason.PATH, problem=f"{path!r} is not a directory")
            if not _is_dir(sandbox, path):
                raise _missing(sandbox, path)
            return _listing(sandbox, path)

    def upload(
        self,
        handle: Handle,
        local_path: str,
        remote_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        """Store the local file, link or tree as ``remote_path`` (:mod:`.fake_tree`)."""
        Deadline(timeout).check()
        self._inject("upload")
        with self._lock:
            return fake_tree.upload(self._sandbox(handle), local_path, remote_path, progress)

    def download(
        self,
        handle: Handle,
        remote_path: str,
        local_path: str,
        *,
        progress: Callable[[TransferProgress], object] | None = None,
        timeout: float | None = None,
    ) -> TransferProgress:
        """Write the Fake's file, link or tree at ``remote_path`` to ``local_path``
        through the extractor every adapter uses (:mod:`.fake_tree`)."""
        Deadline(timeout).check()
        self._inject("download")
        with self._lock:
            tree = fake_tree.snapshot(self._sandbox(handle))
        return fake_tree.download(tree, remote_path, local_path, progress)

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Record the policy verbatim, ``allow=[]`` included."""
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"policy must be a NetworkPolicy, got {type(policy).__name__}")
        self._inject("apply_network_policy")
        with self._lock:
            self._sandbox(handle).policy = policy

    def public_url(self, handle: Handle) -> str | None:
        self._inject("public_url")
        with self._lock:
            self._sandbox(handle)
        return f"https://{handle.name}.fake.test"

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        """Always ``NotSupported``: the Fake does not advertise ``checkpoint``."""
        self._inject("create_checkpoint")
        raise NotSupported(Reason.CHECKPOINT)

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        """Always ``NotSupported``: the Fake does not advertise ``checkpoint``."""
        self._inject("restore_checkpoint")
        raise NotSupported(Reason.CHECKPOINT)

    # -- exec ---------------------------------------------------------------------

    def exec(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        timeout: float | None = None,
        stderr_to_stdout: bool = False,
        max_bytes: int | None = None,
    ) -> ExecResult:
        """Run the script as a spawn would, without a session, and collect it.

        ``stay`` meets a closed stdin and exits 0; ``sleep`` really waits, so
        ``timeout`` is one deadline over the whole run. The ``emit`` that takes the
        output past ``max_bytes`` is ``Truncated``: the script runs no further.
        """
        program = parse(tuple(args))
        deadline = Deadline(timeout)
        deadline.check()
        self._inject("exec")
        with self._lock:
            _check_dir(self._sandbox(handle), dir)
        return collect_frames(
            _exec_frames(program, deadline),
            deadline=deadline,
            stderr_to_stdout=stderr_to_stdout,
            max_bytes=max_bytes,
        )

    # -- streaming ------------------------------------------------------------

    def spawn(
        self,
        handle: Handle,
        cmd: str,
        args: Sequence[str] = (),
        *,
        owner: Owner | None = None,
        env: dict[str, str] | None = None,
        dir: str | None = None,
        stdin: bool = False,
        tty: bool = False,
        detachable: bool = False,
    ) -> Command:
        """Start the script as a detachable session (``env``/``tty`` ignored; ``dir``
        must exist, as for ``exec``)."""
        argv = tuple(args)
        program = parse(argv)
        self._inject("spawn")
        with self._lock:
            _check_dir(self._sandbox(handle), dir)
        sub = _Subscription(Stream(new_ref("fake"), owner, label="fake", stdin=stdin))
        with self._lock:
            sandbox = self._sandbox(handle)
            session = _Session(
                id=f"fake-sess-{next(self._ids)}",
                command=" ".join((cmd, *argv)),
                created_at=datetime.now(timezone.utc),
            )
            session.subscribers.append(sub)
            sandbox.sessions[session.id] = session
            session.thread = threading.Thread(
                target=self._run, args=(session, program), name=f"fake-{session.id}", daemon=True
            )
        self._subscribe(sub)
        session.thread.start()
        return self._command(sub, session)

    def _command(self, sub: _Subscription, session: _Session) -> Command:
        return Command(
            self.provider,
            sub.stream.ref,
            frames=sub.stream.frames,
            private=_CommandState(sub, session),
            session_id=session.id,
        )

    @staticmethod
    def _subscribe(sub: _Subscription) -> None:
        def pump(stream: Stream) -> None:
            while True:
                item = sub.inbox.get()
                if item is _WAKE:
                    return
                kind, payload = item
                if kind == "out":
                    stream.stdout(payload)
                elif kind == "err":
                    stream.stderr(payload)
                elif kind == "exit":
                    stream.exit(payload)
                    return
                else:
                    stream.fail(payload)
                    return

        sub.stream.start(pump, on_stop=lambda: sub.inbox.put(_WAKE))

    def _emit(self, session: _Session, item: tuple[str, Any]) -> None:
        with self._lock:
            if session.verdict is not None or session.killed.is_set():
                return
            session.buffer.append(item)
            for sub in session.subscribers:
                sub.inbox.put(item)

    def _conclude(self, session: _Session, verdict: tuple[str, Any]) -> None:
        """Record the session's verdict once and send it to current subscribers."""
        with self._lock:
            if session.verdict is not None:
                return
            session.verdict = verdict
            for sub in session.subscribers:
                sub.inbox.put(verdict)

    def _run(self, session: _Session, program: Sequence[Instruction]) -> None:
        for step in program:
            if session.killed.is_set():
                return
            if isinstance(step, Emit):
                self._emit(session, ("out" if step.stream == 1 else "err", step.data))
            elif isinstance(step, Sleep):
                session.killed.wait(step.seconds)
            elif isinstance(step, Deaf):
                self._deaf(session, step.seconds)
            elif isinstance(step, ExitWith):
                self._finish(session, ("exit", step.code))
            elif isinstance(step, Drop):
                self._finish(session, ("error", Unavailable(Reason.CLOSED_BEFORE_EXIT)))
            elif isinstance(step, Stay):
                self._stay(session)

    def _deaf(self, session: _Session, seconds: float) -> None:
        """Pause, deaf to a graceful termination: one that came meanwhile takes effect
        when the pause ends (exit 143, as SIGTERM's status); a forced kill ends it."""
        if session.forced.wait(seconds):
            return
        if session.killed.is_set():
            self._conclude(session, ("exit", 143))

    def _finish(self, session: _Session, verdict: tuple[str, Any]) -> None:
        with self._lock:
            if not session.killed.is_set():
                self._conclude(session, verdict)

    def _stay(self, session: _Session) -> None:
        while True:
            item = session.stdin.get()
            if item is _KILL:
                return
            if item is _EOF:
                self._finish(session, ("exit", 0))
                return
            self._emit(session, ("out", b"echo:" + item))

    @staticmethod
    def _alive(session: _Session) -> bool:
        return session.verdict is None and not session.killed.is_set()

    def _kill(self, session: _Session, *, graceful: bool = False) -> bool:
        """Kill the session's thread (``graceful``: as SIGTERM, which a ``deaf`` pause
        ignores); ``True`` if it was still running."""
        with self._lock:
            running = self._alive(session)
            session.killed.set()
            if not graceful:
                session.forced.set()
        session.stdin.put(_KILL)
        return running

    @staticmethod
    def _state(command: Command) -> _CommandState:
        if not isinstance(command, Command):
            raise TypeError(f"expected a Command, got {type(command).__name__}")
        if not isinstance(command.private, _CommandState):
            raise Invalid(
                Reason.HANDLE, problem="other_adapter", message="not a command of this Fake"
            )
        return command.private

    def write_stdin(self, command: Command, data: bytes) -> None:
        """Send bytes to a connected, live command; else ``CommandExited``."""
        payload = bytes(data)
        state = self._state(command)
        state.subscription.stream.check_stdin()
        self._inject("write_stdin")
        with self._lock:
            if not self._connected(state) or not self._alive(state.session):
                raise CommandExited(Reason.EXITED)
            state.session.stdin.put(payload)

    def close_stdin(self, command: Command) -> None:
        """Send EOF while connected (also after the process exited)."""
        state = self._state(command)
        state.subscription.stream.check_stdin()
        self._inject("close_stdin")
        with self._lock:
            if not self._connected(state):
                raise CommandExited(Reason.EXITED)
            state.session.stdin.put(_EOF)

    @staticmethod
    def _connected(state: _CommandState) -> bool:
        return state.subscription in state.session.subscribers

    def stop_command(self, command: Command) -> None:
        """Detach this subscription only; the session goes on and stays attachable."""
        state = self._state(command)
        with self._lock:
            if state.subscription in state.session.subscribers:
                state.session.subscribers.remove(state.subscription)
        state.subscription.stream.stop()

    # -- sessions -----------------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """Every session, finished ones included, with what the Fake knows of its end:
        ``ended`` False while it runs, else True with the code of its ``Exit`` (None
        for one that ended in an error or was killed before a verdict)."""
        self._inject("list_sessions")
        with self._lock:
            return [
                Session(
                    id=s.id,
                    command=s.command,
                    created_at=s.created_at,
                    ended=not self._alive(s),
                    exit_code=s.verdict[1] if s.verdict and s.verdict[0] == "exit" else None,
                )
                for s in self._sandbox(handle).sessions.values()
            ]

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session's output and verdict, or replay then tail, atomically."""
        self._inject("attach")
        sub = _Subscription(Stream(new_ref("fake"), owner, label="fake", stdin=stdin))
        with self._lock:
            sandbox = self._world(handle).get(handle.name)
            session = None if sandbox is None else sandbox.sessions.get(session_id)
            if session is None:
                raise NotFound(Reason.SESSION, name=session_id)
            for item in session.buffer:
                sub.inbox.put(item)
            if session.verdict is not None:
                sub.inbox.put(session.verdict)
            else:
                session.subscribers.append(sub)
        self._subscribe(sub)
        return self._command(sub, session)

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """Kill the session and deliver exit 137 once; a finished one keeps its verdict
        (success, in both modes). An absent session (never there, or of a sandbox that
        is gone) is success in graceful mode and ``Unavailable("termination_unconfirmed")``
        in force mode; a process still running when ``timeout`` passes is
        ``DeadlineExpired("termination_timeout")``.
        """
        timeout_ms = _args.termination_ms(timeout)
        self._inject("terminate_session")
        with self._lock:
            sandbox = self._world(handle).get(handle.name)
            session = None if sandbox is None else sandbox.sessions.get(session_id)
        if session is None:
            if mode == "force":
                raise Unavailable(Reason.TERMINATION_UNCONFIRMED)
            return
        self._kill(session, graceful=mode == "graceful")
        thread = session.thread
        if thread is not None and thread is not threading.current_thread():
            deadline = Deadline(timeout_ms / 1000, reason=Reason.TERMINATION_TIMEOUT)
            thread.join(deadline.remaining())
            if thread.is_alive():
                raise deadline.error()
        self._conclude(session, ("exit", 137))
