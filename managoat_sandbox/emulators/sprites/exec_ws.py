"""Exec over WebSocket, attach, the session listing and the kill endpoint.

See docs/protocols/sprites.md#exec-over-websocket and
docs/protocols/sprites.md#sessions.

Each new command is a journaled session of the sprite's box: a real process
inside the sprite, started in its own process group with the sprite's
environment (``PATH``, ``HOME=/home/sprite``, ``USER=sprite``, the proxy
variables, ``SPRITE_NAME``, then the ``env`` parameters) in ``dir`` (a sprite
path, ``/`` by default). A socket first gets a text ``session_info`` (always
with ``tty``, docs/protocols/sprites.md#always-send-tty), then the session's
output from byte zero — so output
written while nobody listened is replayed — then live output as the box
pushes it, then the exit: binary ``03 <code & 0xFF>`` without a tty, text
``{"type":"exit","exit_code":N}`` with one; then a normal close. A session
whose outcome is lost (its agent went away) closes with 1011 instead. Without
a tty the client sends ``00 <bytes>`` for stdin and ``04`` for end of input;
with one, raw bytes. Text ``resize`` resizes the terminal; text ``signal``
(advertised in ``X-Sprite-Capabilities``) signals the process group. Closing a
socket never ends the process: after the last socket goes, it keeps running
for ``max_run_after_disconnect`` (non-tty 10 s, tty and ``detachable=true``
forever; ``0`` means forever) and is then killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import threading
from typing import Any

from aiohttp import WSMsgType, web

from ..._engine import safefs
from ..._engine.box import Refused
from ..._engine.errors import EngineError
from ..._engine.events import Exited, Output
from ..._engine.subscription import Subscription
from .. import _cut
from .._blocking import run_blocking
from .._input import BadInput, load_json, parse_int
from .._server import Fault, Faults
from . import wire
from .aio import end_of, follow
from .behaviour import Behaviour
from .state import ExecSession, Sprite, State, now, wake

DEFAULT_DETACHED_RUN = 10.0
KILL_SETTLE = 5.0
STDIN_TIMEOUT = 30.0
_SIGNALS = {
    name: getattr(signal, name)
    for name in (
        "SIGTERM",
        "SIGKILL",
        "SIGINT",
        "SIGHUP",
        "SIGQUIT",
        "SIGUSR1",
        "SIGUSR2",
        "SIGCONT",
        "SIGSTOP",
    )
}
_TERMINAL = range(1, 65536)
_MAX_SESSION_ID = 2**63 - 1


def signal_number(name: str) -> int | None:
    """``SIGTERM``/``TERM``/``15`` → 15; None if unknown."""
    name = name.strip().upper()
    if name.isdigit():
        number = _number(name, signal.NSIG)
        return number if number in signal.valid_signals() else None
    return _SIGNALS.get(name if name.startswith("SIG") else f"SIG{name}")


def _number(text: str, high: int) -> int | None:
    """``text`` as an integer from 0 to ``high`` (ASCII digits only), else None."""
    try:
        return parse_int(text, "number", low=0, high=high)
    except BadInput:
        return None


def _session(sprite: Sprite, raw_id: str) -> ExecSession | None:
    """The sprite's session whose id is ``raw_id``, if any."""
    number = _number(raw_id, _MAX_SESSION_ID)
    return None if number is None else sprite.sessions.get(number)


def is_upgrade(request: web.Request) -> bool:
    """Whether the request asks for a WebSocket."""
    return request.headers.get("Upgrade", "").lower() == "websocket"


def terminal_size(query: Any) -> tuple[int, int]:
    """``(cols, rows)`` from the ``cols``/``rows`` query parameters (default 80 by 24)."""
    sizes = []
    for key, default in (("cols", 80), ("rows", 24)):
        value = _number(str(query.get(key, "")), _TERMINAL.stop - 1)
        sizes.append(default if value is None or value not in _TERMINAL else value)
    return sizes[0], sizes[1]


class Exec:
    """Handlers of ``/exec`` (listing, new command, attach) and ``…/kill``."""

    def __init__(self, state: State, faults: Faults, behaviour: Behaviour) -> None:
        self.state = state
        self.faults = faults
        self.behaviour = behaviour

    def add_routes(self, app: web.Application) -> None:
        """Register the routes."""
        app.router.add_get("/v1/sprites/{name}/exec", self.exec_root)
        app.router.add_post("/v1/sprites/{name}/exec", self.http_exec)
        app.router.add_get("/v1/sprites/{name}/exec/{session}", self.attach_path)
        app.router.add_post("/v1/sprites/{name}/exec/{session}/kill", self.kill)

    # -- listing, new command, attach ------------------------------------------------------

    async def exec_root(self, request: web.Request) -> web.StreamResponse:
        """``GET /exec``: the session listing, or (upgrade) a new command or legacy attach."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        if not is_upgrade(request):
            sessions = await run_blocking(lambda: self._listing(sprite))
            return web.json_response({"sessions": sessions})
        legacy = request.query.get("id") or request.query.get("session_id")
        if legacy:
            return await self._attach(request, sprite, legacy)
        return await self._new_command(request, sprite)

    async def attach_path(self, request: web.Request) -> web.StreamResponse:
        """``GET /exec/{session}`` (upgrade): attach."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        if not is_upgrade(request):
            return wire.invalid("attach needs a WebSocket upgrade")
        return await self._attach(request, sprite, request.match_info["session"])

    def _listing(self, sprite: Sprite) -> list[dict[str, Any]]:
        sessions = sorted(sprite.sessions.values(), key=lambda s: s.id)
        if not self.behaviour.list_finished_sessions:
            sessions = [s for s in sessions if not s.ended()]
        return [s.listing() for s in sessions]

    async def _new_command(self, request: web.Request, sprite: Sprite) -> web.StreamResponse:
        started = await self._start(request, sprite, stdin_default=None)
        if isinstance(started, web.StreamResponse):
            return started
        session, subscription = started
        return await Connection(
            request,
            sprite,
            session,
            self.behaviour,
            owner=True,
            faults=self.faults,
            subscription=subscription,
        ).serve()

    async def http_exec(self, request: web.Request) -> web.StreamResponse:
        """``POST /exec?cmd=…`` (no upgrade): the body is stdin; the answer streams the
        same frames as the socket (``01``/``02`` + bytes, one chunk each), ending ``03 code``."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        body = await request.read()
        started = await self._start(request, sprite, stdin_default=bool(body))
        if isinstance(started, web.StreamResponse):
            return started
        session, subscription = started
        async with contextlib.aclosing(follow(subscription)) as events:
            if session.stdin:
                await _feed(session, body)
                await _feed(session, None)
            response = web.StreamResponse(
                status=200, headers={"Content-Type": "application/octet-stream"}
            )
            await response.prepare(request)
            async for event in events:
                if isinstance(event, Output):
                    await response.write(bytes([event.stream]) + event.data)
                elif isinstance(event, Exited):
                    await response.write(bytes([3, event.code & 0xFF]))
        await response.write_eof()
        return response

    async def _start(
        self, request: web.Request, sprite: Sprite, stdin_default: bool | None
    ) -> tuple[ExecSession, Subscription] | web.StreamResponse:
        """Validate a new command's query and start it in the sprite's box: its session
        and a subscription to it from byte zero."""
        query = request.query
        argv = query.getall("cmd", [])
        if not argv:
            return wire.invalid("cmd is required")
        tty = wire.flag(query.get("tty"), False)
        detachable = wire.flag(query.get("detachable"), False)
        wants_stdin = wire.flag(query.get("stdin"), tty if stdin_default is None else stdin_default)
        workdir = query.get("dir") or "/"
        cwd = sprite.resolve(workdir)
        if not await run_blocking(lambda: _is_directory(sprite, cwd)):
            return wire.invalid("dir does not exist in the sprite")
        try:
            run_after = _run_after_disconnect(
                query.get("max_run_after_disconnect"), tty, detachable
            )
        except ValueError:
            return wire.invalid("bad max_run_after_disconnect")
        refusal = self._refusal(request, sprite)
        if refusal is not None:
            return refusal
        if query.get("path"):
            argv = [query["path"], *argv[1:]]
        extra = {"SPRITE_NAME": sprite.name}
        for item in query.getall("env", []):
            key, _, value = item.partition("=")
            if key:
                extra[key] = value
        cols, rows = terminal_size(query)
        session_id = self.state.next_session_id()
        box = sprite.box
        async with sprite.machine:
            try:
                pid, subscription = await run_blocking(
                    lambda: _spawn(
                        sprite,
                        str(session_id),
                        argv,
                        env=box.environment(extra, tty=tty),
                        cwd=box.agent_path(cwd),
                        stdin=wants_stdin,
                        tty=tty,
                        rows=rows,
                        cols=cols,
                    )
                )
            except Refused as failure:
                if failure.code == "bad_cwd":
                    return wire.invalid("dir does not exist in the sprite")
                return wire.error(500, "internal_error", "the command could not be started")
            except (OSError, EngineError):
                return wire.error(500, "internal_error", "the command could not be started")
        session = ExecSession(
            session_id, box, pid, tuple(argv), workdir, tty, wants_stdin, now(), run_after
        )
        sprite.sessions[session_id] = session
        return session, subscription

    async def _attach(
        self, request: web.Request, sprite: Sprite, raw_id: str
    ) -> web.StreamResponse:
        session = _session(sprite, raw_id)
        if session is None:
            return wire.not_found("session")
        if self.behaviour.attach_finished_status is not None and await run_blocking(session.ended):
            return wire.error(
                self.behaviour.attach_finished_status, "not_found", "session has exited"
            )
        rejected = self.faults.take("ws_reject", "GET", request.path)
        if rejected is not None:
            return _rejection(rejected)
        await run_blocking(lambda: wake(sprite))
        return await Connection(
            request, sprite, session, self.behaviour, owner=False, faults=self.faults
        ).serve()

    def _refusal(self, request: web.Request, sprite: Sprite) -> web.StreamResponse | None:
        rejected = self.faults.take("ws_reject", "GET", request.path)
        if rejected is not None:
            return _rejection(rejected)
        if sprite.boot_refusals > 0:
            sprite.boot_refusals -= 1
            return wire.error(503, "unavailable", "sprite is starting, try again")
        return None

    # -- kill -----------------------------------------------------------------------------

    async def kill(self, request: web.Request) -> web.StreamResponse:
        """``POST /exec/{session}/kill``: NDJSON ``signal``, [``timeout``], ``exited``/``killed``,
        ``complete``. Parameters from the query (``signal=SIGTERM&timeout=1000ms``) or a JSON
        body (``{"signal": "SIGTERM", "timeout": 10}``, seconds)."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        raw_id = request.match_info["session"]
        session = _session(sprite, raw_id)
        if session is None:
            return wire.not_found("session")
        parsed = await _kill_parameters(request)
        if isinstance(parsed, web.Response):
            return parsed
        signame, signum, grace = parsed
        script = self.faults.take("ndjson", request.method, request.path)
        if script is not None:
            return await wire.scripted(request, script.body or [], cut=script.size > 0)
        if await run_blocking(session.ended):
            return wire.error(self.behaviour.kill_gone_status, "not_found", "session has exited")
        return await _kill_stream(request, session, signame, signum, grace)


def _is_directory(sprite: Sprite, path: str) -> bool:
    try:
        with sprite.files() as root_fd:
            return safefs.is_directory(root_fd, path)
    except OSError:
        return False


def _spawn(
    sprite: Sprite,
    sid: str,
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str,
    stdin: bool,
    tty: bool,
    rows: int,
    cols: int,
) -> tuple[int | None, Subscription]:
    """Wake the sprite and start a journaled session followed from byte zero (blocking)."""
    wake(sprite)
    pid, subscription = sprite.box.spawn(
        sid, argv, env=env, cwd=cwd, stdin=stdin, tty=tty, rows=rows, cols=cols, follow=True
    )
    assert subscription is not None  # always given with follow=True
    return pid, subscription


class Connection:
    """One WebSocket following one session (the owner's or an attacher's).

    The owner's connection is given the subscription its spawn returned; an
    attacher's attaches from byte zero. Either way the connection owns it.
    """

    def __init__(
        self,
        request: web.Request,
        sprite: Sprite,
        session: ExecSession,
        behaviour: Behaviour,
        *,
        owner: bool,
        faults: Faults,
        subscription: Subscription | None = None,
    ) -> None:
        self.request = request
        self.sprite = sprite
        self.session = session
        self.behaviour = behaviour
        self.owner = owner
        self.subscription = subscription
        self.drop = faults.take("ws_drop", "GET", request.path)
        self.exit_payload = faults.take("ws_exit", "GET", request.path)
        self.ws = web.WebSocketResponse(max_msg_size=16 * 1024 * 1024)

    async def serve(self) -> web.StreamResponse:
        """Upgrade, then relay both ways until the exit is sent or the client goes."""
        session = self.session
        loop = asyncio.get_running_loop()

        def abort() -> None:
            loop.call_soon_threadsafe(self._abort)

        session.connections.add(abort)
        session.subscribers += 1
        if session.timer is not None:
            session.timer.cancel()
            session.timer = None
        try:
            self.ws.headers["X-Sprite-Capabilities"] = "signal"
            await self.ws.prepare(self.request)
            await self.ws.send_str(json.dumps(self._session_info()))
            if self.subscription is None:
                self.subscription = await self._attach()
            pump = asyncio.ensure_future(self._pump())
            reader = asyncio.ensure_future(self._read())
            _, pending = await asyncio.wait({pump, reader}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in (pump, reader):
                with contextlib.suppress(asyncio.CancelledError, ConnectionError, RuntimeError):
                    await task
        except (ConnectionError, RuntimeError):
            pass
        finally:
            if self.subscription is not None:
                self.subscription.close()
            session.connections.discard(abort)
            session.subscribers -= 1
            self._arm_timer()
        return self.ws

    async def _attach(self) -> Subscription | None:
        """The session from byte zero (None if the box no longer has it)."""
        box, sid = self.session.box, self.session.sid
        try:
            return await run_blocking(lambda: box.attach(sid))
        except (OSError, EngineError):
            return None

    def _session_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {
            "type": "session_info",
            "session_id": (
                str(self.session.id) if self.behaviour.string_session_ids else self.session.id
            ),
            "command": self.session.command,
            "created": int(self.session.created.timestamp()),
            "is_owner": self.owner,
            "tty": self.session.tty,
        }
        if self.session.tty:
            info["cols"], info["rows"] = terminal_size(self.request.query)
        return info

    async def _pump(self) -> None:
        """The session's events → frames, ending in the exit frame and a normal close."""
        sent = 0
        limit = max(1, self.behaviour.max_output_frame)
        if await self._dropped(sent):
            return
        if self.subscription is None:
            await self.ws.close(code=1011, message=b"session lost")
            return
        async with contextlib.aclosing(follow(self.subscription)) as events:
            async for event in events:
                if isinstance(event, Output):
                    for start in range(0, len(event.data), limit):
                        payload = event.data[start : start + limit]
                        prefix = b"" if self.session.tty else bytes([event.stream])
                        await self.ws.send_bytes(prefix + payload)
                        sent += 1
                        if await self._dropped(sent):
                            return
                elif isinstance(event, Exited):
                    await self._send_exit(event.code)
                    await self.ws.close()
                    return
                else:
                    await self.ws.close(code=1011, message=b"session lost")
                    return

    async def _send_exit(self, code: int) -> None:
        if self.exit_payload is not None:
            payload = self.exit_payload.body
            if isinstance(payload, str):
                await self.ws.send_str(payload)
            else:
                await self.ws.send_bytes(bytes(payload))
        elif self.session.tty:
            await self.ws.send_str(json.dumps({"type": "exit", "exit_code": code}))
        else:
            await self.ws.send_bytes(bytes([3, code & 0xFF]))

    async def _dropped(self, sent: int) -> bool:
        """Apply a ``ws_drop`` fault once ``sent`` output frames went out."""
        if self.drop is None or sent < self.drop.size:
            return False
        if self.drop.body == "close":
            await self.ws.close()
        elif self.drop.body == "reset":
            _cut.reset(self.request.transport)
        else:
            self._abort()
        return True

    async def _read(self) -> None:
        """Client frames → the process (stdin, end of input, resizes, signals)."""
        async for message in self.ws:
            if message.type == WSMsgType.BINARY:
                await self._client_bytes(message.data)
            elif message.type == WSMsgType.TEXT:
                await self._client_text(message.data)

    async def _client_bytes(self, data: bytes) -> None:
        session = self.session
        if session.tty:
            await _feed(session, data)
        elif data[:1] == b"\x00":
            await _feed(session, data[1:])
        elif data[:1] == b"\x04":
            await _feed(session, None)

    async def _client_text(self, text: str) -> None:
        try:
            message = load_json(text)
        except BadInput:
            return
        if not isinstance(message, dict):
            return
        session = self.session
        if message.get("type") == "signal":
            signum = signal_number(str(message.get("signal", "")))
            if signum is not None:
                await run_blocking(lambda: session.signal(signum))
        elif message.get("type") == "resize" and session.tty:
            cols, rows = message.get("cols"), message.get("rows")
            if (
                isinstance(cols, int)
                and isinstance(rows, int)
                and cols in _TERMINAL
                and rows in _TERMINAL
            ):
                await run_blocking(lambda: _resize(session, rows, cols))

    def _abort(self) -> None:
        transport = self.request.transport
        if transport is not None:
            transport.abort()

    def _arm_timer(self) -> None:
        session = self.session
        if session.subscribers > 0 or session.max_run_after_disconnect is None:
            return
        if session.timer is None:
            loop = asyncio.get_running_loop()
            session.timer = loop.call_later(session.max_run_after_disconnect, _expire, session)


def _expire(session: ExecSession) -> None:
    """Kill a session that outlived its last socket by ``max_run_after_disconnect`` (a
    session that ended meanwhile is not signalled: the box knows it no longer)."""
    session.timer = None
    threading.Thread(
        target=session.signal, args=(signal.SIGKILL,), name="sprites-emulator-expire", daemon=True
    ).start()


def _resize(session: ExecSession, rows: int, cols: int) -> None:
    with contextlib.suppress(OSError, EngineError):
        session.box.resize(session.sid, rows, cols)


async def _feed(session: ExecSession, data: bytes | None) -> None:
    """Write stdin (None: end of input) in order; ignored once stdin or the process ended."""
    if not session.stdin:
        return
    box, sid = session.box, session.sid
    async with session.stdin_lock:
        with contextlib.suppress(OSError, EngineError):
            if data is None:
                await run_blocking(lambda: box.close_stdin(sid))
            elif data:
                await run_blocking(lambda: box.write_stdin(sid, data, timeout=STDIN_TIMEOUT))


def _rejection(fault: Fault) -> web.Response:
    body = (
        fault.body
        if fault.body is not None
        else {"error": "unavailable", "message": "service unavailable"}
    )
    if isinstance(body, (dict, list)):
        return web.json_response(body, status=fault.status, headers=dict(fault.headers))
    return web.Response(text=str(body), status=fault.status, headers=dict(fault.headers))


def _run_after_disconnect(raw: str | None, tty: bool, detachable: bool) -> float | None:
    """Seconds the process may outlive its last socket; None forever; ValueError if bad."""
    if raw is None or raw == "":
        return None if tty or detachable else DEFAULT_DETACHED_RUN
    seconds = wire.duration(raw)
    if seconds is None:
        raise ValueError(raw)
    return None if seconds == 0 else seconds


async def _kill_parameters(request: web.Request) -> tuple[str, int, float] | web.Response:
    signame = request.query.get("signal")
    timeout_text = request.query.get("timeout")
    grace: float | None = 10.0
    raw = await request.read()
    if raw.strip():
        try:
            body = load_json(raw)
        except BadInput as error:
            return wire.invalid(str(error))
        if not isinstance(body, dict):
            return wire.invalid("the body must be a JSON object")
        signame = body.get("signal", signame)
        if body.get("timeout") is not None:
            timeout_text = str(body["timeout"])
    if timeout_text is not None:
        grace = wire.duration(timeout_text)
    signame = str(signame or "SIGTERM")
    signum = signal_number(signame)
    if signum is None or grace is None or grace < 0:
        return wire.invalid("bad signal or timeout")
    try:
        canonical = signal.Signals(signum).name
    except ValueError:
        canonical = signame
    return canonical, signum, grace


def _signal_awake(session: ExecSession, signum: int) -> None:
    """Signal the group, then continue it (a stopped process acts on the signal)."""
    session.signal(signum)
    if signum != signal.SIGKILL:
        session.signal(signal.SIGCONT)


async def _kill_stream(
    request: web.Request, session: ExecSession, signame: str, signum: int, grace: float
) -> web.StreamResponse:
    """Signal the session's group and report how it ended, watching its end (no polling)."""
    box, sid = session.box, session.sid
    try:
        watcher = await run_blocking(lambda: box.attach(sid, from_end=True))
    except (OSError, EngineError):
        watcher = None
    try:
        stream = await wire.NdjsonStream(request).open()
        pgid = session.pid or 0
        await run_blocking(lambda: _signal_awake(session, signum))
        await stream.line(
            {
                "type": "signal",
                "message": f"Signaling {signame} to process group {pgid}",
                "signal": signame,
                "pid": pgid,
            }
        )
        forced = signum == signal.SIGKILL
        end = None if watcher is None else await end_of(watcher, KILL_SETTLE if forced else grace)
        if end is None and not forced and watcher is not None:
            await stream.line(
                {"type": "timeout", "message": f"Timeout after {_format(grace)}, sending SIGKILL"}
            )
            await run_blocking(lambda: session.signal(signal.SIGKILL))
            forced = True
            end = await end_of(watcher, KILL_SETTLE)
        if end is None:
            await stream.line(
                {"type": "error", "message": "Warning: process may not have terminated"}
            )
            return await stream.finish()
        await stream.line(
            {"type": "killed", "message": "Process killed"}
            if forced
            else {"type": "exited", "message": "Process exited"}
        )
        await stream.line(
            {"type": "complete", "exit_code": end.code if isinstance(end, Exited) else 137}
        )
        return await stream.finish()
    finally:
        if watcher is not None:
            watcher.close()


def _format(seconds: float) -> str:
    return f"{seconds:g}s" if seconds >= 1 else f"{seconds * 1000:g}ms"
