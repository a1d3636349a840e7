"""The Sprites emulator: the provider side of the Sprites API on 127.0.0.1."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from aiohttp import web

from .._server import DEFAULT_IDLE_TIMEOUT, Emulator, Fault
from . import wire
from .behaviour import Behaviour
from .exec_ws import Exec
from .files import Files
from .rest import Rest
from .state import VERSION, State, abort_connections, dispose

KILL_PATH = r"/exec/[^/]+/kill$"
CHECKPOINT_PATH = r"/checkpoint$"
RESTORE_PATH = r"/restore$"
EXEC_PATH = r"/exec(/[^/]+)?$"
LIST_PATH = r"^/v1/sprites$"
MALFORMED = ('{"type":"signal","signal":"SIGTERM"', "not json at all")
TORN = (
    '{"type":"signal","message":"Signaling SIGTERM to process group 1","signal":"SIGTERM","pid":1}',
    '{"type":"exited","mess',
)
STREAM_PATHS = {"kill": KILL_PATH, "checkpoint": CHECKPOINT_PATH, "restore": RESTORE_PATH}


class SpritesEmulator(Emulator):
    """A protocol-faithful Sprites server (docs/protocols/sprites.md).

    Routes live under ``/v1`` and need ``Authorization: Bearer <token>`` (a
    wrong or missing token gets 401 ``{"error":"unauthorized",…}``). Every
    answer carries ``Sprite-Version``. Each sprite is one process-engine box
    under :attr:`workdir` (see :mod:`.state`): its commands are real processes
    (bash and friends) inside it, isolated in their own namespaces when the
    host allows, seeing the sprite's files at ``/`` and only the sprite's
    processes; the filesystem endpoints and ``dir`` name the same paths they
    do. Commands run as ``sprite`` with ``HOME=/home/sprite``, in ``/`` unless
    ``dir`` says otherwise. Network policies are validated, stored and — where
    they are allow-lists — enforced by the box's egress filter (:mod:`.network`).

    Python-side control (thread-safe; tests call these directly):

    * :attr:`behaviour` — switches between documented variants (see
      :class:`~.behaviour.Behaviour`: 409 vs 400 on conflict, page size,
      booting refusals, in-band vs 404 restore failures, …);
    * :meth:`set_status` / :meth:`status_of` — ``running``/``warm``/``cold``,
      deterministic; :meth:`remove_url` — a sprite whose objects lack ``url``;
      :meth:`sprite_root` — the host directory that is a sprite's ``/``.

    Fault injection (each queued for ``times`` matching requests, then gone;
    ``path`` is a pattern searched in the request path, see :mod:`.._pattern`):

    * :meth:`rate_limit` — 429 with ``Retry-After`` and/or ``retry_after_seconds``;
    * :meth:`fail` — any status (a 5xx, 401, a 302 …) with a JSON or text body;
    * :meth:`refuse_fresh_execs` — a newly created sprite answers its first N
      exec upgrades with 503 (count-based boot window);
    * :meth:`refuse_upgrade` — a WebSocket upgrade (exec or attach) refused with a status;
    * :meth:`drop_exec` — the socket goes after N output frames, before the exit
      frame: a TCP abort, a TCP reset, or a normal 1000 close without the exit;
    * :meth:`exit_frame` — a different exit message (``03`` alone, trailing bytes, text);
    * :meth:`endless_listing` — the listing always says ``has_more`` with a fresh token;
      :meth:`truncate` — a body whose Content-Length exceeds what is sent;
    * :meth:`stall` — the request waits ``seconds`` before it is handled;
    * :meth:`script_ndjson` / :meth:`malformed_ndjson` / :meth:`truncate_ndjson` — a
      kill, checkpoint or restore stream replaced by the given lines, or cut inside
      one (nothing is done);
    * :meth:`oversize` — an oversized body instead of the answer;
    * :meth:`drop_connection` — the TCP connection closed without an answer.

    The base's generic faults (``self.faults.add(...)``), request log
    (:attr:`requests`) and HTTP control API remain available.
    """

    provider: ClassVar[str] = "sprites"
    credential_env: ClassVar[str] = "SPRITES_TOKEN"

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credential: str | None = None,
        workdir: str | Path | None = None,
        log_bodies: bool = False,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        super().__init__(
            host=host,
            port=port,
            credential=credential,
            workdir=workdir,
            log_bodies=log_bodies,
            idle_timeout=idle_timeout,
        )
        self.behaviour = Behaviour()
        self.state = State(self.workdir)
        self._rest = Rest(self.state, self.faults, self.behaviour)
        self._files = Files(self.state)
        self._exec = Exec(self.state, self.faults, self.behaviour)

    # -- the base's hooks ---------------------------------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        """The ``/v1`` routes, ``Sprite-Version`` on every answer, JSON 404 elsewhere."""
        app.on_response_prepare.append(_version_header)
        self._rest.add_routes(app)
        self._files.add_routes(app)
        self._exec.add_routes(app)
        app.router.add_route("*", "/{tail:.*}", _unknown_route)

    def unauthorized(self, request: web.Request) -> web.StreamResponse:
        """Sprites' 401."""
        return wire.error(401, "unauthorized", "missing or invalid bearer token")

    def bad_request(self, request: web.Request, message: str) -> web.StreamResponse:
        """Sprites' 400."""
        return wire.invalid(message)

    def close(self) -> None:
        """Forget every sprite: abort open sockets, stop each box (every command ends)
        and delete its directory (what cannot be deleted is left behind); idempotent."""
        sprites = self.state.remove_all()
        for sprite in sprites:
            abort_connections(sprite)
        for sprite in sprites:
            with contextlib.suppress(OSError):
                dispose(sprite)

    # -- state control ------------------------------------------------------------------------

    def set_status(self, name: str, status: str) -> None:
        """Force ``running``, ``warm`` (every process frozen until the next exec or attach)
        or ``cold`` (every process killed, files kept). KeyError for an unknown sprite."""
        self.state.set_status(name, status)

    def status_of(self, name: str) -> str:
        """The sprite's status as ``GET`` reports it; KeyError if unknown."""
        sprite = self.state.get(name)
        if sprite is None:
            raise KeyError(name)
        return sprite.status()

    def remove_url(self, name: str) -> None:
        """Leave ``url`` out of the sprite's objects from now on."""
        sprite = self.state.get(name)
        if sprite is None:
            raise KeyError(name)
        sprite.has_url = False

    def sprite_root(self, name: str) -> Path:
        """The host directory that is the sprite's ``/`` (for tests; the sprite's
        commands write there, so never follow what they leave in it)."""
        sprite = self.state.get(name)
        if sprite is None:
            raise KeyError(name)
        return sprite.root

    # -- faults ---------------------------------------------------------------------------------

    def rate_limit(
        self,
        *,
        retry_after: int = 17,
        header: bool = True,
        in_body: bool = True,
        method: str | None = None,
        path: str | None = None,
        times: int = 1,
    ) -> Fault:
        """429 ``{"error":"sprite_creation_rate_limited",…}``, the delay in the
        ``Retry-After`` header and/or the body's ``retry_after_seconds``."""
        body: dict[str, Any] = {
            "error": "sprite_creation_rate_limited",
            "message": "rate limit exceeded",
            "limit": 10,
            "window_seconds": 60,
        }
        headers = {
            "X-RateLimit-Limit": "10",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset": str(int(time.time()) + retry_after),
        }
        if in_body:
            body["retry_after_seconds"] = retry_after
        if header:
            headers["Retry-After"] = str(retry_after)
        return self.faults.add(
            "status", method=method, path=path, times=times, status=429, headers=headers, body=body
        )

    def fail(
        self,
        status: int = 500,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        method: str | None = None,
        path: str | None = None,
        times: int = 1,
    ) -> Fault:
        """Answer ``status`` (default body ``{"error": "internal_error", …}``)."""
        if body is None:
            body = {
                "error": "internal_error" if status >= 500 else "error",
                "message": f"injected {status}",
            }
        return self.faults.add(
            "status",
            method=method,
            path=path,
            times=times,
            status=status,
            headers=dict(headers or {}),
            body=body,
        )

    def refuse_fresh_execs(self, count: int, *, sprite: str | None = None) -> None:
        """Sprites created from now on (or the named one) refuse their first ``count``
        exec upgrades with 503, as a booting sprite does."""
        if sprite is None:
            self.behaviour.boot_refusals = count
            return
        found = self.state.get(sprite)
        if found is None:
            raise KeyError(sprite)
        found.boot_refusals = count

    def refuse_upgrade(
        self,
        status: int = 503,
        *,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        path: str = EXEC_PATH,
        times: int = 1,
    ) -> Fault:
        """Refuse matching exec/attach WebSocket upgrades with ``status``."""
        return self.faults.add(
            "ws_reject",
            method="GET",
            path=path,
            times=times,
            status=status,
            headers=dict(headers or {}),
            body=body,
        )

    def drop_exec(
        self,
        after_frames: int = 1,
        *,
        close_frame: bool = False,
        reset: bool = False,
        path: str = EXEC_PATH,
        times: int = 1,
    ) -> Fault:
        """End matching exec/attach sockets after ``after_frames`` output frames, before
        the exit frame: a TCP abort, a TCP reset (``reset``: RST, the client's read
        fails with ECONNRESET) or (``close_frame``) a normal 1000 close. The process
        keeps running."""
        kind = "close" if close_frame else "reset" if reset else "abort"
        return self.faults.add(
            "ws_drop", method="GET", path=path, times=times, size=after_frames, body=kind
        )

    def exit_frame(self, payload: bytes | str, *, path: str = EXEC_PATH, times: int = 1) -> Fault:
        """Send ``payload`` instead of the exit frame of matching sockets: bytes as a binary
        message (``b"\\x03"`` alone, ``b"\\x03\\x2a\\x00\\x00\\x00"`` …), a str as text."""
        return self.faults.add("ws_exit", method="GET", path=path, times=times, body=payload)

    def endless_listing(self, *, times: int = 1000) -> Fault:
        """``GET /v1/sprites`` always answers ``has_more`` with a fresh token."""
        return self.faults.add("listing", method="GET", path=LIST_PATH, times=times)

    def truncate(
        self, *, method: str | None = None, path: str | None = LIST_PATH, times: int = 1
    ) -> Fault:
        """A 200 whose Content-Length promises more than is sent before the close."""
        return self.faults.add("truncate", method=method, path=path, times=times, status=200)

    def stall(
        self, seconds: float, *, method: str | None = None, path: str | None = None, times: int = 1
    ) -> Fault:
        """Hold matching requests for ``seconds`` before handling them."""
        return self.faults.add("stall", method=method, path=path, times=times, seconds=seconds)

    def oversize(
        self, size: int, *, method: str | None = None, path: str | None = None, times: int = 1
    ) -> Fault:
        """Answer matching requests with ``size`` bytes instead."""
        return self.faults.add("oversize", method=method, path=path, times=times, size=size)

    def drop_connection(
        self, *, method: str | None = None, path: str | None = None, times: int = 1
    ) -> Fault:
        """Close the TCP connection without answering."""
        return self.faults.add("drop", method=method, path=path, times=times)

    def script_ndjson(
        self, lines: Sequence[Any], *, path: str, times: int = 1, cut: bool = False
    ) -> Fault:
        """Answer a matching kill/checkpoint/restore POST with exactly ``lines`` (objects,
        or raw strings sent as they are) instead of doing anything. ``cut``: the last
        line loses its newline and the connection closes before the chunked body
        ends (a stream truncated inside a line)."""
        return self.faults.add(
            "ndjson", method="POST", path=path, times=times, body=list(lines), size=1 if cut else 0
        )

    def truncate_ndjson(
        self, stream: str = "kill", lines: Sequence[Any] | None = None, *, times: int = 1
    ) -> Fault:
        """A ``kill``, ``checkpoint`` or ``restore`` stream cut inside a line (default: the
        ``signal`` event, then half of an ``exited`` event, then the connection closes)."""
        return self.script_ndjson(
            TORN if lines is None else lines, path=STREAM_PATHS[stream], times=times, cut=True
        )

    def malformed_ndjson(
        self, stream: str = "kill", lines: Sequence[Any] | None = None, *, times: int = 1
    ) -> Fault:
        """A malformed ``kill``, ``checkpoint`` or ``restore`` stream (default: a torn
        JSON line and a non-JSON line, no ``complete``)."""
        return self.script_ndjson(
            MALFORMED if lines is None else lines, path=STREAM_PATHS[stream], times=times
        )


async def _version_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Sprite-Version"] = VERSION


async def _unknown_route(request: web.Request) -> web.StreamResponse:
    return wire.not_found("route")
