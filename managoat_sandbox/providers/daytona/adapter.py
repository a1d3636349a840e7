"""The ``daytona`` adapter: Daytona sandboxes over the REST API and the toolbox daemon.

Works against daytona.io and a self-hosted Daytona alike: the control plane is
``api_url`` (``…/api``) and each sandbox's toolbox is reached through the
``toolboxProxyUrl`` its own answer carries (config: :mod:`.api`).

* ``create`` is name-keyed: a 400 or 409 from ``POST /sandbox`` followed by a
  successful ``GET`` of the name adopts that sandbox (a 400 "failed to start"
  sandbox exists too); if the probe fails, the create error is raised.
* ``get`` maps ``started``/``starting``/``resuming`` to ``running``,
  ``stopped``/``stopping``/``archived``/``archiving``/``paused``/``pausing`` to
  ``suspended`` and every other state to ``unknown``.
* ``suspend`` stops the sandbox (the disk is kept; a long stop auto-archives),
  ``resume`` starts it and waits until it is ``started``. A 409 on a lifecycle
  call means a transition is in progress: ``Unavailable`` (transient).
* ``list_all_names`` walks ``GET /sandbox`` by cursor, sorted by the immutable
  creation time so that activity during the walk cannot hide a sandbox, drops
  soft-deleted rows, and refuses with ``Truncated`` past ``max_pages`` pages.
  It lists the sandboxes this library created (label ``managoat=1``), so a
  host reconciling against it never sees, and never garbage-collects, others.
* Handles carry the ``api_url`` they were made against (never a credential);
  a handle used after ``api_url`` changed is ``Invalid(("handle",
  "endpoint_changed"))`` before any request (:mod:`.._endpoint`).
* Commands run through a shim (:mod:`.shim`) that frames their stdout and
  stderr byte-exact into the daemon's journal, ends each stream with a mark
  and adds the real exit code, so the journal alone tells a complete log
  from a cut one (:mod:`.decoder`). ``exec`` runs it in a toolbox session
  kept for reuse, with one synchronous session exec whose answer carries the
  journal and the exit code (:mod:`.exec`): on a warm sandbox an exec is one
  request (the sandbox's toolbox is remembered with its sessions). ``spawn`` runs it
  asynchronously in a session of its own, and the command's log is followed
  over the daemon's WebSocket, finished from plain snapshots when that ends
  early, every byte delivered once (:mod:`.stream`). A command whose session
  vanishes without an exit ends in ``Unavailable("closed_before_exit")``.
  Every spawn is a detachable session, named by its ``Command.session_id`` (the
  toolbox session id, as listed); ``attach`` replays from byte zero, then
  tails. Sessions live in the daemon's memory: a stop wipes them (disk kept),
  so a suspended sandbox lists none. The session of a sandbox's next spawn is
  created ahead, in the background, once a spawned command is under way there
  (:mod:`.ahead`: one idle session per sandbox at most, never listed, deleted at
  interpreter exit), and the sandbox's toolbox is remembered, so a warm spawn
  is one request before its follow.
* Stdin goes through the command-input endpoint; ``close_stdin`` really closes
  it (the shim's relay feeding the command ends) and returns normally even if
  that fails.
* ``read_file`` streams the toolbox's bulk download (one multipart part per
  file, an error part for a path it cannot serve) into ``files.collect``;
  ``list_files`` maps the toolbox's listing (``GET /files``). The daemon stats
  listed entries through symlinks, so a link is listed as what it points at
  and a dangling one not at all (wire facts: :mod:`.files`).
* ``apply_network_policy`` sets ``networkBlockAll: true`` with the allowlist as
  ``domainAllowList`` (``""`` for ``allow=[]``: deny all egress).
* ``public_url`` is ``None``: Daytona's preview URLs need a per-start token
  and a port nothing here opens, so no URL a browser can open exists to report.
  Checkpoints are not supported (snapshots create *new* sandboxes).
"""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from ... import _args
from ..._deadline import Deadline
from ..._http import HttpClient, Transport
from ..._streaming import Stream, StreamingAdapter, new_ref
from ...contract import Capability, Owner
from ...errors import (
    DeadlineExpired,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    RateLimited,
    SandboxError,
    Unavailable,
)
from ...reasons import Reason, no_such_dir
from ...transfers import StagedTarTransfers
from ...types import (
    Command,
    ExecResult,
    FileInfo,
    Handle,
    Info,
    NetworkPolicy,
    Session,
    Status,
)
from .. import _endpoint
from . import files, shim
from .ahead import SpareSessions
from .api import Api, Timeouts
from .end import DaytonaCommandEnd
from .errors import conflict_is_transient, exec_refused, file_error, is_status, not_started
from .exec import EXEC_PREFIX, ExecPool, NotDispatched, run_exec
from .settings import PROVIDER, SETTINGS
from .stream import FollowPolicy, LogFollower
from .toolbox import Toolbox, listed_command_id

__all__ = ["Daytona"]

log = logging.getLogger("managoat_sandbox.daytona")

RUNNING_STATES = frozenset({"started", "starting", "resuming"})
SUSPENDED_STATES = frozenset({"stopped", "stopping", "archived", "archiving", "paused", "pausing"})
#: States ``suspend`` leaves alone: already stopped or on the way.
_PARKED = frozenset({"stopped", "stopping", "archived", "archiving"})
#: States a toolbox call must start the sandbox from.
_WAKE_FROM = frozenset({"stopped", "stopping", "archived", "archiving", "paused", "pausing"})
#: States that become ``started`` on their own.
_BOOTING = frozenset(
    {
        "creating",
        "starting",
        "restoring",
        "resuming",
        "pulling_snapshot",
        "pending_build",
        "building_snapshot",
    }
)
_BROKEN = frozenset({"error", "build_failed"})
_GONE = frozenset({"destroying", "destroyed"})
#: The id prefix of spawned sessions (listed, attachable); exec sessions have EXEC_PREFIX.
SPAWN_PREFIX = "mgs-"
_DESTROYED_PREFIX = "DESTROYED_"


def status_of(state: object) -> Status:
    """The contract status of a Daytona state; never the raw string."""
    if state in RUNNING_STATES:
        return "running"
    if state in SUSPENDED_STATES:
        return "suspended"
    return "unknown"


def _name(handle: Handle) -> str:
    """The handle's sandbox name; ``Invalid(("handle", "endpoint_changed"))`` when the
    handle was made against another ``api_url`` than the configured one
    (:mod:`.._endpoint`)."""
    _endpoint.check(handle, SETTINGS.url("api_url"))
    return handle.name


def _state(sandbox: Mapping[str, Any]) -> str | None:
    state = sandbox.get("state")
    return state if isinstance(state, str) else None


def _deleted(item: Mapping[str, Any]) -> bool:
    name = item.get("name")
    return (isinstance(name, str) and name.startswith(_DESTROYED_PREFIX)) or item.get(
        "desiredState"
    ) == "destroyed"


def _allow_entry(entry: str) -> str:
    """An allowlist entry as a Daytona domain (comma-separated on the wire)."""
    value = entry.strip()
    if not value or "," in value or any(ch.isspace() for ch in value):
        raise Invalid(Reason.NETWORK_POLICY, problem=f"{entry!r} is not a domain")
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return value
    raise Invalid(
        Reason.NETWORK_POLICY, problem=f"{entry!r}: only domains can be allowed on Daytona"
    )


def _sanitised(error: SandboxError) -> SandboxError:
    """A terminate_session failure without provider prose (bodies as ``{}``)."""
    if isinstance(error, RateLimited):
        return RateLimited(None)
    if error.status is not None and error.reason is Reason.HTTP:
        return type(error)(Reason.HTTP, status=error.status, body={})
    return Unavailable(Reason.TERMINATION_UNCONFIRMED)


class Daytona(StagedTarTransfers, StreamingAdapter):
    """Daytona sandboxes (see the module docstring for the rules it keeps).

    Keyword arguments tune what config does not: ``follow`` (how logs are
    followed: pace and budgets), ``timeouts`` (HTTP; ``toolbox`` is also how
    long an exec waits for its synchronous answer before following its log),
    ``start_timeout`` (how long a toolbox call waits for a sandbox to reach
    ``started``), ``exec_sessions`` (idle exec sessions kept per sandbox),
    ``spawn_ahead`` (whether the next spawn's session is created ahead:
    :mod:`.ahead`), ``page_size`` and ``max_pages`` (the listing's page size
    and cap).
    """

    provider = PROVIDER
    command_type = DaytonaCommandEnd

    _CAPABILITIES = frozenset(
        {
            Capability.SUSPEND,
            Capability.ISOLATION,  # a microVM per sandbox
            Capability.TRANSFER,  # one tar stream through a command
            Capability.NETWORK_POLICY,
            Capability.ATTACH,
            Capability.TERMINATE_SESSION,
            Capability.READ_FILE,
            Capability.LIST_FILES,
        }
    )

    def __init__(
        self,
        *,
        follow: FollowPolicy | None = None,
        timeouts: Timeouts | None = None,
        start_timeout: float = 120.0,
        exec_sessions: int = 4,
        spawn_ahead: bool = True,
        page_size: int = 100,
        max_pages: int = 40,
        transport: Transport | None = None,
    ) -> None:
        self.follow = follow or FollowPolicy()
        http = HttpClient(user_agent="managoat_sandbox-daytona", transport=transport)
        self.api = Api(http, timeouts or Timeouts())
        self.start_timeout = start_timeout
        self.exec_sessions = exec_sessions
        self.spawn_ahead = spawn_ahead
        self.page_size = page_size
        self.max_pages = max_pages
        self._pools: dict[str, ExecPool] = {}
        self._spares: dict[str, SpareSessions] = {}
        self._pools_lock = threading.Lock()

    def capabilities(self) -> frozenset[str]:
        return self._CAPABILITIES

    # -- lifecycle --------------------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        """A handle of ``name`` carrying the ``api_url`` configured now (:mod:`.._endpoint`)."""
        return _endpoint.carrying(Handle(self.provider, name), SETTINGS.url("api_url"))

    def create(self, name: str, **opts: Any) -> Handle:
        """Create ``name``, adopting it when it exists (a 400/409 confirmed by a GET)."""
        if opts:
            raise TypeError(f"unknown create options: {sorted(opts)}")
        handle = self.build_handle(name)
        try:
            self.api.create(name)
        except Invalid as error:
            if not (is_status(error, 400) or is_status(error, 409)):
                raise
            try:
                self.api.get(name)
            except SandboxError:
                raise error from None
        return handle

    def get(self, handle: Handle) -> Info:
        sandbox = self.api.get(_name(handle))
        return Info(status=status_of(sandbox.get("state")), raw=dict(sandbox))

    def destroy(self, handle: Handle) -> None:
        """Delete the sandbox; already gone is fine. Its name is free at once."""
        self._forget_sandbox(_name(handle))
        try:
            self.api.delete(_name(handle))
        except NotFound:
            return
        except SandboxError as error:
            raise conflict_is_transient(error) from None

    def list_all_names(self) -> frozenset[str]:
        return frozenset(
            item["name"]
            for item in self.api.list_items(self.page_size, self.max_pages)
            if isinstance(item, Mapping)
            and isinstance(item.get("name"), str)
            and not _deleted(item)
        )

    def suspend(self, handle: Handle) -> None:
        """Stop the sandbox (disk kept); a no-op when it is stopped or stopping."""
        name = _name(handle)
        self._forget_sandbox(name)
        if _state(self.api.get(name)) in _PARKED:
            return
        try:
            self.api.stop(name)
        except SandboxError as error:
            raise conflict_is_transient(error) from None

    def resume(self, handle: Handle) -> Handle:
        """Start the sandbox and wait until it is started; the handle is then usable."""
        self._toolbox(handle)
        return self.build_handle(_name(handle))

    # -- the toolbox --------------------------------------------------------------

    def _toolbox(self, handle: Handle, *, wake: bool = True, limit: float | None = None) -> Toolbox:
        """The sandbox's toolbox once it is started (starting it if it is parked).

        With ``wake=False`` a parked sandbox is ``NotFound`` instead (its
        sessions did not survive the stop). ``limit`` caps the wait.
        """
        name = _name(handle)
        sandbox = self.api.get(name)
        state = _state(sandbox)
        waiting = state in _BOOTING
        if state in _WAKE_FROM:
            if not wake:
                raise NotFound(Reason.SANDBOX_NOT_RUNNING, state=state)
            try:
                sandbox = self.api.start(name)
            except SandboxError as error:
                raise conflict_is_transient(error) from None
            state, waiting = _state(sandbox), True
        budget = self.start_timeout if limit is None else min(limit, self.start_timeout)
        deadline = Deadline(budget)
        pause = 0.25
        while waiting and state != "started" and state not in _BROKEN | _GONE:
            left = deadline.remaining()
            if left == 0:
                raise Unavailable(Reason.SANDBOX_NOT_STARTED, state=state)
            threading.Event().wait(pause if left is None else min(pause, left))
            pause = min(pause * 1.5, 2.0)
            sandbox = self.api.get(name)
            state = _state(sandbox)
        if state in _GONE:
            raise NotFound(Reason.SANDBOX, name=name, state=state)
        if state in _BROKEN:
            raise Unavailable(Reason.SANDBOX_STATE, state=state)
        return Toolbox(self.api, self.api.toolbox_of(sandbox))

    def _sandbox_gone(self, name: str) -> bool:
        """Whether the sandbox is gone or no longer running (so its sessions are gone)."""
        try:
            state = _state(self.api.get(name))
        except NotFound:
            return True
        except SandboxError:
            return False
        return state in _WAKE_FROM or state in _GONE

    # -- files --------------------------------------------------------------------

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Upload ``data`` to ``path`` (parent directories created; see :func:`.files.write`),
        then apply ``mode``."""
        toolbox = self._toolbox(handle)
        files.write(toolbox, path, data)
        if mode is not None:
            code, output = toolbox.execute(shim.chmod(path, mode))
            if code != 0:
                raise Invalid(
                    Reason.CHMOD_FAILED, code=code, problem=output.decode("utf-8", "replace")
                )

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """The bytes of the file at ``path`` from the toolbox's bulk download (a missing
        path is NotFound, a directory Invalid; see :func:`.files.read`)."""
        return files.read(self._toolbox(handle), path, max_bytes)

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """The entries of the directory at ``path`` from the toolbox's listing (a missing
        path is NotFound, a file Invalid; see :func:`.files.listing`)."""
        return files.listing(self._toolbox(handle), path)

    # -- commands -------------------------------------------------------------------

    def _exec_pool(self, name: str, toolbox: Toolbox) -> ExecPool:
        """The exec sessions kept for sandbox ``name``, reached through ``toolbox``."""
        with self._pools_lock:
            pool = self._pools.get(name)
            if pool is None or pool.toolbox.base != toolbox.base:
                pool = self._pools[name] = ExecPool(toolbox, name, limit=self.exec_sessions)
            return pool

    def _forget_pools(self, name: str) -> None:
        """Forget the exec sessions of sandbox ``name`` (it stops or goes: they die)."""
        with self._pools_lock:
            self._pools.pop(name, None)

    def _forget_sandbox(self, name: str) -> None:
        """Forget every session kept for sandbox ``name``, which is being stopped or
        destroyed (that ends them: nothing is deleted)."""
        with self._pools_lock:
            self._pools.pop(name, None)
            spares = self._spares.pop(name, None)
        if spares is not None:
            spares.close(delete=False)

    def _kept_toolbox(self, name: str) -> Toolbox | None:
        """The toolbox remembered for sandbox ``name`` with its sessions, if any."""
        with self._pools_lock:
            spares, pool = self._spares.get(name), self._pools.get(name)
        if spares is not None:
            return spares.toolbox
        return None if pool is None else pool.toolbox

    def _spare_sessions(self, name: str, toolbox: Toolbox) -> SpareSessions:
        """The spawn sessions of sandbox ``name`` reached through ``toolbox``; a holder
        for another toolbox is replaced (and deletes its spare)."""
        with self._pools_lock:
            spares = self._spares.get(name)
            if spares is not None and spares.toolbox.base == toolbox.base:
                return spares
            self._spares[name] = SpareSessions(toolbox, prefix=SPAWN_PREFIX)
            replaced, spares = spares, self._spares[name]
        if replaced is not None:
            replaced.close(delete=True)
        return spares

    def _forget_spares(self, name: str, spares: SpareSessions) -> None:
        """Give up ``spares`` (its toolbox turned a spawn away), deleting its spare."""
        with self._pools_lock:
            if self._spares.get(name) is spares:
                del self._spares[name]
        spares.close(delete=True)

    def _enter(self, toolbox: Toolbox, session_id: str, dir: str) -> None:
        """Make ``dir`` the working directory of session ``session_id``'s shell, which
        the spawned command starts from: ``Invalid`` when the shell cannot enter it."""
        window = self.api.timeouts.toolbox
        answer = toolbox.exec_sync(
            session_id, shim.enter_script(dir), wait=window, check=lambda: window
        )
        if answer.exit_code is None:
            raise ProviderError(PROVIDER, Reason.NO_EXIT_CODE, problem="entering the spawn's dir")
        if answer.exit_code != 0:
            raise Invalid(Reason.DIR, problem=no_such_dir(dir))

    @staticmethod
    def _drop_session(toolbox: Toolbox, session_id: str) -> None:
        try:
            toolbox.delete_session(session_id)
        except SandboxError as error:
            log.debug("daytona: deleting session %s failed: %r", session_id, error)

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
        """Run to exit in a kept exec session, with one synchronous session exec
        (:mod:`.exec`); past the deadline the exec is abandoned and its session
        deleted, which kills what the command left running. Output past
        ``max_bytes`` is ``Truncated`` (a command still running is killed the same
        way).

        The sandbox's toolbox is remembered with its sessions, so a warm exec makes
        no sandbox lookup; when the toolbox turns the exec away before any command
        ran (the sandbox is not started, is gone, or its daemon restarted), the
        sandbox is looked up (and woken) afresh and the exec runs there.
        """
        deadline = Deadline(timeout)
        deadline.check()
        run = shim.program(cmd, args, env=env, cwd=dir)
        name = _name(handle)
        with self._pools_lock:
            pool = self._pools.get(name)
        toolbox = self._kept_toolbox(name) if pool is None else pool.toolbox
        kept = toolbox is not None
        while True:
            if pool is None:
                if toolbox is None:
                    toolbox = self._toolbox(handle, limit=deadline.remaining())
                pool = self._exec_pool(name, toolbox)
            try:
                return run_exec(
                    pool,
                    lambda session_id, sweep: shim.exec_script(
                        session_id, run, merge=stderr_to_stdout, sweep=sweep
                    ),
                    deadline=deadline,
                    window=self.api.timeouts.toolbox,
                    policy=self.follow,
                    sandbox_gone=lambda: self._sandbox_gone(name),
                    stderr_to_stdout=stderr_to_stdout,
                    cwd=dir,
                    max_bytes=max_bytes,
                )
            except NotDispatched as refused:
                if not kept:
                    raise refused.error from None
                self._forget_pools(name)
                pool, toolbox, kept = None, None, False

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
        """Start a detachable session (every Daytona spawn is one); no tty.

        The command starts in the session created ahead for it (:mod:`.ahead`), else
        in one created now; the next one is created in the background once the
        command is under way (its first output, a quiet follow or its end). The
        sandbox's toolbox is remembered with its sessions, so a warm spawn makes no
        sandbox lookup; when the toolbox turns the spawn away before any command ran
        (the sandbox is not started, is gone, or its daemon restarted), the sandbox
        is looked up (and woken) afresh and the spawn runs there. A command is never
        started twice.

        With ``dir``, the session's shell enters it first (one synchronous
        request), so a ``dir`` the sandbox has no directory at raises ``Invalid``
        here, as on every other adapter, instead of starting a command that
        could only fail (the session is deleted).
        """
        if tty:
            raise NotSupported(Reason.TTY)
        stream = Stream(new_ref("daytona"), owner, label="daytona", stdin=stdin)
        run = shim.program(cmd, args, env=env, cwd=dir)
        name = _name(handle)
        toolbox = self._kept_toolbox(name)
        kept = toolbox is not None
        while True:
            if toolbox is None:
                toolbox = self._toolbox(handle)
            spares = self._spare_sessions(name, toolbox)
            try:
                session_id, command_id = self._start(spares, run, stdin=stream.stdin)
                break
            except NotDispatched as refused:
                if not kept:
                    raise refused.error from None
                self._forget_spares(name, spares)
                toolbox, kept = None, False
        return self._followed(
            stream,
            handle,
            DaytonaCommandEnd(stream, spares.toolbox, session_id, command_id),
            started=spares.refill if self.spawn_ahead else None,
        )

    def _start(self, spares: SpareSessions, run: shim.Program, *, stdin: bool) -> tuple[str, str]:
        """Start ``run`` asynchronously in a session of its own — the spare of ``spares``,
        else a new one —; its session and command ids.

        A spare the toolbox refuses before anything ran (:func:`.errors.exec_refused`:
        the daemon lost it, or its shell ended) is replaced by a new session.
        :class:`NotDispatched` when nothing ran and the sandbox must be looked up
        afresh: the toolbox says it is not started, a new session could not be
        created, or a new session refused the command too. Any other failure
        deletes the session (killing what may have started) and is raised.
        """
        toolbox = spares.toolbox
        session_id = spares.take()
        while True:
            fresh = session_id is None
            if session_id is None:
                session_id = spares.new_id()
                try:
                    toolbox.create_session(session_id)
                except Invalid as error:
                    if not is_status(error, 409):
                        raise NotDispatched(error) from None
                except SandboxError as error:
                    raise NotDispatched(error) from None
            try:
                if run.cwd is not None:
                    self._enter(toolbox, session_id, run.cwd)
                script = shim.script(session_id, run.entered(), stdin=stdin)
                return session_id, toolbox.exec_async(session_id, script)
            except SandboxError as error:
                away = not_started(error)
                # A session the daemon does not know, or of a sandbox not running, is gone.
                if not (away or isinstance(error, NotFound)):
                    self._drop_session(toolbox, session_id)
                if not (away or exec_refused(error)):
                    raise
                if fresh or away:
                    raise NotDispatched(error) from None
                session_id = None

    # -- sessions -----------------------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """The sandbox's spawned sessions, finished ones included; none while it is parked.
        A session that has run no command is not one yet (a session created ahead for
        the next spawn, or one whose spawn has not returned): it is left out.

        A session whose listed command carries an integer ``exitCode`` has ended with
        that code (the shim makes it the command's real one). The daemon records it
        lazily, so a command listed without one may be running or finished:
        ``ended`` and ``exit_code`` are then None."""
        try:
            toolbox = self._toolbox(handle, wake=False)
        except NotFound as error:
            if error.reason is Reason.SANDBOX_NOT_RUNNING:
                return []
            raise
        found = []
        for entry in toolbox.sessions():
            if not isinstance(entry, Mapping):
                continue
            session_id = entry.get("sessionId")
            if not isinstance(session_id, str) or not session_id.startswith(SPAWN_PREFIX):
                continue
            if entry.get("commands") == []:
                continue  # a session created ahead for a spawn (:mod:`.ahead`), or not yet used
            spawned = _spawned_command(entry)
            code = spawned.get("exitCode") if spawned is not None else None
            recorded = isinstance(code, int) and not isinstance(code, bool)
            found.append(
                Session(
                    id=session_id,
                    command=shim.command_line_of(
                        spawned.get("command") if spawned is not None else None
                    ),
                    ended=True if recorded else None,
                    exit_code=code if recorded else None,
                )
            )
        return sorted(found, key=lambda session: session.id)

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Replay the session's command from byte zero, then tail it to its real exit."""
        stream = Stream(new_ref("daytona"), owner, label="daytona", stdin=stdin)
        toolbox = self._toolbox(handle, wake=False)
        command_id = listed_command_id(_spawned_command(toolbox.session(session_id)))
        if command_id is None:
            raise NotFound(Reason.SESSION_WITHOUT_COMMAND, name=session_id)
        code = toolbox.command(session_id, command_id).get("exitCode")
        live = isinstance(code, bool) or not isinstance(code, int)
        return self._followed(
            stream,
            handle,
            DaytonaCommandEnd(stream, toolbox, session_id, command_id, live=live, attached=True),
            framed=session_id.startswith((SPAWN_PREFIX, EXEC_PREFIX)),
        )

    def _followed(
        self,
        stream: Stream,
        handle: Handle,
        end: DaytonaCommandEnd,
        *,
        framed: bool = True,
        started: Callable[[], None] | None = None,
    ) -> Command:
        """The command whose ``end`` is fed by a follower of its log (``framed``: written
        by our shim), started in ``stream``'s reader thread; ``started`` is called
        there once the command is under way (:class:`.stream.LogFollower`)."""
        name = handle.name
        follower = LogFollower(
            end.toolbox,
            end.session_id,
            end.command_id,
            self.follow,
            sandbox_gone=lambda: self._sandbox_gone(name),
            framed=framed,
            started=started,
        )
        stream.start(follower, on_stop=follower.abort)
        return Command(
            self.provider,
            stream.ref,
            frames=stream.frames,
            private=end,
            session_id=end.session_id,
        )

    def put_stream(self, handle: Handle, path: str, chunks: Iterable[bytes]) -> None:
        """A staged transfer's archive to ``path``: one streamed bulk upload."""
        try:
            self._toolbox(handle).upload_stream(path, chunks)
        except SandboxError as error:
            raise file_error(error, path) from None

    @contextmanager
    def get_stream(self, handle: Handle, path: str) -> Iterator[Iterator[bytes]]:
        """A staged transfer's archive at ``path``: one streamed bulk download."""
        with files.streamed(self._toolbox(handle), path) as chunks:
            yield chunks

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """Delete the session: the daemon kills its process group (TERM, grace, KILL) and
        confirms with 204. Force mode is not supported.

        A session that has ended is success: one still listed is deleted like any
        other. An absent session (never there, already deleted, or of a deleted
        sandbox) is success, as graceful mode makes it; a parked sandbox has no
        running session (its sessions ended when it stopped): success, without
        waking it. Past ``timeout`` (plus 5 s of transport) it is
        ``DeadlineExpired("termination_timeout")``.
        """
        timeout_ms = _args.termination_ms(timeout)
        if mode == "force":
            raise NotSupported(Reason.FORCE_TERMINATE_SESSION)
        try:
            toolbox = self._toolbox(handle, wake=False, limit=timeout_ms / 1000)
        except NotFound:
            return
        except SandboxError as error:
            raise _sanitised(error) from None
        try:
            toolbox.delete_session(session_id, read_timeout=timeout_ms / 1000 + 5.0)
        except NotFound:
            return
        except Unavailable as error:
            if error.reason is Reason.TIMEOUT:
                raise DeadlineExpired(Reason.TERMINATION_TIMEOUT) from None
            if error.reason is Reason.TRANSPORT:
                raise Unavailable(Reason.TERMINATION_TRANSPORT_FAILED) from error
            raise _sanitised(error) from None
        except SandboxError as error:
            raise _sanitised(error) from None

    # -- policy and URLs ----------------------------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Block all egress except the allowlisted domains (``allow=[]``: block everything)."""
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"expected a NetworkPolicy, got {type(policy).__name__}")
        domains = ",".join(_allow_entry(entry) for entry in policy.allow)
        self.api.network_settings(
            _name(handle), {"networkBlockAll": True, "domainAllowList": domains}
        )

    def public_url(self, handle: Handle) -> str | None:
        """``None``: no URL a browser could open exists to report (see the module docs)."""
        _name(handle)
        return None


def _spawned_command(session: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The command a spawn ran in its session: the one whose text is a spawn's script.

    The daemon lists a session's commands in no fixed order (they live in a hash
    map: docs/protocols/daytona.md#sessions), and a spawn given a ``dir`` ran the
    ``cd`` into it there first. Where no listed command is a spawn's script (a
    session this library did not spawn), the last one listed is taken."""
    commands = session.get("commands")
    if not isinstance(commands, list):
        return None
    usable = [entry for entry in commands if isinstance(entry, Mapping)]
    found = [entry for entry in usable if shim.is_spawn_script(entry.get("command"))] or usable
    return found[-1] if found else None
