"""The control plane (``https://api.e2b.app``): sandbox lifecycle and listings.

Routes (docs/protocols/e2b.md#control-plane-endpoints): ``POST /v2/sandboxes`` and the
deprecated ``POST /sandboxes``, ``GET /sandboxes/{id}``, ``DELETE
/sandboxes/{id}``, ``GET /v2/sandboxes`` (and v1 ``GET /sandboxes``),
``POST /sandboxes/{id}/timeout``, ``/refreshes``, ``/pause``, ``/connect``,
``/resume``, ``POST /v2/sandboxes/{id}/connect`` and ``PUT
/sandboxes/{id}/network``. Every error is ``{"code": status, "message": ...}``.

Listing faults taken here (``emulator.faults.add(kind, path=..., times=...)``):
``list_page_size`` (``size`` items per page), ``list_endless`` (the page
always carries a fresh ``X-Next-Token``), ``list_empty_token`` (an empty
``X-Next-Token`` header), ``list_not_array`` (a 200 whose body is an object).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from .._blocking import run_blocking
from .._input import BadInput, load_json
from .._server import Faults
from .state import MAX_TIMEOUT_S, ApiError, SandboxRecord, validate_network
from .world import World

__all__ = ["ControlPlane", "api_error"]

Route = Callable[[web.Request, str], Awaitable[web.StreamResponse]]
_ID = r"(?P<id>[^/]+)"


def api_error(status: int, message: str) -> web.Response:
    """The API's error answer."""
    return web.json_response({"code": status, "message": message}, status=status)


async def _json_body(request: web.Request, *, required: bool) -> Any:
    raw = await request.read()
    if not raw.strip():
        if required:
            raise ApiError(400, "request body is required")
        return {}
    try:
        return load_json(raw)
    except BadInput as error:
        raise ApiError(400, f"request body: {error}") from None


def _timeout_field(body: Any, *, required: bool) -> int | None:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    value = body.get("timeout")
    if value is None:
        if required:
            raise ApiError(400, "timeout is required")
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(400, "timeout must be an integer number of seconds")
    if value > MAX_TIMEOUT_S:
        raise ApiError(400, "Max instance length exceeded")
    return value


class ControlPlane:
    """Serves the control-plane routes from a :class:`World`."""

    def __init__(self, world: World, faults: Faults, domain: str | None) -> None:
        self.world = world
        self.faults = faults
        self.domain = domain
        self._endless_pages = 0
        self._routes: list[tuple[str, re.Pattern[str], Route]] = [
            ("POST", re.compile(r"^/v2/sandboxes$"), self._create_v2),
            ("POST", re.compile(r"^/sandboxes$"), self._create_v1),
            ("GET", re.compile(r"^/v2/sandboxes$"), self._list_v2),
            ("GET", re.compile(r"^/sandboxes$"), self._list_v1),
            ("GET", re.compile(rf"^/sandboxes/{_ID}$"), self._detail),
            ("DELETE", re.compile(rf"^/sandboxes/{_ID}$"), self._kill),
            ("POST", re.compile(rf"^/sandboxes/{_ID}/timeout$"), self._timeout),
            ("POST", re.compile(rf"^/sandboxes/{_ID}/refreshes$"), self._refresh),
            ("POST", re.compile(rf"^/sandboxes/{_ID}/pause$"), self._pause),
            ("POST", re.compile(rf"^/sandboxes/{_ID}/connect$"), self._connect_v1),
            ("POST", re.compile(rf"^/v2/sandboxes/{_ID}/connect$"), self._connect_v2),
            ("POST", re.compile(rf"^/sandboxes/{_ID}/resume$"), self._resume),
            ("PUT", re.compile(rf"^/sandboxes/{_ID}/network$"), self._network),
            ("GET", re.compile(r"^/health$"), self._health),
        ]

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """Route one control-plane request."""
        allowed = False
        for method, pattern, route in self._routes:
            match = pattern.match(request.path)
            if match is None:
                continue
            allowed = True
            if method != request.method:
                continue
            try:
                return await route(request, match.groupdict().get("id") or "")
            except ApiError as error:
                return api_error(error.status, error.message)
        if allowed:
            return api_error(405, "Method Not Allowed")
        return api_error(404, "Not Found")

    # -- lifecycle --------------------------------------------------------------------

    async def _create(self, request: web.Request, default_timeout: int) -> web.Response:
        body = await _json_body(request, required=True)
        record = await run_blocking(
            lambda: self.world.create(body, default_timeout=default_timeout)
        )
        return web.json_response(record.created(self.domain), status=201)

    async def _create_v2(self, request: web.Request, _: str) -> web.StreamResponse:
        return await self._create(request, 300)

    async def _create_v1(self, request: web.Request, _: str) -> web.StreamResponse:
        return await self._create(request, 15)

    async def _detail(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        record = self.world.registry.get(sandbox_id)
        return web.json_response(record.detail(self.domain))

    async def _kill(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        self.world.registry.get(sandbox_id)
        try:
            await run_blocking(lambda: self.world.kill(sandbox_id))
        except KeyError:
            raise ApiError(404, f'sandbox "{sandbox_id}" not found') from None
        return web.Response(status=204)

    async def _timeout(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=True)
        seconds = _timeout_field(body, required=True)
        record = self._running(sandbox_id)
        with self.world.registry.lock:
            record.end_at = self.world.clock.now() + max(seconds or 0, 0)
        return web.Response(status=204)

    async def _refresh(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=False)
        duration = body.get("duration", 0) if isinstance(body, dict) else None
        if (
            isinstance(duration, bool)
            or not isinstance(duration, int)
            or not (0 <= duration <= 3600)
        ):
            raise ApiError(400, "duration must be an integer between 0 and 3600")
        record = self._running(sandbox_id)
        with self.world.registry.lock:
            record.end_at = max(record.end_at, self.world.clock.now() + duration)
        return web.Response(status=204)

    async def _pause(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        await _json_body(request, required=False)
        record = self.world.registry.get(sandbox_id)
        await run_blocking(lambda: self.world.pause(record))
        return web.Response(status=204)

    async def _connect(self, record: SandboxRecord, timeout: int | None) -> web.Response:
        if record.state == "paused":
            await run_blocking(lambda: self.world.resume(record, timeout))
            return web.json_response(record.created(self.domain), status=201)
        if timeout is not None:
            with self.world.registry.lock:
                record.end_at = max(record.end_at, self.world.clock.now() + timeout)
        return web.json_response(record.created(self.domain), status=200)

    async def _connect_v1(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=True)
        timeout = _timeout_field(body, required=True)
        return await self._connect(self.world.registry.get(sandbox_id), timeout)

    async def _connect_v2(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=False)
        timeout = _timeout_field(body, required=False)
        return await self._connect(self.world.registry.get(sandbox_id), timeout)

    async def _resume(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=False)
        timeout = _timeout_field(body, required=False)
        record = self.world.registry.get(sandbox_id)
        if record.state != "paused":
            raise ApiError(409, f"sandbox {sandbox_id} is already running")
        if isinstance(body.get("autoPause"), bool):
            record.auto_pause = body["autoPause"]
        await run_blocking(lambda: self.world.resume(record, timeout))
        return web.json_response(record.created(self.domain), status=201)

    async def _network(self, request: web.Request, sandbox_id: str) -> web.StreamResponse:
        body = await _json_body(request, required=True)
        network = validate_network(body)
        record = self.world.registry.get(sandbox_id)
        internet = body.get("allow_internet_access") is not False
        await run_blocking(lambda: self.world.network(record, network, internet))
        return web.Response(status=204)

    async def _health(self, request: web.Request, _: str) -> web.StreamResponse:
        return web.json_response({"message": "Health check successful"})

    def _running(self, sandbox_id: str) -> SandboxRecord:
        record = self.world.registry.find(sandbox_id)
        if record is None or record.state != "running":
            raise ApiError(404, f'sandbox "{sandbox_id}" not found')
        return record

    # -- listings ----------------------------------------------------------------------

    async def _list_v2(self, request: web.Request, _: str) -> web.StreamResponse:
        method, path = request.method, request.path
        if self.faults.take("list_not_array", method, path) is not None:
            return web.json_response({"sandboxes": []})
        query = dict(request.query)
        sized = self.faults.take("list_page_size", method, path)
        endless = self.faults.take("list_endless", method, path)
        if endless is not None:
            query.pop("nextToken", None)
        listing = self.world.registry.list_v2(
            query, page_size=max(sized.size, 1) if sized is not None else None
        )
        headers: dict[str, str] = {}
        if listing.total_running is not None:
            headers["X-Total-Running"] = str(listing.total_running)
        if endless is not None:
            self._endless_pages += 1
            headers["X-Next-Token"] = f"endless-{self._endless_pages}"
        elif self.faults.take("list_empty_token", method, path) is not None:
            headers["X-Next-Token"] = ""
        elif listing.next_token is not None:
            headers["X-Next-Token"] = listing.next_token
        return web.json_response(listing.items, headers=headers)

    async def _list_v1(self, request: web.Request, _: str) -> web.StreamResponse:
        return web.json_response(self.world.registry.list_v1(dict(request.query)))
