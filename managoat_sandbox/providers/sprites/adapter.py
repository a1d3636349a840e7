"""The ``sprites`` adapter: Sprites (sprites.dev) over REST and WebSocket.

Settings come from config scope ``sprites`` at call time (see
:mod:`.settings`); a missing token is ``Denied`` before any request, and an
invalid sprite name is ``Invalid`` before any request. One pooled HTTP client
serves every thread of the adapter instance.

Behaviour worth knowing:

* ``create`` adopts an existing sprite on 409 (only 409: the provider also
  uses 400 for bad input). When ``public_urls`` is on (the default) a fresh
  sprite's URL is then made public, best effort.
* ``get`` maps ``running`` → running, ``warm``/``cold`` (parked, disk kept) →
  suspended, anything else → unknown, and keeps the provider's answer as
  ``raw``.
* Sprites park themselves when idle (scale to zero), so ``suspend`` is a
  no-op and ``resume`` a probe (``get``); the next exec wakes the sprite.
* Commands run over one WebSocket each. ``stop_command`` closes only this
  socket: the remote process keeps running (for ``max_run_after_disconnect``,
  10 s by default for non-TTY commands) and stays attachable. ``exec``
  abandons the remote process in the same way when its deadline passes; when
  its output passes ``max_bytes`` it kills it (the kill endpoint, SIGKILL).
  A reader whose frames are not taken stops reading its socket, so unread
  output waits on the wire and at Sprites, not in this process.
  ``env``, when given, replaces the sprite's default environment (provider
  behaviour). A 503 while a fresh sprite boots is ``Unavailable`` (transient).
* ``attach`` returns a ``Command`` whose ``session_id`` is the id attached to.
  A ``detachable=True`` spawn's ``session_id`` is the id the server announces
  in its first message, the ``session_info`` text frame (the upgrade answer
  carries none): ``spawn`` reads it before returning, waiting at most the
  request timeout (it stays ``None`` only if none came by then). Other
  spawns and ``exec`` do not wait for it.
* ``apply_network_policy(NetworkPolicy(allow=[]))`` sends one explicit rule
  denying ``*`` — an empty rule list would mean "no enforcement" to Sprites.
* ``read_file`` and ``list_files`` use the filesystem API (``fs/read``,
  ``fs/list``) with absolute paths; the file's body is streamed, never held
  twice, and ``max_bytes`` stops it early. A listing's ``mode`` is the
  permission bits and ``modified`` its ``modTime``. A directory read, or a
  listing of a file, is ``Invalid``; the wire facts are in :mod:`.files`.
* Checkpoints (and ``create_checkpoint_once``) exist only while
  ``checkpoint_creation_enabled`` is on; otherwise they are ``NotSupported``
  without a request and the capabilities are not advertised.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from ... import _args
from ..._collect import collect_exec
from ..._deadline import Deadline
from ..._dir_refusal import raise_refusal
from ..._http import HttpClient, Transport
from ..._streaming import Stream, StreamingAdapter, new_ref
from ...contract import Capability, Owner
from ...errors import Invalid, NotSupported, SandboxError
from ...reasons import Reason
from ...transfers import StagedTarTransfers, TarTransfers
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
from . import checkpoints, files, once
from .api import SpritesApi, sprite_path
from .end import SpritesCommandEnd
from .errors import http_error
from .settings import SETTINGS, USER_AGENT, Settings, check_name, checkpoints_enabled, load
from .stream import open_socket
from .timestamps import timestamp

__all__ = ["Sprites"]

log = logging.getLogger("managoat_sandbox.providers.sprites")

_STATUS: dict[str, Status] = {"running": "running", "warm": "suspended", "cold": "suspended"}
_OPERATION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
#: How long killing an exec whose output passed its limit may take to be confirmed.
_KILL_TIMEOUT_MS = 5000
_DEFAULT_MODE = 0o644


class Sprites(StagedTarTransfers, StreamingAdapter):
    """Sprites (sprites.dev); see the module docstring.

    ``keepalive`` is the WebSocket ping interval in seconds (a connection
    silent for three intervals is dead); ``page_cap`` the most listing pages
    ``list_all_names`` walks before refusing with ``Truncated``.
    """

    provider = "sprites"
    command_type = SpritesCommandEnd

    _ALWAYS = frozenset(
        {
            Capability.SUSPEND,
            Capability.ISOLATION,  # a microVM per sandbox
            Capability.TRANSFER,  # one tar stream through a command
            Capability.NETWORK_POLICY,
            Capability.ATTACH,
            Capability.TTY,
            Capability.PUBLIC_URL,
            Capability.TERMINATE_SESSION,
            Capability.FORCE_TERMINATE_SESSION,
            Capability.CREATE_NEW,
            Capability.DESTROY_ONCE,
            Capability.READ_FILE,
            Capability.LIST_FILES,
        }
    )
    _CHECKPOINTING = frozenset({Capability.CHECKPOINT, Capability.CREATE_CHECKPOINT_ONCE})

    def __init__(
        self, *, keepalive: float = 15.0, page_cap: int = 40, transport: Transport | None = None
    ) -> None:
        if _args.seconds(keepalive, "keepalive") <= 0:
            raise ValueError("keepalive must be positive")
        if isinstance(page_cap, bool) or not isinstance(page_cap, int) or page_cap < 1:
            raise ValueError("page_cap must be a positive int")
        self._keepalive = float(keepalive)
        self._page_cap = page_cap
        self._http = HttpClient(user_agent=USER_AGENT, transport=transport)

    def capabilities(self) -> frozenset[str]:
        if checkpoints_enabled():
            return self._ALWAYS | self._CHECKPOINTING
        return self._ALWAYS

    def _api(self) -> SpritesApi:
        return SpritesApi(self._http, load())

    @staticmethod
    def _name(handle: Handle) -> str:
        """The handle's sprite name; ``Invalid(("handle", "endpoint_changed"))`` when the
        handle was made against another ``base_url`` than the configured one
        (:mod:`.._endpoint`)."""
        _endpoint.check(handle, SETTINGS.url("base_url"))
        return check_name(handle.name)

    # -- lifecycle --------------------------------------------------------

    def build_handle(self, name: str) -> Handle:
        """A handle of ``name`` carrying the ``base_url`` configured now (:mod:`.._endpoint`)."""
        return _endpoint.carrying(Handle(self.provider, check_name(name)), SETTINGS.url("base_url"))

    def create(self, name: str, **opts: Any) -> Handle:
        """Create ``name``; an existing sprite (409) is adopted with no further request."""
        if opts:
            raise TypeError(f"unknown create options: {sorted(opts)}")
        name = check_name(name)
        api = self._api()
        response = api.create({"name": name})
        if response.status == 409:
            return _endpoint.carrying(Handle(self.provider, name), api.settings.base_url)
        if not response.ok:
            raise http_error(response)
        if api.settings.public_urls:
            try:
                api.make_public(name)
            except SandboxError as error:
                log.warning(
                    "sprites: making the URL of a new sprite public failed (%s); "
                    "the sprite was created",
                    type(error).__name__,
                )
        body = _json_or_none(response)
        instance_id = body.get("id") if isinstance(body, dict) else None
        return _endpoint.carrying(
            Handle(
                self.provider,
                name,
                instance_id=instance_id if isinstance(instance_id, str) else None,
            ),
            api.settings.base_url,
        )

    def create_new(self, name: str, *, timeout: float = 120.0, **opts: Any) -> Handle:
        """One POST that never adopts: 409 is ``AlreadyExists``
        (docs/protocols/sprites.md#create_new).

        Only option: ``wait_for_capacity`` (bool). ``0 < timeout <= 120``
        seconds bounds the whole call.
        """
        unknown = set(opts) - {"wait_for_capacity"}
        if unknown:
            raise TypeError(f"unknown create_new options: {sorted(unknown)}")
        wait = opts.get("wait_for_capacity", False)
        if not isinstance(wait, bool):
            raise Invalid(Reason.CREATE_OPTIONS, message="wait_for_capacity must be a bool")
        seconds = float(timeout)
        name = check_name(name)
        settings = load()
        instance_id = once.create_new(
            settings, name, timeout=seconds, wait_for_capacity=wait, transport=self._http.transport
        )
        return _endpoint.carrying(
            Handle(self.provider, name, instance_id=instance_id), settings.base_url
        )

    def get(self, handle: Handle) -> Info:
        name = self._name(handle)
        raw = self._api().get(name)
        status = raw.get("status")
        return Info(
            status=_STATUS.get(status, "unknown") if isinstance(status, str) else "unknown", raw=raw
        )

    def destroy(self, handle: Handle) -> None:
        """Delete the sprite; an already-gone sprite (404) is fine."""
        name = self._name(handle)
        response = self._api().delete(name)
        if not response.ok and response.status != 404:
            raise http_error(response)

    def destroy_once(self, handle: Handle, *, timeout: float = 120.0) -> None:
        """One DELETE, confirmed by exactly one GET answering 404
        (docs/protocols/sprites.md#destroy_once)."""
        seconds = float(timeout)
        name = self._name(handle)
        once.destroy_once(load(), name, timeout=seconds, transport=self._http.transport)

    def list_all_names(self) -> frozenset[str]:
        return self._api().list_names(self._page_cap)

    def suspend(self, handle: Handle) -> None:
        """A no-op: sprites park themselves when idle, keeping their disk."""
        self._name(handle)
        load()

    def resume(self, handle: Handle) -> Handle:
        """A probe (``get``); the next command wakes the sprite."""
        self.get(handle)
        return handle

    # -- files ------------------------------------------------------------

    def write_file(
        self, handle: Handle, path: str, data: bytes, *, mode: int | None = None
    ) -> None:
        """Write through the filesystem endpoint, creating parent directories."""
        name = self._name(handle)
        self._api().write_file(name, path, data, _DEFAULT_MODE if mode is None else mode)

    def read_file(self, handle: Handle, path: str, *, max_bytes: int | None = None) -> bytes:
        """Read through the filesystem endpoint, the body streamed into
        :func:`~managoat_sandbox.files.collect` (see :mod:`.files`)."""
        name = self._name(handle)
        return files.read(self._api(), name, path, max_bytes)

    #: An upload goes through a command's stdin, unstaged: the exec WebSocket takes it as
    #: fast as ``fs/write`` does, and staging would copy it twice (``bench/transfers.py``);
    #: a download is staged, ``fs/read`` being faster than the exec's stdout.
    upload = TarTransfers.upload

    @contextmanager
    def get_stream(self, handle: Handle, path: str) -> Iterator[Iterator[bytes]]:
        """A staged transfer's archive at ``path``: one streamed ``fs/read``."""
        with files.streamed(self._api(), self._name(handle), path) as chunks:
            yield chunks

    def list_files(self, handle: Handle, path: str) -> list[FileInfo]:
        """List through the filesystem endpoint (see :mod:`.files`)."""
        name = self._name(handle)
        return files.listing(self._api(), name, path)

    # -- commands ---------------------------------------------------------

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
        """Run to exit over a WebSocket; on expiry the local end is abandoned. Output
        past ``max_bytes`` is ``Truncated``, and the process is killed (:meth:`_kill`)."""
        deadline = Deadline(timeout)
        deadline.check()
        name = self._name(handle)

        def start(owner: Any) -> Command:
            return self._open(
                handle,
                cmd,
                args,
                owner=owner,
                env=env,
                dir=dir,
                stdin=False,
                tty=False,
                detachable=False,
                deadline=deadline,
            )

        return collect_exec(
            start,
            self.stop_command,
            deadline=deadline,
            stderr_to_stdout=stderr_to_stdout,
            max_bytes=max_bytes,
            kill=lambda command: self._kill(name, command),
        )

    def _kill(self, name: str, command: Command) -> None:
        """SIGKILL an exec's process group through the kill endpoint, best effort
        (docs/protocols/sprites.md#kill-endpoint): closing the socket alone would leave
        it running for ``max_run_after_disconnect``. Its session id is the one
        ``session_info`` announced, which precedes any output."""
        session_id = command.private.session_id
        if session_id is None:
            return
        try:
            once.terminate_session(
                load(),
                name,
                session_id,
                timeout_ms=_KILL_TIMEOUT_MS,
                force=True,
                transport=self._http.transport,
            )
        except SandboxError as error:
            log.debug("sprites: killing exec session %s failed: %r", session_id, error)

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
        return self._open(
            handle,
            cmd,
            args,
            owner=owner,
            env=env,
            dir=dir,
            stdin=stdin,
            tty=tty,
            detachable=detachable,
            deadline=None,
        )

    def _open(
        self,
        handle: Handle,
        cmd: str,
        argv: Sequence[str],
        *,
        owner: Owner | None,
        env: dict[str, str] | None,
        dir: str | None,
        stdin: bool,
        tty: bool,
        detachable: bool,
        deadline: Deadline | None,
    ) -> Command:
        name = self._name(handle)
        settings = load()
        params = [("cmd", cmd), *(("cmd", arg) for arg in argv), ("path", cmd)]
        params += [("env", f"{key}={value}") for key, value in (env or {}).items()]
        if dir is not None:
            params.append(("dir", dir))
        params += [("tty", _bool(tty)), ("stdin", _bool(stdin))]
        if detachable:
            params.append(("detachable", "true"))
        stream = Stream(new_ref("sprites"), owner, label="sprites", stdin=stdin)
        try:
            return self._connect(
                settings,
                stream,
                sprite_path(name, "exec"),
                params,
                tty=tty,
                attached=False,
                deadline=deadline,
                announced=detachable,
            )
        except Invalid as error:
            raise_refusal(error, dir, self, handle, deadline)

    def _connect(
        self,
        settings: Settings,
        stream: Stream,
        path: str,
        params: list[tuple[str, str]],
        *,
        tty: bool,
        attached: bool,
        deadline: Deadline | None = None,
        session_id: str | None = None,
        announced: bool = False,
    ) -> Command:
        """Open the socket and start its reader. With ``announced``, the server's
        ``session_info`` is read first, and its id is the command's ``session_id``."""
        timeout = settings.timeout if deadline is None else deadline.clamp(settings.timeout)
        try:
            ws = open_socket(
                settings, path, params, timeout=timeout, transport=self._http.transport
            )
        except SandboxError:
            if deadline is not None:
                deadline.check()
            raise
        state = SpritesCommandEnd(stream, ws, tty=tty, attached=attached, keepalive=self._keepalive)
        if announced:
            state.read_session_info(timeout)
            session_id = state.session_id
        state.start()
        return Command(
            self.provider, stream.ref, frames=stream.frames, private=state, session_id=session_id
        )

    # -- sessions ---------------------------------------------------------

    def list_sessions(self, handle: Handle) -> list[Session]:
        """Every session the sprite lists (ids stringified; no is_active filtering)."""
        name = self._name(handle)
        return [
            session
            for session in (_session(entry) for entry in self._api().sessions(name))
            if session is not None
        ]

    def attach(
        self, handle: Handle, session_id: str, *, owner: Owner | None = None, stdin: bool = False
    ) -> Command:
        """Rejoin a session (``/exec/<id>``): its output from byte zero, then the live tail."""
        name = self._name(handle)
        settings = load()
        stream = Stream(new_ref("sprites"), owner, label="sprites", stdin=stdin)
        return self._connect(
            settings,
            stream,
            sprite_path(name, "exec", session_id),
            [("stdin", _bool(stdin))],
            tty=False,
            attached=True,
            session_id=session_id,
        )

    def terminate_session(
        self, handle: Handle, session_id: str, *, timeout: float = 10.0, mode: str = "graceful"
    ) -> None:
        """Kill the session's process group with confirmation
        (docs/protocols/sprites.md#terminate_session).

        Graceful sends SIGTERM with ``timeout`` as the grace period before
        SIGKILL; force sends SIGKILL. A session that has already ended is
        success in both modes; an absent one (the sprite does not know it: never
        there, or an ended session it has forgotten) is success in graceful mode
        and ``Unavailable("termination_unconfirmed")`` in force mode.
        """
        timeout_ms = _args.termination_ms(timeout)
        name = self._name(handle)
        once.terminate_session(
            load(),
            name,
            session_id,
            timeout_ms=timeout_ms,
            force=mode == "force",
            transport=self._http.transport,
        )

    # -- policy and URLs --------------------------------------------------

    def apply_network_policy(self, handle: Handle, policy: NetworkPolicy) -> None:
        """Send the allowlist as allow rules; ``allow=[]`` as one rule denying ``*``."""
        name = self._name(handle)
        if not isinstance(policy, NetworkPolicy):
            raise TypeError(f"policy must be a NetworkPolicy, got {type(policy).__name__}")
        self._api().set_policy(name, compile_rules(policy))

    def public_url(self, handle: Handle) -> str | None:
        """The sprite's ``url``; ``None`` when the sprite reports none."""
        url = self._api().get(self._name(handle)).get("url")
        return url if isinstance(url, str) and url.startswith("http") else None

    # -- checkpoints ------------------------------------------------------

    def _checkpointing(self, operation: Reason) -> None:
        if not checkpoints_enabled():
            raise NotSupported(operation)

    def create_checkpoint(self, handle: Handle, *, comment: str | None = None) -> str:
        self._checkpointing(Reason.CHECKPOINT)
        name = self._name(handle)
        return checkpoints.create(self._api(), name, comment or "")

    def create_checkpoint_once(
        self, handle: Handle, *, operation_id: str, timeout: float = 120.0
    ) -> str:
        """Exactly one checkpoint correlated to ``operation_id``
        (docs/protocols/sprites.md#create_checkpoint_once)."""
        self._checkpointing(Reason.CREATE_CHECKPOINT_ONCE)
        if not isinstance(operation_id, str) or _OPERATION_ID.fullmatch(operation_id) is None:
            raise Invalid(
                Reason.CHECKPOINT_OPERATION_ID,
                message="operation_id must be 1-128 characters of [A-Za-z0-9_-]",
            )
        seconds = float(timeout)
        name = self._name(handle)
        return once.create_checkpoint_once(
            load(), name, operation_id=operation_id, timeout=seconds, transport=self._http.transport
        )

    def restore_checkpoint(self, handle: Handle, checkpoint_id: str) -> None:
        self._checkpointing(Reason.CHECKPOINT)
        name = self._name(handle)
        if not isinstance(checkpoint_id, str):
            raise TypeError(f"checkpoint_id must be a str, got {type(checkpoint_id).__name__}")
        if not checkpoint_id or len(checkpoint_id) > 256:
            raise Invalid(Reason.CHECKPOINT_ID, problem="must be 1-256 characters")
        checkpoints.restore(self._api(), name, checkpoint_id)


def compile_rules(policy: NetworkPolicy) -> list[dict[str, str]]:
    """The Sprites rules for an allowlist: ordered allow rules, or one deny-all rule."""
    for host in policy.allow:
        if not host or any(ch.isspace() for ch in host):
            raise Invalid(
                Reason.NETWORK_POLICY, problem="hosts must be non-empty without whitespace"
            )
    if not policy.allow:
        return [{"domain": "*", "action": "deny"}]
    return [{"domain": host, "action": "allow"} for host in policy.allow]


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _json_or_none(response: Any) -> Any:
    try:
        return response.json()
    except SandboxError:
        return None


def _session(entry: Any) -> Session | None:
    """A listed session as a ``Session``; an entry without a usable id is skipped."""
    if not isinstance(entry, dict):
        return None
    raw_id = entry.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or raw_id == "":
        return None
    command = entry.get("command")
    return Session(
        id=str(raw_id),
        command=command if isinstance(command, str) else None,
        created_at=timestamp(entry.get("created")),
        last_activity_at=timestamp(entry.get("last_activity")),
        tty=entry.get("tty") is True,
    )
