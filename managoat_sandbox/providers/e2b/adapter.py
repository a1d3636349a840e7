"""The ``e2b`` adapter: E2B sandboxes over plain HTTP (REST + envd's Connect protocol).

Identity. E2B assigns sandbox ids; callers think in names. A sandbox is
created with metadata ``fountain_name=<name>`` (and ``fountain=1``), a TTL of
1800 s and ``autoPause``, and is found again by that metadata, running or
paused. ``create`` adopts an existing name; a paused sandbox is resumed
(``connect``) before any envd call, and the last network policy this adapter
applied to it is applied again after such a resume (E2B rebuilds the network
config from the snapshot; whether a ``PUT /network`` before the pause
survives is not guaranteed). ``destroy`` deletes every sandbox stamped with
the name. A create/create race can still make two sandboxes of one name.
``get``, ``suspend``, ``resume``, ``destroy`` and ``apply_network_policy``
always look the name up (they need the sandbox's state).

Remembered sandboxes. The operations that only talk to envd (``exec``,
``spawn``, ``write_file``, ``read_file``, ``list_files``, ``list_sessions``,
``attach``) remember, per
adapter instance and per control plane and account, the sandbox a name
resolved to and its envd access token, and use them without a lookup. The
entry is replaced by ``create`` and ``resume``, dropped by ``destroy`` and
``suspend``, by any lookup that finds the sandbox paused or another id, and
by any failed envd call (the next operation looks the name up again). When
envd refuses an operation's first call in a way that says the entry is out
of date — 401 (the token) or the edge proxy's 502 for a sandbox it cannot
reach (gone, or paused behind our back) — and the call was never dispatched
(a refusal of the request, not an error from a started process), the name
is looked up again (resuming the sandbox if it is paused) and, only when
that finds another sandbox, a new token or had to resume it, the call is
made once more. A refusal that the lookup cannot explain stands, and a
command that may have started is never sent twice.

envd. Every envd call carries the sandbox's ``X-Access-Token`` (from the
create/connect answer, else ``GET /sandboxes/{id}``) and goes to
``sandbox_url`` when configured, else to ``https://49983-<id>.<domain>``.

Files. ``write_file`` uploads with ``POST /files`` (then ``chmod`` for a
``mode``). ``read_file`` streams ``GET /files?path=&username=`` (sent with
``Accept-Encoding: identity``) into :func:`managoat_sandbox.files.collect`,
a chunk at a time, refusing at once a ``Content-Length`` over ``max_bytes``;
envd's 404 is ``NotFound``, its 400 (a directory) ``Invalid``, and a body cut
short ``Unavailable``. ``list_files`` is the unary Connect call
``filesystem.Filesystem/ListDir`` (JSON ``{"path", "depth": 1}``), whose
``not_found`` (404) is ``NotFound`` and ``invalid_argument`` (400: not a
directory) ``Invalid``; how entries become ``FileInfo`` is in :mod:`.files`.

Commands. ``exec`` and ``spawn`` are envd ``Start`` streams. ``exec`` checks
its deadline before resolving the name and again after it (``timeout=0``
makes no request), sends ``Connect-Timeout-Ms`` with a finite timeout (so envd kills
the process when the caller gives up), and collects with the shared
collector. stdin and EOF go to the process by **pid**, never by tag. While a
command streams, its sandbox's TTL is renewed every 240 s. ``stop_command``
closes this end only: the remote process goes on.

Detachable spawns run under a journaling shim (:mod:`.shim`); ``attach``
replays the journal from byte zero, tails it, and ends with the journaled exit
code. A session is attachable as soon as ``spawn`` returns: one whose shim
has not yet written its ``.cmd`` is recognised by its live, tagged shim in
envd's ``List`` (a look taken only when the ``.cmd`` is missing). Sessions
are the journaled commands (finished ones included). Without
``detachable=True`` nothing is journaled and the command cannot be attached.

Not supported: tty, checkpoints, ``terminate_session``, ``create_new``,
``destroy_once``; ``public_url`` answers ``None`` (E2B exposes per-port hosts,
but nothing opens a port, and a dead URL is worse than none).
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ... import _args, reasons
from ..._deadline import Deadline, collect_exec
from ..._http import HttpClient
from ..._streaming import StreamingAdapter
from ..._version import __version__
from ...contract import Capability, Owner
from ...errors import (
    DeadlineExpired,
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    SandboxError,
)
from ...types import Command, ExecResult, FileInfo, Handle, Info, NetworkPolicy, Session
from . import files, shim
from .api import ControlPlane, SandboxAccess, sandbox_id_of
from .end import E2BCommandEnd
from .envd import Envd, start_request
from .errors import PROVIDER
from .heartbeat import Heartbeats
from .process import open_process
from .settings import Settings

__all__ = ["E2B"]

HEARTBEAT_SECONDS = 240.0
IDLE_TIMEOUT_SECONDS = 120.0
_REMEMBERED = 4096
_SMALL_FILE = 64 * 1024
_STATUS: Mapping[Any, Any] = {"running": "running", "paused": "suspended"}

T = TypeVar("T")
#: What a name is remembered under: control plane, account (a digest of the key), name.
Key = tuple[str, str, str]
#: An operation's first envd call; the event is given to a ``Start`` as ``accepted``.
FirstCall = Callable[[Envd, threading.Event], T]


def _key(s: Settings, name: str) -> Key:
    """The same name under another control plane or API key is another sandbox."""
    return (s.base_url, hashlib.sha256(s.api_key.encode("utf-8")).hexdigest(), name)


def _stale(error: SandboxError, sandbox_id: str) -> bool:
    """Whether envd's refusal says a remembered sandbox or token is out of date.

    401 (the token), or the edge proxy's 502 for a sandbox it cannot reach
    (``"The sandbox was not found"``, for a killed or paused one) naming this
    sandbox, or no sandbox at all. Any other 502 (say, a gateway that lost an
    upstream it had already sent the request to) is not.
    """
    status, body = error.status, error.body
    if status is None:
        return False
    if status == 401:
        return isinstance(error, Denied)
    if status != 502 or not isinstance(body, Mapping):
        return False
    message = str(body.get("message", "")).lower()
    return (body.get("sandboxId", sandbox_id) == sandbox_id
            and ("not found" in message or "paused" in message))


def _chmod_target(path: str) -> tuple[str | None, str]:
    """Where the ``chmod`` of an uploaded ``path`` runs, and the operand it is given.

    ``/files`` takes sandbox paths, and so does a Start request's ``cwd``; an
    absolute path given as a command's *argument* is only the sandbox's own
    when the command sees the sandbox's root as ``/``. So an absolute path is
    reached relative to a ``cwd`` of ``/``, and a relative one (the user's
    home, for ``/files``) from the default ``cwd``, which is that home.
    """
    if path.startswith("/"):
        return "/", "./" + path.lstrip("/")
    return None, path


class E2B(StreamingAdapter):
    """E2B sandboxes; see the module docstring for what each operation does.

    ``heartbeat_interval`` (seconds between TTL renewals while a command
    streams) and ``idle_timeout`` (the longest silence tolerated on a stream
    before it is an ``Unavailable("timeout")``; envd sends a keepalive every
    50 s) exist for tests and unusual deployments; the defaults suit E2B.
    """

    provider = "e2b"
    command_type = E2BCommandEnd

    _CAPABILITIES = frozenset({Capability.SUSPEND, Capability.NETWORK_POLICY, Capability.ATTACH,
                               Capability.READ_FILE, Capability.LIST_FILES})

    def __init__(
        self,
        *,
        heartbeat_interval: float = HEARTBEAT_SECONDS,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
    ) -> None:
        self._http = HttpClient(user_agent=f"managoat_sandbox/{__version__}")
        self._api = ControlPlane(self._http)
        self._heartbeats = Heartbeats(_args.seconds(heartbeat_interval, "heartbeat_interval"))
        self._idle_timeout = _args.seconds(idle_timeout, "idle_timeout")
        self._lock = threading.Lock()
        self._sandboxes: OrderedDict[Key, SandboxAccess] = OrderedDict()
        self._policies: dict[str, tuple[str, ...]] = {}

    def capabilities(self) -> frozenset[str]:
        return self._CAPABILITIES

    # -- identity and lookup ------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        return Handle(self.provider, _args.sandbox_name(name))

    @staticmethod
    def _check_handle(handle: object) -> Handle:
        if not isinstance(handle, Handle):
            raise TypeError(f"expected a Handle, got {type(handle).__name__}")
        return handle

    def _found(self, s: Settings, handle: Handle) -> Mapping[str, Any]:
        """The newest sandbox stamped with the handle's name, or ``NotFound``."""
        matches = self._api.find(s, self._check_handle(handle).name)
        if not matches:
            raise NotFound(("sandbox", handle.name))
        return matches[0]

    # -- remembered sandboxes ---------------------------------------------------

    def _recall(self, key: Key) -> SandboxAccess | None:
        with self._lock:
            access = self._sandboxes.get(key)
            if access is not None:
                self._sandboxes.move_to_end(key)
            return access

    def _remember(self, key: Key, access: SandboxAccess) -> None:
        with self._lock:
            self._sandboxes[key] = access
            self._sandboxes.move_to_end(key)
            while len(self._sandboxes) > _REMEMBERED:
                self._sandboxes.popitem(last=False)

    def _forget(self, key: Key, sandbox_id: str | None = None, token: str | None = None) -> None:
        """Drop the name's entry; with ``sandbox_id``, only if it still holds that id and token
        (an entry another thread has just refreshed stays)."""
        with self._lock:
            access = self._sandboxes.get(key)
            if access is not None and (
                sandbox_id is None or (access.sandbox_id, access.token) == (sandbox_id, token)
            ):
                del self._sandboxes[key]

    def _reconcile(self, s: Settings, name: str, item: Mapping[str, Any]) -> None:
        """After a lookup: drop the entry if the name now means a paused or another sandbox."""
        key = _key(s, name)
        with self._lock:
            access = self._sandboxes.get(key)
        if access is not None and (
            item.get("state") == "paused" or access.sandbox_id != sandbox_id_of(item)
        ):
            self._forget(key, access.sandbox_id, access.token)

    # -- lookup -------------------------------------------------------------------

    def _connect(self, s: Settings, sandbox_id: str, *, resumed: bool) -> SandboxAccess:
        """Connect (resuming if paused); after a resume, re-apply our network policy."""
        access = self._api.connect(s, sandbox_id)
        with self._lock:
            allow = self._policies.get(sandbox_id)
        if resumed and allow is not None:
            self._api.put_network(s, sandbox_id, allow)
        return access

    def _running(self, s: Settings, handle: Handle) -> str:
        """The id of the handle's sandbox (looked up), resumed first if it was paused."""
        item = self._found(s, handle)
        sandbox_id = sandbox_id_of(item)
        if item.get("state") == "paused":
            self._remember(_key(s, handle.name), self._connect(s, sandbox_id, resumed=True))
        else:
            self._reconcile(s, handle.name, item)
        return sandbox_id

    def _lookup(self, s: Settings, handle: Handle) -> tuple[SandboxAccess, bool]:
        """Look the name up, resume the sandbox if paused, fetch its token; remember it.

        Also says whether the sandbox had to be resumed.
        """
        item = self._found(s, handle)
        sandbox_id = sandbox_id_of(item)
        resumed = item.get("state") == "paused"
        if resumed:
            access = self._connect(s, sandbox_id, resumed=True)
        else:
            access = self._api.detail(s, sandbox_id)
        self._remember(_key(s, handle.name), access)
        return access, resumed

    def _envd_of(self, s: Settings, access: SandboxAccess) -> Envd:
        return Envd(s.envd_url(access.sandbox_id, access.domain), access.sandbox_id,
                    access.token, s.user, s.timeout)

    def _envd(self, s: Settings, handle: Handle) -> Envd:
        """envd of the handle's running sandbox (remembered, else looked up)."""
        access = self._recall(_key(s, handle.name))
        if access is None:
            access, _ = self._lookup(s, handle)
        return self._envd_of(s, access)

    def _on_sandbox(self, s: Settings, handle: Handle, call: FirstCall[T]) -> tuple[Envd, T]:
        """Make an operation's first envd call on the handle's sandbox: its envd and answer.

        A remembered sandbox is used without a lookup; a stale refusal of an
        undispatched call is looked up and retried once (see the module
        docstring). ``call`` gets the envd and an event a ``Start`` sets once
        accepted (a refusal raised while it is clear started nothing).
        """
        key = _key(s, handle.name)
        access = self._recall(key)
        remembered = access is not None
        if access is None:
            access, _ = self._lookup(s, handle)
        envd = self._envd_of(s, access)
        accepted = threading.Event()
        try:
            return envd, call(envd, accepted)
        except SandboxError as error:
            self._forget(key, access.sandbox_id, access.token)
            if not remembered or accepted.is_set() or not _stale(error, access.sandbox_id):
                raise
            fresh, resumed = self._lookup(s, handle)
            if fresh == access and not resumed:
                raise
        envd = self._envd_of(s, fresh)
        return envd, call(envd, threading.Event())

    def _guarded(self, key: Key, envd: Envd, call: Callable[[], T]) -> T:
        """A later envd call of an operation: if it fails, the entry is dropped."""
        try:
            return call()
        except SandboxError:
            self._forget(key, envd.sandbox_id, envd.token)
            raise

    # -- lifecycle ----------------------------------------------------------

    def create(self, name: str, **opts: Any) -> Handle:
        """Adopt the sandbox stamped ``name`` (as it is, paused or not), else create one.

        Settings that leave envd unaddressable are ``Invalid`` before any request
        (:meth:`.settings.Settings.check_envd_address`)."""
        if opts:
            raise TypeError(f"unknown create options: {sorted(opts)}")
        name = _args.sandbox_name(name)
        s = Settings.load()
        s.check_envd_address()
        matches = self._api.find(s, name)
        if matches:
            self._reconcile(s, name, matches[0])
            return Handle(self.provider, name, private=sandbox_id_of(matches[0]))
        access = self._api.create(s, name)
        self._remember(_key(s, name), access)
        return Handle(self.provider, name, private=access.sandbox_id)

    def get(self, handle: Handle) -> Info:
        """``running`` / ``suspended`` (paused) / ``unknown``; ``raw`` is the listing item."""
        s = Settings.load()
        item = self._found(s, handle)
        self._reconcile(s, handle.name, item)
        return Info(status=_STATUS.get(item.get("state"), "unknown"), raw=item)

    def destroy(self, handle: Handle) -> None:
        """Kill every sandbox stamped with the name; none (or a 404) is fine."""
        s = Settings.load()
        items = self._api.find(s, self._check_handle(handle).name)
        self._forget(_key(s, handle.name))
        for item in items:
            sandbox_id = sandbox_id_of(item)
            self._api.kill(s, sandbox_id)
            with self._lock:
                self._policies.pop(sandbox_id, None)

    def list_all_names(self) -> frozenset[str]:
        return self._api.list_names(Settings.load())

    def suspend(self, handle: Handle) -> None:
        """Pause the sandbox (already paused, or a 409, is fine)."""
        s = Settings.load()
        item = self._found(s, handle)
        self._forget(_key(s, handle.name))
        if item.get("state") != "paused":
            self._api.pause(s, sandbox_id_of(item))

    def resume(self, handle: Handle) -> Handle:
        """Connect to the sandbox (resuming it if paused); the handle carries its id."""
        s = Settings.load()
        item = self._found(s, handle)
        sandbox_id = sandbox_id_of(item)
        access = self._connect(s, sandbox_id, resumed=item.get("state") == "paused")
        self._remember(_key(s, handle.name), access)
        return Handle(self.provider, handle.name, private=sandbox_id)

    # -- files --------------------------------------------------------------

    def write_file(self, handle: Handle, path: str, data: Any, *, mode: int | None = None) -> None:
        """Upload through envd's ``/files`` (parents created); ``mode`` is applied with chmod."""
        if not isinstance(path, str):
            raise TypeError(f"path must be a str, got {type(path).__name__}")
        if mode is not None and (isinstance(mode, bool) or not isinstance(mode, int)):
            raise TypeError(f"mode must be an int, got {type(mode).__name__}")
        payload = _args.flatten_bytes(data)
        s = Settings.load()
        self._check_handle(handle)
        envd, _ = self._on_sandbox(s, handle, lambda envd, _: envd.upload(self._http, path,
                                                                          payload))
        if mode is not None:
            key = _key(s, handle.name)
            cwd, target = _chmod_target(path)
            result = self._guarded(key, envd, lambda: self._run(
                s, envd, "chmod", [format(mode, "o"), "--", target], cwd=cwd,
                stderr_to_stdout=True))
            if result.exit_code != 0:
                raise Invalid(("chmod_failed", result.exit_code, result.text.strip()[:200]))

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """Stream envd's ``GET /files`` into the shared collector (see :meth:`.envd.Envd.read`)."""
        s = Settings.load()
        self._check_handle(handle)
        return self._on_sandbox(s, handle, lambda envd, _: envd.read(self._http, path,
                                                                     max_bytes))[1]

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """envd's ``filesystem.Filesystem/ListDir`` at depth 1 (see :mod:`.files`)."""
        s = Settings.load()
        self._check_handle(handle)
        _, answer = self._on_sandbox(s, handle, lambda envd, _: envd.call(
            self._http, "ListDir", files.list_request(path), service="filesystem.Filesystem"))
        return files.listing(path, answer)

    # -- commands -----------------------------------------------------------

    def _keepalive(self, s: Settings, sandbox_id: str) -> Callable[[], Callable[[], None]]:
        return lambda: self._heartbeats.hold(
            sandbox_id, lambda: self._api.set_timeout(s, sandbox_id)
        )

    def _start(
        self,
        s: Settings,
        envd: Envd,
        request: Mapping[str, Any],
        *,
        owner: Owner | None,
        stdin: bool,
        tag: str,
        deadline: Deadline | None = None,
        extra_headers: Mapping[str, str] | None = None,
        detachable: bool = False,
        accepted: threading.Event | None = None,
    ) -> Command:
        stream, pid = open_process(
            self._http, envd, request, owner=owner, stdin=stdin,
            keepalive=self._keepalive(s, envd.sandbox_id), idle_timeout=self._idle_timeout,
            deadline=deadline, extra_headers=extra_headers, accepted=accepted,
        )
        return Command(self.provider, stream.ref, frames=stream.frames,
                       private=E2BCommandEnd(stream, envd, self._http, tag, pid),
                       session_id=tag if detachable else None)

    def _collect(
        self,
        s: Settings,
        envd: Envd,
        request: Mapping[str, Any],
        tag: str,
        deadline: Deadline,
        *,
        stderr_to_stdout: bool = False,
        extra_headers: Mapping[str, str] | None = None,
        accepted: threading.Event | None = None,
    ) -> ExecResult:
        def start(owner: Any) -> Command:
            return self._start(s, envd, request, owner=owner, stdin=False, tag=tag,
                               deadline=deadline, extra_headers=extra_headers,
                               accepted=accepted)

        def stop(command: Command) -> None:
            self.command_end(command).stop()

        return collect_exec(start, stop, deadline=deadline, stderr_to_stdout=stderr_to_stdout)

    def _run(
        self,
        s: Settings,
        envd: Envd,
        cmd: str,
        args: Sequence[str],
        accepted: threading.Event | None = None,
        *,
        cwd: str | None = None,
        stderr_to_stdout: bool = False,
    ) -> ExecResult:
        """An internal command (chmod, the session lister), bounded by ``timeout_ms``."""
        tag = shim.new_tag()
        request = start_request(cmd, args, env=None, cwd=cwd, tag=tag, stdin=False)
        try:
            return self._collect(s, envd, request, tag, Deadline(s.timeout), accepted=accepted,
                                 stderr_to_stdout=stderr_to_stdout)
        except DeadlineExpired:
            raise DeadlineExpired(reasons.TIMEOUT) from None

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
    ) -> ExecResult:
        """Run to exit; the deadline is checked before and after resolving the name."""
        cmd = _args.command_name(cmd)
        argv = _args.str_args(args)
        env = _args.env_map(env)
        dir = _args.optional_str(dir, "dir")
        stderr_to_stdout = _args.flag(stderr_to_stdout, "stderr_to_stdout")
        self._check_handle(handle)
        deadline = Deadline(_args.optional_seconds(timeout))
        deadline.check()
        s = Settings.load()
        tag = shim.new_tag()
        request = start_request(cmd, argv, env=env, cwd=dir, tag=tag, stdin=False)
        headers = None
        if timeout is not None and math.isfinite(timeout):
            headers = {"Connect-Timeout-Ms": str(math.ceil(timeout * 1000))}

        def run(envd: Envd, accepted: threading.Event) -> ExecResult:
            deadline.check()
            return self._collect(s, envd, request, tag, deadline,
                                 stderr_to_stdout=stderr_to_stdout, extra_headers=headers,
                                 accepted=accepted)

        return self._on_sandbox(s, handle, run)[1]

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
        """Start a command; ``detachable=True`` journals it so that it can be attached."""
        cmd = _args.command_name(cmd)
        argv = _args.str_args(args)
        env = _args.env_map(env)
        dir = _args.optional_str(dir, "dir")
        stdin = _args.flag(stdin, "stdin")
        if _args.flag(tty, "tty"):
            raise NotSupported("tty")
        detachable = _args.flag(detachable, "detachable")
        s = Settings.load()
        self._check_handle(handle)
        tag = shim.new_tag()
        if detachable:
            cmd, argv, env = "bash", ("-c", shim.script(tag, cmd, argv, env)), None
        request = start_request(cmd, argv, env=env, cwd=dir, tag=tag, stdin=stdin)
        return self._on_sandbox(s, handle, lambda envd, accepted: self._start(
            s, envd, request, owner=owner, stdin=stdin, tag=tag, detachable=detachable,
            accepted=accepted,
        ))[1]

    # -- sessions -----------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """The journaled (detachable) commands of the sandbox, finished ones included."""
        s = Settings.load()
        self._check_handle(handle)
        _, result = self._on_sandbox(s, handle, lambda envd, accepted: self._run(
            s, envd, "bash", ["-c", shim.lister()], accepted))
        if result.exit_code != 0:
            raise ProviderError(PROVIDER, ("session_listing_failed", result.exit_code))
        return shim.parse_listing(result.output)

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session's journal from byte zero, tail it, end with its real exit."""
        self._check_handle(handle)
        session_id = _args.session_id(session_id)
        stdin = _args.flag(stdin, "stdin")
        s = Settings.load()
        key = _key(s, handle.name)

        def command_line(envd: Envd, _: threading.Event) -> bytes | None:
            if not shim.is_tag(session_id):
                return None
            return envd.download(self._http, shim.cmd_path(session_id), _SMALL_FILE)

        envd, spec = self._on_sandbox(s, handle, command_line)
        if spec is None and not (
            shim.is_tag(session_id)
            and self._guarded(key, envd, lambda: self._starting(envd, session_id))
        ):
            raise NotFound(("session", session_id))
        finished = self._guarded(key, envd, lambda: self._exit_code(envd, session_id)) is not None
        tag = shim.new_tag()
        request = start_request("bash", ["-c", shim.replayer(session_id)], env=None,
                                cwd=None, tag=tag, stdin=False)
        stream, _ = self._guarded(key, envd, lambda: open_process(
            self._http, envd, request, owner=owner, stdin=stdin,
            keepalive=self._keepalive(s, envd.sandbox_id), idle_timeout=self._idle_timeout,
            recover=lambda: self._exit_code(envd, session_id),
            on_stopped=lambda pid: self._kill_quietly(envd, pid),
        ))
        end = E2BCommandEnd(stream, envd, self._http, session_id, None, live=not finished)
        return Command(self.provider, stream.ref, frames=stream.frames, private=end,
                       session_id=session_id)

    def _starting(self, envd: Envd, session_id: str) -> bool:
        """Whether a session without a ``.cmd`` is one whose shim has not written it yet.

        envd reports a shim started before the shim has run a line, so
        ``spawn`` can hand out a session whose journal is not there yet. It
        is that session if envd lists the shim of that tag alive, or if the
        ``.cmd`` is there on a second look (the shim finished in between).
        """
        listing = envd.call(self._http, "List", {})
        processes = listing.get("processes") if isinstance(listing, Mapping) else None
        for entry in processes if isinstance(processes, list) else []:
            if (isinstance(entry, Mapping) and entry.get("tag") == session_id
                    and shim.is_shim(session_id, entry.get("config"))):
                return True
        return envd.download(self._http, shim.cmd_path(session_id), _SMALL_FILE) is not None

    def _exit_code(self, envd: Envd, session_id: str) -> int | None:
        return shim.parse_exit(
            envd.download(self._http, shim.exit_path(session_id), _SMALL_FILE)
        )

    def _kill_quietly(self, envd: Envd, pid: int | None) -> None:
        """Kill an abandoned replayer (its tails follow it out); failures are ignored."""
        if pid is None:
            return
        try:
            envd.call(self._http, "SendSignal",
                      {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"})
        except Exception:
            return

    # -- policy, URLs, checkpoints ------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Deny all egress but ``policy.allow`` (``[]`` denies everything)."""
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"policy must be a NetworkPolicy, got {type(policy).__name__}")
        s = Settings.load()
        sandbox_id = self._running(s, self._check_handle(handle))
        self._api.put_network(s, sandbox_id, policy.allow)
        with self._lock:
            self._policies[sandbox_id] = policy.allow

    def public_url(self, handle: Handle) -> str | None:
        """``None``: no port is opened, so there is no URL a browser could open."""
        self._check_handle(handle)
        return None

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        raise NotSupported("checkpoint")

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        raise NotSupported("checkpoint")
