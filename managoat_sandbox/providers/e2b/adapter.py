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
Handles carry the ``base_url`` they were made against and the sandbox id
(:mod:`.handle`, never a credential); a handle used after ``base_url`` changed is
``Invalid(("handle", "endpoint_changed"))`` before any request.
``get``, ``suspend``, ``resume``, ``destroy`` and ``apply_network_policy``
always look the name up (they need the sandbox's state).

Remembered sandboxes. The operations that only talk to envd (``exec``,
``spawn``, ``write_file``, ``read_file``, ``list_files``, ``list_sessions``,
``attach``) use the sandbox a name last resolved to, without a lookup, and
look it up again once when envd's refusal says that entry is out of date
(:mod:`.remembered` keeps the entries and that rule). The entry is replaced
by ``create`` and ``resume``, dropped by ``destroy`` and ``suspend``, and by
any lookup that finds the sandbox paused or another id.

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
makes no request), sends ``Connect-Timeout-Ms`` with a finite timeout (so
envd kills the process when the caller gives up), reads the stream in the
calling thread (no reader thread: the caller would only wait for it), and
collects with the shared collector; output past ``max_bytes`` ends the read
with ``Truncated`` and the process is killed (``SendSignal`` SIGKILL to its
pid). stdin and EOF go to the process by
**pid**, never by tag. While a command streams, its sandbox's TTL is renewed
every 240 s. ``stop_command`` closes this end only: the remote process goes
on.

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

import contextlib
import math
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from ... import _args
from ..._collect import ExecSink, collect_here
from ..._deadline import Deadline
from ..._dir_refusal import raise_refusal
from ..._http import HttpClient, Transport
from ..._readers import Readers
from ..._streaming import Stream, StreamingAdapter
from ..._version import __version__
from ...contract import Capability, Owner
from ...errors import Invalid, NotFound, NotSupported, ProviderError
from ...reasons import Reason
from ...transfers import StagedTarTransfers
from ...types import Command, ExecResult, FileInfo, Handle, Info, NetworkPolicy, Session
from .. import _endpoint
from . import files, shim
from .api import ControlPlane, SandboxAccess, sandbox_id_of
from .end import E2BCommandEnd
from .envd import Envd, start_request
from .errors import PROVIDER, files_policy
from .handle import Carried
from .heartbeat import LINGER, Heartbeats
from .remembered import Remembered
from .settings import SETTINGS, Settings, load
from .stream import Keepalive, Reading, open_process

__all__ = ["E2B"]

HEARTBEAT_SECONDS = 240.0
#: The name of a reader thread waiting for its next command (a reading one is named
#: after its command: ``e2b-<ref>``).
READER_IDLE_NAME = "e2b-reader-idle"
IDLE_TIMEOUT_SECONDS = 120.0
_SMALL_FILE = 64 * 1024
_STATUS: Mapping[Any, Any] = {"running": "running", "paused": "suspended"}


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


class E2B(StagedTarTransfers, StreamingAdapter):
    """E2B sandboxes; see the module docstring for what each operation does.

    ``heartbeat_interval`` (seconds between TTL renewals while a command
    streams), ``heartbeat_linger`` (seconds a sandbox's idle heartbeat thread,
    and an idle reader thread (:mod:`managoat_sandbox._readers`), waits for its
    next command before it ends) and ``idle_timeout`` (the
    longest silence tolerated on a stream before it is an
    ``Unavailable("timeout")``; envd sends a keepalive every 50 s) exist for
    tests and unusual deployments; the defaults suit E2B.
    """

    provider = "e2b"
    command_type = E2BCommandEnd

    _CAPABILITIES = frozenset(
        {
            Capability.SUSPEND,
            Capability.ISOLATION,  # a microVM per sandbox
            Capability.TRANSFER,  # one tar stream through a command
            Capability.NETWORK_POLICY,
            Capability.ATTACH,
            Capability.READ_FILE,
            Capability.LIST_FILES,
        }
    )

    def __init__(
        self,
        *,
        heartbeat_interval: float = HEARTBEAT_SECONDS,
        heartbeat_linger: float = LINGER,
        idle_timeout: float = IDLE_TIMEOUT_SECONDS,
        transport: Transport | None = None,
    ) -> None:
        self._http = HttpClient(
            user_agent=f"managoat_sandbox/{__version__}", transport=transport, direct=True
        )
        self._api = ControlPlane(self._http)
        linger = _args.seconds(heartbeat_linger, "heartbeat_linger")
        self._heartbeats = Heartbeats(
            _args.seconds(heartbeat_interval, "heartbeat_interval"), linger=linger
        )
        self._readers = Readers(linger, idle_name=READER_IDLE_NAME)
        self._idle_timeout = _args.seconds(idle_timeout, "idle_timeout")
        self._remembered = Remembered(self._lookup)
        self._lock = threading.Lock()
        self._policies: dict[str, tuple[str, ...]] = {}

    def capabilities(self) -> frozenset[str]:
        return self._CAPABILITIES

    # -- identity and lookup ------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        """A handle of ``name`` carrying the ``base_url`` configured now (:mod:`.handle`)."""
        return Handle(self.provider, name, private=Carried.of(SETTINGS.url("base_url")))

    @staticmethod
    def _check_handle(handle: Handle, base_url: str | None = None) -> Handle:
        """``handle``, once it is a Handle made against the ``base_url`` configured now
        (else ``Invalid(("handle", "endpoint_changed"))``, :mod:`.._endpoint`): the one
        given (a caller that has just loaded the settings), else read here."""
        _endpoint.check(handle, SETTINGS.url("base_url") if base_url is None else base_url)
        return handle

    def _found(self, s: Settings, name: str) -> Mapping[str, Any]:
        """The newest sandbox stamped with ``name``, or ``NotFound``."""
        matches = self._api.find(s, name)
        if not matches:
            raise NotFound(Reason.SANDBOX, name=name)
        return matches[0]

    def _connect(self, s: Settings, sandbox_id: str, *, resumed: bool) -> SandboxAccess:
        """Connect (resuming if paused); after a resume, re-apply our network policy."""
        access = self._api.connect(s, sandbox_id)
        with self._lock:
            allow = self._policies.get(sandbox_id)
        if resumed and allow is not None:
            self._api.put_network(s, sandbox_id, allow)
        return access

    def _running(self, s: Settings, name: str) -> str:
        """The id of the name's sandbox (looked up), resumed first if it was paused."""
        item = self._found(s, name)
        sandbox_id = sandbox_id_of(item)
        if item.get("state") == "paused":
            self._remembered.remember(s, name, self._connect(s, sandbox_id, resumed=True))
        else:
            self._remembered.reconcile(s, name, item)
        return sandbox_id

    def _lookup(self, s: Settings, name: str) -> tuple[SandboxAccess, bool]:
        """Look the name up, resume the sandbox if paused, fetch its token (the
        :data:`.remembered.Lookup` of this adapter). Also says whether it had to resume."""
        item = self._found(s, name)
        sandbox_id = sandbox_id_of(item)
        resumed = item.get("state") == "paused"
        if resumed:
            return self._connect(s, sandbox_id, resumed=True), True
        return self._api.detail(s, sandbox_id), False

    # -- lifecycle ----------------------------------------------------------

    def create(self, name: str, **opts: Any) -> Handle:
        """Adopt the sandbox stamped ``name`` (as it is, paused or not), else create one.

        Settings that leave envd unaddressable are ``Invalid`` before any request
        (:meth:`.settings.Settings.check_envd_address`)."""
        if opts:
            raise TypeError(f"unknown create options: {sorted(opts)}")
        s = load()
        s.check_envd_address()
        matches = self._api.find(s, name)
        if matches:
            self._remembered.reconcile(s, name, matches[0])
            return Handle(
                self.provider, name, private=Carried.of(s.base_url, sandbox_id_of(matches[0]))
            )
        access = self._api.create(s, name)
        self._remembered.remember(s, name, access)
        return Handle(self.provider, name, private=Carried.of(s.base_url, access.sandbox_id))

    def get(self, handle: Handle) -> Info:
        """``running`` / ``suspended`` (paused) / ``unknown``; ``raw`` is the listing item."""
        s = load()
        item = self._found(s, self._check_handle(handle).name)
        self._remembered.reconcile(s, handle.name, item)
        return Info(status=_STATUS.get(item.get("state"), "unknown"), raw=item)

    def destroy(self, handle: Handle) -> None:
        """Kill every sandbox stamped with the name; none (or a 404) is fine."""
        s = load()
        items = self._api.find(s, self._check_handle(handle).name)
        self._remembered.forget(s, handle.name)
        for item in items:
            sandbox_id = sandbox_id_of(item)
            self._api.kill(s, sandbox_id)
            with self._lock:
                self._policies.pop(sandbox_id, None)

    def list_all_names(self) -> frozenset[str]:
        return self._api.list_names(load())

    def suspend(self, handle: Handle) -> None:
        """Pause the sandbox (already paused, or a 409, is fine)."""
        s = load()
        item = self._found(s, self._check_handle(handle).name)
        self._remembered.forget(s, handle.name)
        if item.get("state") != "paused":
            self._api.pause(s, sandbox_id_of(item))

    def resume(self, handle: Handle) -> Handle:
        """Connect to the sandbox (resuming it if paused); the handle carries its id
        and the endpoint (:mod:`.handle`)."""
        s = load()
        item = self._found(s, self._check_handle(handle).name)
        sandbox_id = sandbox_id_of(item)
        access = self._connect(s, sandbox_id, resumed=item.get("state") == "paused")
        self._remembered.remember(s, handle.name, access)
        return Handle(self.provider, handle.name, private=Carried.of(s.base_url, sandbox_id))

    # -- files --------------------------------------------------------------

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Upload through envd's ``/files`` (parents created); ``mode`` is applied with chmod."""
        payload = data
        s = load()
        self._check_handle(handle)
        envd, _ = self._remembered.first_call(
            s, handle.name, lambda envd, _: envd.upload(self._http, path, payload)
        )
        if mode is not None:
            self._chmod(s, handle.name, envd, path, mode)

    def _chmod(self, s: Settings, name: str, envd: Envd, path: str, mode: int) -> None:
        """Give the uploaded ``path`` its ``mode``; a failed chmod is ``Invalid``."""
        cwd, target = _chmod_target(path)
        chmod = partial(
            self._run,
            s,
            "chmod",
            [format(mode, "o"), "--", target],
            envd,
            cwd=cwd,
            stderr_to_stdout=True,
        )
        result = self._remembered.later_call(s, name, envd, chmod)
        if result.exit_code != 0:
            raise Invalid(
                Reason.CHMOD_FAILED, code=result.exit_code, problem=result.text.strip()[:200]
            )

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """Stream envd's ``GET /files`` into the shared collector (see :meth:`.envd.Envd.read`)."""
        s = load()
        self._check_handle(handle)
        _, data = self._remembered.first_call(
            s, handle.name, lambda envd, _: envd.read(self._http, path, max_bytes)
        )
        return data

    def put_stream(self, handle: Handle, path: str, chunks: Iterable[bytes]) -> None:
        """A staged transfer's archive to ``path``: one streamed ``POST /files``."""
        s = load()
        self._check_handle(handle)
        self._remembered.first_call(
            s, handle.name, lambda envd, _: envd.upload_stream(self._http, path, chunks)
        )

    @contextmanager
    def get_stream(self, handle: Handle, path: str) -> Iterator[Iterator[bytes]]:
        """A staged transfer's archive at ``path``: one streamed ``GET /files``."""
        s = load()
        self._check_handle(handle)
        with contextlib.ExitStack() as stack:
            _, chunks = self._remembered.first_call(
                s,
                handle.name,
                lambda envd, _: stack.enter_context(envd.file_stream(self._http, path)),
            )
            yield chunks

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """envd's ``filesystem.Filesystem/ListDir`` at depth 1 (see :mod:`.files`)."""
        s = load()
        self._check_handle(handle)
        _, answer = self._remembered.first_call(
            s,
            handle.name,
            lambda envd, _: envd.call(
                self._http,
                "ListDir",
                files.list_request(path),
                service="filesystem.Filesystem",
                policy=files_policy(path),
            ),
        )
        return files.listing(path, answer)

    # -- commands -----------------------------------------------------------

    def _keepalive(self, s: Settings, sandbox_id: str) -> Keepalive:
        """What a command's reader holds while it streams: the sandbox's TTL heartbeat."""
        return partial(
            self._heartbeats.hold, sandbox_id, partial(self._api.set_timeout, s, sandbox_id)
        )

    def _start(
        self,
        s: Settings,
        envd: Envd,
        request: Mapping[str, Any],
        owner: Owner | None,
        *,
        stdin: bool,
        tag: str,
        detachable: bool = False,
        accepted: threading.Event | None = None,
    ) -> Command:
        """Start ``request`` on ``envd`` for ``owner``, read by one of the adapter's
        readers (see :func:`.stream.open_process`)."""
        stream, pid = open_process(
            self._http,
            envd,
            request,
            Reading(self._keepalive(s, envd.sandbox_id), self._idle_timeout, self._readers),
            owner=owner,
            stdin=stdin,
            accepted=accepted,
        )
        return Command(
            self.provider,
            stream.ref,
            frames=stream.frames,
            private=E2BCommandEnd(stream, envd, self._http, tag, pid),
            session_id=tag if detachable else None,
        )

    def _collect(
        self,
        envd: Envd,
        accepted: threading.Event | None = None,
        *,
        s: Settings,
        request: Mapping[str, Any],
        deadline: Deadline,
        stderr_to_stdout: bool = False,
        extra_headers: Mapping[str, str] | None = None,
        max_bytes: int | None = None,
    ) -> ExecResult:
        """Run ``request`` on ``envd`` to its exit within ``deadline`` (checked first), read
        in the calling thread (:func:`..._collect.collect_here`): the output is collected
        by the time the read returns, or the read was given up at ``max_bytes``
        (``Truncated``), and the process is then killed by its pid (envd keeps it
        running otherwise)."""

        def run(owner: ExecSink) -> int | None:
            _, pid = open_process(
                self._http,
                envd,
                request,
                Reading(self._keepalive(s, envd.sandbox_id), self._idle_timeout),
                owner=owner,
                stdin=False,
                deadline=deadline,
                extra_headers=extra_headers,
                accepted=accepted,
                in_caller=True,
            )
            return pid

        return collect_here(
            run,
            deadline=deadline,
            stderr_to_stdout=stderr_to_stdout,
            max_bytes=max_bytes,
            kill=partial(self._kill_quietly, envd),
        )

    def _run(
        self,
        s: Settings,
        cmd: str,
        args: Sequence[str],
        envd: Envd,
        accepted: threading.Event | None = None,
        *,
        cwd: str | None = None,
        stderr_to_stdout: bool = False,
    ) -> ExecResult:
        """An internal command (chmod, the session lister), bounded by ``timeout_ms``: its
        expiry is ``DeadlineExpired("timeout")``, as a request's is."""
        request = start_request(cmd, args, env=None, cwd=cwd, tag=shim.new_tag(), stdin=False)
        deadline = Deadline(s.timeout, reason=Reason.TIMEOUT)
        return self._collect(
            envd,
            accepted,
            s=s,
            request=request,
            deadline=deadline,
            stderr_to_stdout=stderr_to_stdout,
        )

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
        """Run to exit; the deadline is checked before and after resolving the name."""
        deadline = Deadline(timeout)
        deadline.check()
        s = load()
        self._check_handle(handle, s.base_url)
        request = start_request(cmd, args, env=env, cwd=dir, tag=shim.new_tag(), stdin=False)
        headers = None
        if timeout is not None and math.isfinite(timeout):
            headers = {"Connect-Timeout-Ms": str(math.ceil(timeout * 1000))}
        run = partial(
            self._collect,
            s=s,
            request=request,
            deadline=deadline,
            stderr_to_stdout=stderr_to_stdout,
            extra_headers=headers,
            max_bytes=max_bytes,
        )
        try:
            _, result = self._remembered.first_call(s, handle.name, run)
        except Invalid as error:
            raise_refusal(error, dir, self, handle, deadline)
        return result

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
        if tty:
            raise NotSupported(Reason.TTY)
        argv: Sequence[str] = args
        s = load()
        self._check_handle(handle, s.base_url)
        tag = shim.new_tag()
        if detachable:
            cmd, argv, env = "bash", ("-c", shim.script(tag, cmd, argv, env)), None
        request = start_request(cmd, argv, env=env, cwd=dir, tag=tag, stdin=stdin)
        try:
            _, command = self._remembered.first_call(
                s,
                handle.name,
                lambda envd, accepted: self._start(
                    s,
                    envd,
                    request,
                    owner,
                    stdin=stdin,
                    tag=tag,
                    detachable=detachable,
                    accepted=accepted,
                ),
            )
        except Invalid as error:
            raise_refusal(error, dir, self, handle)
        return command

    # -- sessions -----------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """The journaled (detachable) commands of the sandbox, finished ones included."""
        s = load()
        self._check_handle(handle)
        lister = partial(self._run, s, "bash", ["-c", shim.lister()])
        _, result = self._remembered.first_call(s, handle.name, lister)
        if result.exit_code != 0:
            raise ProviderError(PROVIDER, Reason.SESSION_LISTING_FAILED, code=result.exit_code)
        return shim.parse_listing(result.output)

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session's journal from byte zero, tail it, end with its real exit."""
        self._check_handle(handle)
        s = load()
        name = handle.name
        envd, spec = self._remembered.first_call(s, name, partial(self._command_line, session_id))
        if spec is None and not (
            shim.is_tag(session_id)
            and self._remembered.later_call(
                s, name, envd, partial(self._starting, envd, session_id)
            )
        ):
            raise NotFound(Reason.SESSION, name=session_id)
        exit_code = self._remembered.later_call(
            s, name, envd, partial(self._exit_code, envd, session_id)
        )
        stream, _ = self._remembered.later_call(
            s, name, envd, partial(self._replay, s, envd, session_id, owner=owner, stdin=stdin)
        )
        process = E2BCommandEnd(stream, envd, self._http, session_id, None, live=exit_code is None)
        return Command(
            self.provider, stream.ref, frames=stream.frames, private=process, session_id=session_id
        )

    def _command_line(self, session_id: str, envd: Envd, _: threading.Event) -> bytes | None:
        """The session's journaled ``.cmd`` (``None`` when there is none, or the id is no
        journal tag): an attach's first envd call."""
        if not shim.is_tag(session_id):
            return None
        return envd.download(self._http, shim.cmd_path(session_id), _SMALL_FILE)

    def _replay(
        self, s: Settings, envd: Envd, session_id: str, *, owner: Owner | None, stdin: bool
    ) -> tuple[Stream, int | None]:
        """Start the session's replayer: its journal from byte zero, then its tail; the
        code at its end is the journaled exit (see :func:`.stream.open_process`)."""
        request = start_request(
            "bash",
            ["-c", shim.replayer(session_id)],
            env=None,
            cwd=None,
            tag=shim.new_tag(),
            stdin=False,
        )
        return open_process(
            self._http,
            envd,
            request,
            Reading(
                self._keepalive(s, envd.sandbox_id),
                self._idle_timeout,
                self._readers,
                recover=partial(self._exit_code, envd, session_id),
                on_stopped=partial(self._kill_quietly, envd),
            ),
            owner=owner,
            stdin=stdin,
        )

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
            if (
                isinstance(entry, Mapping)
                and entry.get("tag") == session_id
                and shim.is_shim(session_id, entry.get("config"))
            ):
                return True
        return envd.download(self._http, shim.cmd_path(session_id), _SMALL_FILE) is not None

    def _exit_code(self, envd: Envd, session_id: str) -> int | None:
        return shim.parse_exit(envd.download(self._http, shim.exit_path(session_id), _SMALL_FILE))

    def _kill_quietly(self, envd: Envd, pid: int | None) -> None:
        """Kill an abandoned replayer (its tails follow it out), or an exec whose output
        passed its limit; failures are ignored."""
        if pid is None:
            return
        try:
            envd.call(
                self._http, "SendSignal", {"process": {"pid": pid}, "signal": "SIGNAL_SIGKILL"}
            )
        except Exception:
            return

    # -- policy, URLs, checkpoints ------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Deny all egress but ``policy.allow`` (``[]`` denies everything)."""
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"policy must be a NetworkPolicy, got {type(policy).__name__}")
        s = load()
        sandbox_id = self._running(s, self._check_handle(handle).name)
        self._api.put_network(s, sandbox_id, policy.allow)
        with self._lock:
            self._policies[sandbox_id] = policy.allow

    def public_url(self, handle: Handle) -> str | None:
        """``None``: no port is opened, so there is no URL a browser could open."""
        self._check_handle(handle)
        return None
