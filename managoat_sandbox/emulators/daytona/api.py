"""The control plane: ``/api/sandbox…`` routes (docs/protocols/daytona.md#control-plane).

The routes reach the emulator only through :class:`ApiHost`, the part of it
they need (the emulator passes itself), so this module never imports the
emulator module, which imports it.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from aiohttp import web

from .._blocking import run_blocking
from .._faults import Faults
from .._input import BadInput, load_json, parse_int
from .sandboxes import ListQuery, Sandbox, SandboxStore
from .shapes import ApiError, api_error_response

__all__ = ["ApiHost", "ApiRoutes"]

#: The API keeps intervals as 32-bit integers.
_INT32 = 2**31 - 1


class ApiHost(Protocol):
    """What the control plane needs from the emulator that serves it.

    Every member is read when a request is handled, never cached, so that a
    test changing a setting on a running emulator is heard by the next request.
    """

    @property
    def store(self) -> SandboxStore:
        """The sandboxes' records."""

    @property
    def faults(self) -> Faults:
        """The injected faults (``hold``, ``create_error``, ``create_drop``, ``list_endless``)."""

    @property
    def legacy_list(self) -> bool:
        """Whether ``GET /sandbox`` answers the legacy bare array."""

    @property
    def proxy_domain(self) -> str:
        """The domain of preview URLs (``<port>-<id or token>.<domain>``)."""

    @property
    def toolbox_url(self) -> str:
        """Every sandbox's ``toolboxProxyUrl``."""

    def retire(self, sandbox_id: str, *, destroy: bool = False) -> None:
        """End the sandbox's processes (and with ``destroy`` remove its box); blocking."""

    def apply_network(self, sandbox: Sandbox) -> None:
        """Put the sandbox's network settings in force; blocking."""

    def next_endless_cursor(self) -> str:
        """A cursor never served before (the ``list_endless`` fault)."""

    async def after_list_page(self) -> None:
        """Apply the listing mutations due after one more page was served."""


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _guarded(handler: Handler) -> Handler:
    async def guarded(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except ApiError as error:
            return api_error_response(request, error)

    return guarded


async def _json_body(request: web.Request) -> dict[str, Any]:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = load_json(raw)
    except BadInput:
        raise ApiError(400, "Unexpected token in JSON body") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Request body must be a JSON object")
    return body


def _port(request: web.Request) -> int:
    try:
        port = int(request.match_info["port"])
    except ValueError:
        raise ApiError(400, "Invalid port") from None
    if not 1 <= port <= 65535:
        raise ApiError(400, "Invalid port")
    return port


class ApiRoutes:
    """Handlers for ``/api``; sandbox state lives in the emulator's store."""

    def __init__(self, emulator: ApiHost) -> None:
        self.emulator = emulator
        self.store = emulator.store

    def register(self, app: web.Application) -> None:
        """Add the routes (``/sandbox/paginated`` before ``/sandbox/{idOrName}``)."""
        one = "/api/sandbox/{idOrName}"
        routes: list[tuple[str, str, Handler]] = [
            ("POST", "/api/sandbox", self.create),
            ("GET", "/api/sandbox", self.list),
            ("GET", "/api/sandbox/paginated", self.paginated),
            ("GET", one, self.get),
            ("DELETE", one, self.delete),
            ("POST", one + "/start", self.start),
            ("POST", one + "/stop", self.stop),
            ("POST", one + "/archive", self.archive),
            ("POST", one + "/network-settings", self.network_settings),
            ("PUT", one + "/labels", self.labels),
            ("POST", one + "/public/{flag}", self.public),
            ("POST", one + "/{setting:autostop|autoarchive|autodelete}/{minutes}", self.interval),
            ("GET", one + "/ports/{port}/preview-url", self.preview_url),
            ("GET", one + "/ports/{port}/signed-preview-url", self.signed_preview_url),
            ("POST", one + "/ports/{port}/signed-preview-url/{token}/expire", self.expire),
            ("GET", one + "/toolbox-proxy-url", self.toolbox_proxy_url),
        ]
        for method, path, handler in routes:
            app.router.add_route(method, path, _guarded(handler))

    def _dto(self, sandbox: Sandbox) -> web.Response:
        return web.json_response(sandbox.to_json(self.emulator.toolbox_url))

    def _held(self, request: web.Request) -> bool:
        return self.emulator.faults.take("hold", request.method, request.path) is not None

    # -- create / read / delete ----------------------------------------------------

    async def create(self, request: web.Request) -> web.StreamResponse:
        """``POST /sandbox`` → 200 Sandbox (the create wait is instantaneous here)."""
        body = await _json_body(request)
        sandbox = self.store.create(body, hold=self._held(request))
        failure = self.emulator.faults.take("create_error", request.method, request.path)
        if failure is not None:
            reason = str(failure.body or "emulated start failure")
            self.store.fail(sandbox, reason)
            raise ApiError(400, f"Sandbox failed to start: {reason}")
        if self.emulator.faults.take("create_drop", request.method, request.path) is not None:
            if request.transport is not None:
                request.transport.close()
            raise asyncio.CancelledError
        return self._dto(sandbox)

    async def get(self, request: web.Request) -> web.StreamResponse:
        """``GET /sandbox/{idOrName}``."""
        return self._dto(self.store.find(request.match_info["idOrName"]))

    async def delete(self, request: web.Request) -> web.StreamResponse:
        """``DELETE /sandbox/{idOrName}`` → 200 + the renamed Sandbox; its box is removed."""
        sandbox = self.store.delete(request.match_info["idOrName"], hold=self._held(request))
        await run_blocking(lambda: self.emulator.retire(sandbox.id, destroy=True))
        return self._dto(sandbox)

    async def list(self, request: web.Request) -> web.StreamResponse:
        """``GET /sandbox``: a cursor page (or the legacy bare array when switched on)."""
        query = ListQuery.parse(request.query, lambda key: request.query.getall(key, []))
        if self.emulator.legacy_list:
            rows = [r for r in self.store.all() if query.admits(r)]
            return web.json_response([r.to_json(self.emulator.toolbox_url) for r in rows])
        endless = self.emulator.faults.take("list_endless", request.method, request.path)
        if endless is not None:
            query.cursor = None
        rows, next_cursor = self.store.page(query)
        if endless is not None:
            next_cursor = self.emulator.next_endless_cursor()
        items = [r.list_item(self.emulator.toolbox_url) for r in rows]
        await self.emulator.after_list_page()
        return web.json_response({"items": items, "nextCursor": next_cursor})

    async def paginated(self, request: web.Request) -> web.StreamResponse:
        """The deprecated offset listing ``GET /sandbox/paginated``."""
        query = ListQuery.parse(
            {"sort": "createdAt", **request.query}, lambda key: request.query.getall(key, [])
        )
        try:
            page = int(request.query.get("page", "1"))
        except ValueError:
            raise ApiError(400, "page must be an integer number") from None
        if page < 1:
            raise ApiError(400, "page must not be less than 1")
        rows, total = self.store.offset_page(query, page)
        return web.json_response(
            {
                "items": [r.to_json(self.emulator.toolbox_url) for r in rows],
                "total": total,
                "page": page,
                "totalPages": max(1, -(-total // query.limit)),
            }
        )

    # -- lifecycle -------------------------------------------------------------------

    async def start(self, request: web.Request) -> web.StreamResponse:
        """``POST …/start`` (a no-op when started; 409 mid-transition)."""
        return self._dto(self.store.start(request.match_info["idOrName"], hold=self._held(request)))

    async def stop(self, request: web.Request) -> web.StreamResponse:
        """``POST …/stop[?force=]``: every process of the sandbox ends at once (its files
        stay; an ephemeral sandbox is deleted)."""
        sandbox = self.store.stop(request.match_info["idOrName"], hold=self._held(request))
        destroyed = sandbox.desired_state == "destroyed"
        await run_blocking(lambda: self.emulator.retire(sandbox.id, destroy=destroyed))
        return self._dto(sandbox)

    async def archive(self, request: web.Request) -> web.StreamResponse:
        """``POST …/archive`` (only from ``stopped``)."""
        return self._dto(
            self.store.archive(request.match_info["idOrName"], hold=self._held(request))
        )

    # -- settings --------------------------------------------------------------------

    async def network_settings(self, request: web.Request) -> web.StreamResponse:
        """``POST …/network-settings`` with the merge rules of
        docs/protocols/daytona.md#network-settings, put in force in the
        sandbox's box as far as its egress policy can express them (:mod:`.boxes`)."""
        body = await _json_body(request)
        sandbox = self.store.network_settings(request.match_info["idOrName"], body)
        await run_blocking(lambda: self.emulator.apply_network(sandbox))
        return self._dto(sandbox)

    async def labels(self, request: web.Request) -> web.StreamResponse:
        """``PUT …/labels`` replaces all labels."""
        labels = (await _json_body(request)).get("labels")
        if not isinstance(labels, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in labels.items()
        ):
            raise ApiError(400, "labels must be an object of string values")
        sandbox = self.store.update(request.match_info["idOrName"], labels=dict(labels))
        return web.json_response({"labels": sandbox.labels})

    async def public(self, request: web.Request) -> web.StreamResponse:
        """``POST …/public/{true|false}`` → 201 (Nest's POST default)."""
        flag = request.match_info["flag"]
        if flag not in ("true", "false"):
            raise ApiError(400, "Validation failed (boolean string is expected)")
        self.store.update(request.match_info["idOrName"], public=flag == "true")
        return web.Response(status=201)

    async def interval(self, request: web.Request) -> web.StreamResponse:
        """``POST …/autostop|autoarchive|autodelete/{minutes}`` → 201."""
        try:
            minutes = parse_int(request.match_info["minutes"], "minutes", low=-_INT32, high=_INT32)
        except BadInput:
            raise ApiError(400, "Validation failed (numeric string is expected)") from None
        setting = request.match_info["setting"]
        if setting == "autostop" and minutes < 0:
            raise ApiError(400, "Auto-stop interval must be a non-negative integer")
        field = {
            "autostop": "auto_stop",
            "autoarchive": "auto_archive",
            "autodelete": "auto_delete",
        }[setting]
        self.store.update(request.match_info["idOrName"], **{field: minutes})
        return web.Response(status=201)

    async def preview_url(self, request: web.Request) -> web.StreamResponse:
        """``GET …/ports/{port}/preview-url`` → ``{sandboxId, url, token}``."""
        port = _port(request)
        sandbox = self.store.find(request.match_info["idOrName"])
        return web.json_response(
            {
                "sandboxId": sandbox.id,
                "url": f"http://{port}-{sandbox.id}.{self.emulator.proxy_domain}",
                "token": sandbox.token,
            }
        )

    async def signed_preview_url(self, request: web.Request) -> web.StreamResponse:
        """``GET …/signed-preview-url?expiresInSeconds=N`` (1..86400, default 60)."""
        port = _port(request)
        try:
            expires = int(request.query.get("expiresInSeconds", "60"))
        except ValueError:
            raise ApiError(400, "expiresInSeconds must be an integer number") from None
        if not 1 <= expires <= 86400:
            raise ApiError(400, "expiresInSeconds must be between 1 and 86400")
        sandbox = self.store.find(request.match_info["idOrName"])
        token = secrets.token_urlsafe(16)
        return web.json_response(
            {
                "sandboxId": sandbox.id,
                "port": port,
                "token": token,
                "url": f"http://{port}-{token}.{self.emulator.proxy_domain}",
            }
        )

    async def expire(self, request: web.Request) -> web.StreamResponse:
        """``POST …/signed-preview-url/{token}/expire`` → 201."""
        _port(request)
        self.store.find(request.match_info["idOrName"])
        return web.Response(status=201)

    async def toolbox_proxy_url(self, request: web.Request) -> web.StreamResponse:
        """``GET …/toolbox-proxy-url`` → ``{"url": …}``
        (the fallback of docs/protocols/daytona.md#toolbox-proxy-url)."""
        self.store.find(request.match_info["idOrName"])
        return web.json_response({"url": self.emulator.toolbox_url})
