"""The toolbox, proxy and daemon folded together: ``/toolbox/{sandboxId}/…``.

See docs/protocols/daytona.md#toolbox.

The proxy part resolves the sandbox by **id**, refuses a sandbox that is not
started (400 "… Is the Sandbox started?") and bumps its ``lastActivityAt``
unless ``X-Daytona-Skip-Last-Activity-Update: true``. The daemon part is
:class:`~.daemon.Daemon`; logs are rendered by :mod:`.logs`.

The file reads (bulk download, listing) are :mod:`.downloads`; the other file
operations (create a folder, delete, move, find, search, replace, permissions,
info) are :mod:`.fileops`. Every path a
request names (``path=`` of the file endpoints, an execute's
``cwd``) is a sandbox path — absolute, or relative to the sandbox user's home
— reached through the sandbox's :class:`~.files.SandboxFiles` as the
sandbox's user, never on the host. An upload that user may not write is
worded as the daemon words Go's ``EACCES``: the bulk upload's 400 lists
``<path>: create temp: open <dir>/.daytona-upload-<n>: permission denied``
(its temporary file in the destination's directory could not be made), a
single upload's 400 says ``open <path>: permission denied``
(docs/protocols/daytona.md#refused-by-file-permissions). Blocking work (the
box, the files) runs on a short-lived thread
(:func:`~managoat_sandbox.emulators._blocking.run_blocking`).

The routes reach the emulator only through :class:`ToolboxHost`, the part of
it they need (the emulator passes itself), so this module never imports the
emulator module, which imports it.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
from collections.abc import AsyncGenerator, Awaitable, Callable
from email.parser import BytesParser
from email.policy import HTTP
from functools import partial
from typing import Any, Protocol

import attrs
from aiohttp import WSMsgType, web

from managoat_sandbox._engine import safefs
from managoat_sandbox._engine.errors import EngineError

from .. import _cut
from .._blocking import run_blocking
from .._faults import Fault, Faults
from .._fs import go_text
from .._input import BadInput, load_json
from . import downloads, fileops
from .daemon import Command, Daemon, Session
from .logs import MarkerStripper, demux, follow_chunks, render_mode, strip
from .sandboxes import Sandbox, SandboxStore
from .shapes import DaemonError, daemon_error_response

__all__ = ["ToolboxHost", "ToolboxRoutes"]

#: The daemon takes an execute's ``timeout`` as a 32-bit unsigned number of seconds.
_MAX_EXECUTE_TIMEOUT = 2**32 - 1


class ToolboxHost(Protocol):
    """What the toolbox needs from the emulator that serves it.

    Every member is read when a request (or a follow's check) needs it, never
    cached, so that a setting changed on a running emulator is heard at once.
    """

    @property
    def store(self) -> SandboxStore:
        """The sandboxes' records (the proxy resolves and touches them)."""

    @property
    def faults(self) -> Faults:
        """The injected faults (``log_cut``, ``log_stale_prefix``, ``log_reset``,
        ``log_close_early``)."""

    @property
    def log_idle_close(self) -> float:
        """Seconds a log follow stays open after the exit code is recorded."""

    @property
    def follow_cuts(self) -> int:
        """Bumped when the open log follows are to end; a follow started before ends."""

    @property
    def follow_cut_mode(self) -> str:
        """How the last cut ended the follows: ``"close"`` or ``"reset"``."""

    def current_daemon(self, sandbox: Sandbox) -> Daemon | None:
        """The daemon of the sandbox's current run if it exists already (never blocks)."""

    def daemon_for(self, sandbox: Sandbox) -> Daemon:
        """The daemon of the sandbox's current run, started if need be; blocking."""


Handler = Callable[[web.Request, Daemon], Awaitable[web.StreamResponse]]


@attrs.define
class _Follow:
    """One log follow in progress: its frames, the fault (if any) that limits it, the
    cut generation it started in, and how many journal bytes it has sent."""

    chunks: AsyncGenerator[bytes, None]
    fault: Fault | None
    reset: bool
    generation: int
    sent: int = 0


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = load_json(await request.read() or b"null")
    except BadInput:
        raise DaemonError(400, "", bare=True) from None
    if not isinstance(body, dict):
        raise DaemonError(400, "", bare=True)
    return body


async def _form_parts(request: web.Request) -> list[tuple[str, bytes]]:
    """The (field name, bytes) parts of a multipart/form-data body, in order.

    Parsed from the whole body (the emulator base has already read it for the
    request log, so the stream reader cannot be used).
    """
    if not request.content_type.startswith("multipart/"):
        raise DaemonError(400, "", bare=True)
    head = f"Content-Type: {request.headers['Content-Type']}\r\n\r\n".encode()
    message = BytesParser(policy=HTTP).parsebytes(head + await request.read())
    if not message.is_multipart():
        raise DaemonError(400, "", bare=True)
    parts: list[tuple[str, bytes]] = []
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str) and isinstance(payload, bytes):
            parts.append((name, payload))
    return parts


def _refused_upload(dest: str, error: PermissionError) -> str:
    """The bulk upload's error line for destination ``dest`` the sandbox's user may not
    write: the daemon first makes a temporary file (a random decimal name) in the
    destination's directory, and that is what fails."""
    directory = posixpath.dirname(dest) or "."
    temporary = f"{directory.rstrip('/')}/.daytona-upload-{secrets.randbelow(2**32)}"
    return f"{dest}: create temp: open {temporary}: {go_text(error)}"


class ToolboxRoutes:
    """Handlers for ``/toolbox/{sandboxId}``."""

    def __init__(self, emulator: ToolboxHost) -> None:
        self.emulator = emulator

    def register(self, app: web.Application) -> None:
        """Add the toolbox routes."""
        session = "/process/session/{sessionId}"
        command = session + "/command/{commandId}"
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/process/execute", self.execute),
            ("POST", "/process/session", self.create_session),
            ("GET", "/process/session", self.list_sessions),
            ("GET", session, self.get_session),
            ("DELETE", session, self.delete_session),
            ("POST", session + "/exec", self.session_exec),
            ("GET", command, self.get_command),
            ("POST", command + "/input", self.send_input),
            ("GET", command + "/logs", self.logs),
            ("POST", "/files/upload", self.upload),
            ("POST", "/files/upload-v2", self.upload_v2),
            ("POST", "/files/bulk-upload", self.bulk_upload),
            ("GET", "/files/download", self.download),
            ("POST", "/files/bulk-download", downloads.bulk_download),
            ("GET", "/files", downloads.list_files),
            *fileops.ROUTES,
            ("GET", "/version", self.version),
            ("GET", "/user-home-dir", self.home_dir),
            ("GET", "/work-dir", self.home_dir),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, "/toolbox/{sandboxId}" + path, self._proxied(handler))

    def _proxied(self, handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def proxied(request: web.Request) -> web.StreamResponse:
            try:
                sandbox = self.emulator.store.by_id(request.match_info["sandboxId"])
                if sandbox is None:
                    raise DaemonError(404, "sandbox not found")
                if sandbox.state != "started":
                    raise DaemonError(400, "no IP address found. Is the Sandbox started?")
                if request.headers.get("X-Daytona-Skip-Last-Activity-Update") != "true":
                    self.emulator.store.touch(sandbox.id)
                daemon = self.emulator.current_daemon(sandbox)
                if daemon is None:
                    try:
                        daemon = await run_blocking(lambda: self.emulator.daemon_for(sandbox))
                    except (EngineError, OSError) as error:
                        raise DaemonError(500, f"the sandbox cannot run: {error}") from None
                return await handler(request, daemon)
            except DaemonError as error:
                return daemon_error_response(request, error)

        return proxied

    # -- one-shot execute ---------------------------------------------------------

    async def execute(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST /process/execute`` → ``{exitCode, result}`` (merged output); 408 on timeout."""
        body = await _json_body(request)
        script = body.get("command")
        if not isinstance(script, str) or not script.strip():
            raise DaemonError(400, "command is required")
        envs = body.get("envs") or {}
        timeout = body.get("timeout")
        if not isinstance(envs, dict) or not all(isinstance(v, str) for v in envs.values()):
            raise DaemonError(400, "invalid body request: envs must be an object of strings")
        cwd = body.get("cwd") if isinstance(body.get("cwd"), str) else None
        try:
            shot = await run_blocking(
                lambda: daemon.start_execute(script, cwd=cwd, envs=dict(envs)),
                discard=lambda started: started.close(),
            )
        except OSError as error:
            return web.json_response({"exitCode": -1, "result": str(error)})
        if isinstance(timeout, int) and timeout > _MAX_EXECUTE_TIMEOUT:
            raise DaemonError(400, "invalid body request: timeout is not a uint32")
        limit = timeout if isinstance(timeout, int) and timeout > 0 else None
        try:
            code, text = await run_blocking(lambda: shot.collect(limit))
        except asyncio.CancelledError:
            shot.close()
            raise
        return web.json_response({"exitCode": -1 if code is None else code, "result": text})

    # -- sessions -------------------------------------------------------------------

    async def create_session(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST /process/session {"sessionId"}`` → 201, empty body."""
        session_id = (await _json_body(request)).get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise DaemonError(400, "invalid body request: sessionId is required")
        await run_blocking(lambda: daemon.create_session(session_id))
        return web.Response(status=201)

    async def list_sessions(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET /process/session`` → a bare JSON list."""
        return web.json_response([s.to_json() for s in daemon.sessions()])

    async def get_session(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET /process/session/{id}``."""
        return web.json_response(daemon.session(request.match_info["sessionId"]).to_json())

    async def delete_session(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``DELETE /process/session/{id}`` → 204 once the shell's group is dead."""
        session_id = request.match_info["sessionId"]
        await run_blocking(lambda: daemon.delete_session(session_id))
        return web.Response(status=204)

    async def session_exec(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST …/exec``: 202 + ``cmdId`` when async; 200 with output and exit code when
        sync (once the command has ended; see :meth:`.Daemon.execute`)."""
        body = await _json_body(request)
        script = body.get("command")
        if not isinstance(script, str) or not script.strip():
            raise DaemonError(400, "", bare=True)
        run_async = bool(body.get("runAsync") or body.get("async"))
        session_id = request.match_info["sessionId"]
        command = await run_blocking(
            lambda: daemon.execute(
                session_id,
                script,
                run_async=run_async,
                suppress_input_echo=bool(body.get("suppressInputEcho")),
            )
        )
        if run_async:
            return web.json_response(
                {
                    "cmdId": command.id,
                    "output": None,
                    "stdout": None,
                    "stderr": None,
                    "exitCode": None,
                },
                status=202,
            )
        journal = command.journal()
        answer: dict[str, Any] = {"cmdId": command.id, "exitCode": command.exit_code}
        mode = render_mode(request.headers)
        answer["output"] = (strip(journal) if mode == "combined" else journal).decode(
            "utf-8", "replace"
        )
        if mode == "json":
            stdout, stderr = demux(journal)
            answer["stdout"] = stdout.decode("utf-8", "replace")
            answer["stderr"] = stderr.decode("utf-8", "replace")
        return web.json_response(answer)

    async def get_command(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET …/command/{id}`` → ``{id, command, exitCode?}``."""
        _, command = daemon.command(
            request.match_info["sessionId"], request.match_info["commandId"]
        )
        return web.json_response(command.to_json())

    async def send_input(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST …/input {"data"}`` → 204; 410 once the command has finished."""
        data = (await _json_body(request)).get("data")
        if not isinstance(data, str):
            raise DaemonError(400, "invalid body request: data is required")
        session_id, command_id = request.match_info["sessionId"], request.match_info["commandId"]
        await run_blocking(lambda: daemon.send_input(session_id, command_id, data))
        return web.Response(status=204)

    # -- logs -------------------------------------------------------------------------

    async def logs(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET …/logs``: the snapshot, the WebSocket follow, or the chunked follow."""
        session, command = daemon.command(
            request.match_info["sessionId"], request.match_info["commandId"]
        )
        if not command.files.exists_own(command.log_path):
            raise DaemonError(404, "log file not found")
        follow = request.query.get("follow") == "true"
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await self._websocket(request, session, command, follow=follow)
        if follow:
            return await self._chunked(request, session, command)
        cut = self.emulator.faults.take("log_cut", request.method, request.path)
        if cut is not None:
            return await self._cut_snapshot(request, command, cut)
        return self._snapshot(request, command)

    def _snapshot(self, request: web.Request, command: Command) -> web.StreamResponse:
        journal = command.journal()
        stale = self.emulator.faults.take("log_stale_prefix", request.method, request.path)
        if stale is not None:
            journal = journal[: stale.size]
        mode = render_mode(request.headers)
        if mode == "json":
            stdout, stderr = demux(journal)
            return web.json_response(
                {
                    "output": journal.decode("utf-8", "replace"),
                    "stdout": stdout.decode("utf-8", "replace"),
                    "stderr": stderr.decode("utf-8", "replace"),
                }
            )
        body = journal if mode == "raw" else strip(journal)
        return web.Response(body=body, content_type="text/plain", charset="utf-8")

    async def _cut_snapshot(
        self, request: web.Request, command: Command, fault: Fault
    ) -> web.StreamResponse:
        """A raw snapshot whose ``Content-Length`` is the whole journal, cut after
        ``fault.size`` bytes (at least one byte short) by a reset or a close."""
        journal = command.journal()
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/plain; charset=utf-8"}
        )
        response.content_length = len(journal) + 1
        await response.prepare(request)
        await response.write(journal[: fault.size])
        cut = _cut.reset if fault.body == "reset" else _cut.close
        cut(request.transport)
        return response

    def _follow(
        self, request: web.Request, session: Session, command: Command, *, follow: bool
    ) -> _Follow:
        """The journal follow for this request, with the faults that end it early."""
        generation = self.emulator.follow_cuts
        faults = self.emulator.faults
        reset = faults.take("log_reset", request.method, request.path)
        early = (
            None
            if reset is not None
            else faults.take("log_close_early", request.method, request.path)
        )
        fault = reset or early
        chunks = follow_chunks(
            command.open_journal,
            follow=follow,
            exited=lambda: command.read_exit_code() is not None,
            gone=session.deleted.is_set,
            idle_close=self.emulator.log_idle_close,
            limit=None if fault is None else fault.size,
            cut=lambda: self.emulator.follow_cuts != generation,
        )
        return _Follow(chunks, fault, reset=reset is not None, generation=generation)

    def _ends_with_reset(self, follow: _Follow) -> bool:
        """Whether the follow that just ended must end with a TCP reset."""
        if self.emulator.follow_cuts != follow.generation:
            return self.emulator.follow_cut_mode == "reset"
        return follow.reset and follow.fault is not None and follow.sent >= follow.fault.size

    async def _websocket(
        self, request: web.Request, session: Session, command: Command, *, follow: bool
    ) -> web.StreamResponse:
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        ws = web.WebSocketResponse(
            protocols=[p for p in offered if p.startswith("X-Daytona-SDK-Version~")], autoping=True
        )
        await ws.prepare(request)
        mode = render_mode(request.headers)
        stripper = MarkerStripper() if mode == "combined" else None
        reader = asyncio.ensure_future(self._drain_client(ws))
        code = 1000
        followed = self._follow(request, session, command, follow=follow)
        try:
            async with contextlib.aclosing(followed.chunks) as chunks:
                async for chunk in chunks:
                    if reader.done():
                        break
                    followed.sent += len(chunk)
                    data = stripper.feed(chunk) if stripper else chunk
                    if data:
                        await ws.send_bytes(data)
            if stripper and (rest := stripper.flush()):
                await ws.send_bytes(rest)
        except (OSError, DaemonError):
            code = 1011
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
        if code == 1000 and self._ends_with_reset(followed):
            _cut.reset(request.transport)
            return ws
        with contextlib.suppress(ConnectionResetError, RuntimeError):
            await ws.close(code=code)
        return ws

    @staticmethod
    async def _drain_client(ws: web.WebSocketResponse) -> None:
        """Read client frames (answering pings) until the client closes."""
        while True:
            message = await ws.receive()
            if message.type in (
                WSMsgType.CLOSE,
                WSMsgType.CLOSING,
                WSMsgType.CLOSED,
                WSMsgType.ERROR,
            ):
                return

    async def _chunked(
        self, request: web.Request, session: Session, command: Command
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        stripper = MarkerStripper()
        followed = self._follow(request, session, command, follow=True)
        try:
            async with contextlib.aclosing(followed.chunks) as chunks:
                async for chunk in chunks:
                    followed.sent += len(chunk)
                    if data := stripper.feed(chunk):
                        await response.write(data)
        except (OSError, DaemonError):
            # The runner aborts the stream when the daemon's follow fails.
            _cut.close(request.transport)
            return response
        if self._ends_with_reset(followed):
            _cut.reset(request.transport)
            return response
        if rest := stripper.flush():
            await response.write(rest)
        await response.write_eof()
        return response

    # -- files ------------------------------------------------------------------------

    @staticmethod
    def _save(daemon: Daemon, path: str, data: bytes) -> str:
        """Write ``data`` at sandbox path ``path`` (parents made) as the sandbox's user;
        its absolute path.

        400 if the path cannot hold a file (a directory, a read-only system path…);
        PermissionError where that user may not write, which each upload route
        words as the daemon does.
        """
        try:
            return daemon.files.write(path, data)
        except PermissionError:
            raise
        except (OSError, safefs.PathRefused, BadInput) as error:
            raise DaemonError(400, f"failed to save file {path}: {error}") from None

    async def _single_upload(self, request: web.Request, daemon: Daemon) -> str:
        path = request.query.get("path")
        if not path or not request.content_type.startswith("multipart/"):
            raise DaemonError(400, "", bare=True)
        data = next((d for name, d in await _form_parts(request) if name == "file"), None)
        if data is None:
            raise DaemonError(400, "", bare=True)
        payload = data
        try:
            return await run_blocking(lambda: self._save(daemon, path, payload))
        except PermissionError as error:
            raise DaemonError(400, f"open {path}: {go_text(error)}") from None

    async def upload(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST /files/upload?path=`` (field ``file``) → 200, empty body."""
        await self._single_upload(request, daemon)
        return web.Response(status=200)

    async def upload_v2(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST /files/upload-v2?path=`` (field ``file``) → ``{name, path, type}``
        (docs/protocols/daytona.md#files)."""
        target = await self._single_upload(request, daemon)
        return web.json_response(
            {"name": target.rsplit("/", 1)[-1], "path": target, "type": "file"}
        )

    async def bulk_upload(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``POST /files/bulk-upload``: ``files[i].path`` before ``files[i].file`` parts."""
        paths: dict[str, str] = {}
        saved: list[dict[str, Any]] = []
        errors: list[str] = []
        for name, data in await _form_parts(request):
            index, _, field = name.rpartition(".")
            if field == "path":
                try:
                    paths[index] = data.decode()
                except UnicodeDecodeError:
                    errors.append(f"{name}: the path is not UTF-8 text")
            elif field == "file":
                if index not in paths:
                    errors.append(f"{name}: no path given before the file")
                    continue
                try:
                    target = await run_blocking(partial(self._save, daemon, paths[index], data))
                except PermissionError as error:
                    errors.append(_refused_upload(paths[index], error))
                    continue
                except DaemonError as error:
                    errors.append(f"{name}: {error.message}")
                    continue
                saved.append({"path": target, "bytes": len(data)})
        if errors:
            return web.json_response({"errors": errors, "files": saved}, status=400)
        return web.json_response({"files": saved})

    async def download(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET /files/download?path=`` → the file's bytes."""
        path = request.query.get("path")
        if not path:
            raise DaemonError(400, "", bare=True)
        try:
            body = await run_blocking(lambda: daemon.files.read(path))
        except FileNotFoundError:
            raise DaemonError(404, f"file not found: {path}") from None
        except (OSError, safefs.PathRefused) as error:
            raise DaemonError(400, f"cannot download {path}: {error}") from None
        return web.Response(body=body, content_type="application/octet-stream")

    async def version(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET /version``."""
        return web.json_response({"version": "v0.190.0"})

    async def home_dir(self, request: web.Request, daemon: Daemon) -> web.StreamResponse:
        """``GET /user-home-dir`` and ``/work-dir``: the sandbox user's home (a sandbox path)."""
        return web.json_response({"dir": daemon.home})
