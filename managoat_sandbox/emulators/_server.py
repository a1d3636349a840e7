"""The emulator base: an aiohttp application served from a background thread.

A provider emulator subclasses :class:`Emulator`, adds its routes in
:meth:`Emulator.add_routes` and says how a request carries its credential in
:meth:`Emulator.credential_of`. The base gives every emulator:

* a free port on 127.0.0.1 (or the one asked for) and :attr:`Emulator.base_url`;
* credential checking (SPEC §10): the configured credential, else the
  provider's environment variable, else any credential is accepted; a request
  without one, or with the wrong one, gets :meth:`Emulator.unauthorized`;
* a request log (:attr:`Emulator.requests`) with credentials redacted;
* generic faults applied before routing (:class:`Faults`): an HTTP status with
  headers and body (a 429 with ``Retry-After``, a 5xx), a stall, a dropped
  connection, an oversized body, a truncated body. Provider-specific faults
  use :meth:`Faults.take` from inside their handlers;
* a small HTTP control API for shell users: ``POST /_emulator/faults``,
  ``GET /_emulator/requests``, ``DELETE /_emulator/requests``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
from aiohttp import web

__all__ = ["Emulator", "Fault", "Faults", "LoggedRequest"]

GENERIC_KINDS = frozenset({"status", "stall", "drop", "oversize", "truncate"})
REDACTED = "<redacted>"
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "x-access-token", "x-daytona-api-key"})
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@attrs.frozen
class LoggedRequest:
    """One request as the emulator saw it; credential headers are redacted."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


@attrs.define
class Fault:
    """One injected fault: ``kind`` applied to matching requests, ``times`` times.

    ``method`` and ``path`` (a regular expression searched in the path) narrow
    the match; ``None`` matches everything. The other fields parameterise the
    kind (``status``/``headers``/``body`` for "status", ``seconds`` for
    "stall", ``size`` for "oversize"; provider kinds may use any of them).
    """

    kind: str
    method: str | None = None
    path: str | None = None
    times: int = 1
    status: int = 500
    headers: Mapping[str, str] = attrs.field(factory=dict)
    body: Any = None
    seconds: float = 0.0
    size: int = 0

    def matches(self, kind: str | None, method: str, path: str) -> bool:
        """Whether this fault applies (``kind=None`` matches any generic kind)."""
        if kind is None:
            if self.kind not in GENERIC_KINDS:
                return False
        elif self.kind != kind:
            return False
        if self.method is not None and self.method.upper() != method.upper():
            return False
        return self.path is None or re.search(self.path, path) is not None


class Faults:
    """The pending faults of one emulator; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[Fault] = []

    def add(self, kind: str, **fields: Any) -> Fault:
        """Queue a fault (see :class:`Fault` for the fields)."""
        fault = Fault(kind, **fields)
        if fault.times < 1:
            raise ValueError("times must be >= 1")
        with self._lock:
            self._pending.append(fault)
        return fault

    def take(self, kind: str | None, method: str, path: str) -> Fault | None:
        """Consume one use of the first matching fault, or None."""
        with self._lock:
            for fault in self._pending:
                if fault.matches(kind, method, path):
                    fault.times -= 1
                    if fault.times == 0:
                        self._pending.remove(fault)
                    return fault
        return None

    def clear(self) -> None:
        """Drop every pending fault."""
        with self._lock:
            self._pending.clear()


class Emulator:
    """Base class of the provider emulators; see the module docstring."""

    #: The provider this emulator speaks for.
    provider: ClassVar[str]
    #: The environment variable holding the credential it accepts.
    credential_env: ClassVar[str]

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        credential: str | None = None,
        workdir: str | Path | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.credential = credential or os.environ.get(self.credential_env) or None
        self.faults = Faults()
        self._log: list[LoggedRequest] = []
        self._log_lock = threading.Lock()
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix=f"{self.provider}-emulator-"))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._failure: BaseException | None = None

    # -- what subclasses provide ----------------------------------------------

    def add_routes(self, app: web.Application) -> None:
        """Register the provider's routes on ``app``."""
        raise NotImplementedError

    def credential_of(self, request: web.Request) -> str | None:
        """The credential a request carries (default: a Bearer token)."""
        header = request.headers.get("Authorization", "")
        return header[7:] if header.startswith("Bearer ") else None

    def unauthorized(self, request: web.Request) -> web.StreamResponse:
        """The provider's answer to a missing or wrong credential."""
        return web.json_response({"error": "unauthorized"}, status=401)

    def public_path(self, request: web.Request) -> bool:
        """Routes that need no credential (the control API always does not)."""
        return False

    def close(self) -> None:
        """Release provider state (kill processes, end open streams); idempotent.

        Called by :meth:`stop` while the server still runs.
        """

    # -- the request log ---------------------------------------------------------

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of every request served so far, oldest first."""
        with self._log_lock:
            return list(self._log)

    def clear_requests(self) -> None:
        """Forget the request log."""
        with self._log_lock:
            self._log.clear()

    # -- lifecycle ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://host:port`` once started."""
        if not self._started.is_set():
            raise RuntimeError("the emulator is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Emulator:
        """Serve from a background thread; returns once connections are accepted.

        A failure to listen (a busy port, an unknown host) is a ``RuntimeError``
        whose ``__cause__`` is the ``OSError``; :meth:`stop` still cleans up.
        """
        self._thread = threading.Thread(
            target=self._serve, name=f"{self.provider}-emulator", daemon=True
        )
        self._thread.start()
        self._started.wait(30)
        if self._failure is not None:
            raise RuntimeError(f"{self.provider} emulator failed to start") from self._failure
        if not self._started.is_set():
            raise RuntimeError(f"{self.provider} emulator did not start within 30 s")
        return self

    def stop(self) -> None:
        """Release provider state, then stop serving and remove a workdir made for it.

        :meth:`close` runs first, so that no handler is still following a live
        command (which would hold the server's shutdown) when the loop stops.
        """
        self.close()
        loop, thread = self._loop, self._thread
        if loop is not None and thread is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(30)
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._open())
        except BaseException as error:
            self._failure = error
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()
            self._started.set()
            return
        self._started.set()
        try:
            loop.run_forever()
        finally:
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()

    async def _open(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_post("/_emulator/faults", self._control_add_fault)
        app.router.add_get("/_emulator/requests", self._control_requests)
        app.router.add_delete("/_emulator/requests", self._control_clear)
        self.add_routes(app)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1]

    # -- middleware ----------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith("/_emulator/"):
            return await handler(request)
        body = b"" if _is_websocket(request) else await request.read()
        headers = {
            k: (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in request.headers.items()
        }
        entry = LoggedRequest(request.method, request.path, tuple(request.query.items()),
                              headers, body)
        with self._log_lock:
            self._log.append(entry)
        if not self.public_path(request) and not self._authorized(request):
            return self.unauthorized(request)
        fault = self.faults.take(None, request.method, request.path)
        if fault is not None:
            answer = await _apply(fault, request)
            if answer is not None:
                return answer
        return await handler(request)

    def _authorized(self, request: web.Request) -> bool:
        given = self.credential_of(request)
        if not given:
            return False
        return self.credential is None or given == self.credential

    # -- control API -----------------------------------------------------------------

    async def _control_add_fault(self, request: web.Request) -> web.Response:
        spec = await request.json()
        if not isinstance(spec, dict) or "kind" not in spec:
            return web.json_response({"error": "a JSON object with 'kind' is required"},
                                     status=400)
        kind = spec.pop("kind")
        try:
            self.faults.add(kind, **spec)
        except (TypeError, ValueError) as error:
            return web.json_response({"error": str(error)}, status=400)
        return web.json_response({"ok": True}, status=201)

    async def _control_requests(self, request: web.Request) -> web.Response:
        return web.json_response(
            [
                {"method": r.method, "path": r.path, "query": list(r.query),
                 "headers": dict(r.headers), "body": r.body.decode("utf-8", "replace")}
                for r in self.requests
            ]
        )

    async def _control_clear(self, request: web.Request) -> web.Response:
        self.clear_requests()
        return web.json_response({"ok": True})


def _is_websocket(request: web.Request) -> bool:
    return request.headers.get("Upgrade", "").lower() == "websocket"


async def _apply(fault: Fault, request: web.Request) -> web.StreamResponse | None:
    """Apply a generic fault; None lets the request through (after a stall)."""
    if fault.kind == "status":
        body = fault.body
        if isinstance(body, (dict, list)):
            return web.json_response(body, status=fault.status, headers=dict(fault.headers))
        text = body if isinstance(body, str) else ""
        return web.Response(text=text, status=fault.status, headers=dict(fault.headers))
    if fault.kind == "stall":
        await asyncio.sleep(fault.seconds)
        return None
    if fault.kind == "drop":
        transport = request.transport
        if transport is not None:
            transport.close()
        raise asyncio.CancelledError
    if fault.kind == "oversize":
        return web.Response(body=b"x" * fault.size, content_type="application/json")
    if fault.kind == "truncate":
        response = web.StreamResponse(status=fault.status if fault.status < 400 else 200)
        response.content_length = 1_000_000
        await response.prepare(request)
        await response.write(b'{"partial": ')
        transport = request.transport
        if transport is not None:
            transport.close()
        return response
    return None
