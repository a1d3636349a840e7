"""The emulator base: an aiohttp application served from a background thread.

A provider emulator subclasses :class:`Emulator`, adds its routes in
:meth:`Emulator.add_routes` and says how a request carries its credential in
:meth:`Emulator.credential_of`. The base gives every emulator:

* a free port on 127.0.0.1 (or the one asked for) and :attr:`Emulator.base_url`;
* access control (:mod:`._access`, docs/emulators.md): a credential always
  (the configured one, else the provider's environment variable, else a
  random one in :attr:`Emulator.credential`); a request without it, or with
  a wrong one, gets :meth:`Emulator.unauthorized` before its body is read.
  A request whose ``Host`` does not name the emulator gets 421;
* a bounded request log (:attr:`Emulator.requests`, :mod:`._requestlog`) of
  the authenticated requests, with credentials redacted and bodies kept only
  with ``log_bodies=True``; the others are only counted
  (:attr:`Emulator.unauthenticated_requests`);
* bad input answered with :meth:`Emulator.bad_request` (a 400 in the
  provider's shape), never a 500: the checks shared by every route are in
  :mod:`._input`;
* an idle timeout (:attr:`Emulator.idle_timeout`): a connection that sends no
  request within it (after opening, or after its last answer), or whose
  request body stops arriving for that long, is closed; a request being
  answered — a stream, a WebSocket — is never cut by it;
* generic faults applied before routing (:class:`Faults`, :mod:`._faults`): an
  HTTP status with headers and body (a 429 with ``Retry-After``, a 5xx), a
  stall, a dropped connection, an oversized body, a truncated body.
  Provider-specific faults use :meth:`Faults.take` from inside their handlers.
  Every fault's fields are bounded, and its ``path`` is matched in linear time;
* a small HTTP control API, behind the same credential (the provider's way of
  presenting it, or ``Authorization: Bearer``): ``POST /_emulator/faults``,
  ``DELETE /_emulator/faults``, ``GET /_emulator/requests``,
  ``GET /_emulator/requests/unauthenticated``, ``DELETE /_emulator/requests``;
* on :meth:`Emulator.stop`, an end to every process it started (:mod:`._reap`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import shutil
import tempfile
import threading
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from aiohttp import web

from . import _reap
from ._access import HostCheck, credential_matches, resolve_credential
from ._faults import Fault, FaultError, Faults, fault_from_spec
from ._input import BadInput, load_json, request_problem
from ._requestlog import MAX_BODY, LoggedRequest, RequestLog, redact_request

__all__ = ["Emulator", "Fault", "Faults", "LoggedRequest"]

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
#: The largest control-API request body read, in bytes.
MAX_CONTROL_BODY = 1024 * 1024
_OVERSIZE_CHUNK = 64 * 1024
#: Seconds a connection may stay silent by default (see :attr:`Emulator.idle_timeout`).
DEFAULT_IDLE_TIMEOUT = 60.0
#: Seconds :meth:`Emulator.stop` lets requests still being answered finish before it
#: drops them.
SHUTDOWN_GRACE = 0.25
#: The longest idle timeout an emulator takes, in seconds.
MAX_IDLE_TIMEOUT = 86_400.0
_CONTROL_PREFIX = "/_emulator/"
#: The environment variable that marks every process an emulator starts.
MARKER_ENV = "MANAGOAT_EMULATOR_MARKER"


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
        log_bodies: bool = False,
        idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    ) -> None:
        self.host = host
        self.port = port
        #: Seconds a connection may stay silent while no request of it is being
        #: answered, or while the body of its request stops arriving, before the
        #: emulator closes it: a number above 0, at most :data:`MAX_IDLE_TIMEOUT`
        #: (ValueError otherwise).
        self.idle_timeout = _checked_idle_timeout(idle_timeout)
        #: The only credential accepted: the one given, else the environment
        #: variable's, else a random one (:attr:`credential_generated` is then True).
        self.credential, self.credential_generated = resolve_credential(
            credential, self.credential_env
        )
        #: Keep request bodies in the log (tests that assert on them opt in).
        self.log_bodies = log_bodies
        #: Carried (as ``MANAGOAT_EMULATOR_MARKER``) by every process this emulator
        #: starts, so that :meth:`stop` can end any that a sandbox's shutdown missed.
        self.marker = f"{self.provider}-{uuid.uuid4().hex}"
        self.faults = Faults()
        self._log = RequestLog()
        self._hosts = HostCheck(host, lambda: self.port, self.serves_host)
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
        return _bearer(request)

    def unauthorized(self, request: web.Request) -> web.StreamResponse:
        """The provider's answer to a missing or wrong credential."""
        return web.json_response({"error": "unauthorized"}, status=401)

    def bad_request(self, request: web.Request, message: str) -> web.StreamResponse:
        """The provider's 400 for input no route takes (``message`` says why, without
        repeating the input)."""
        return _control_error(400, message)

    def authenticated(self, request: web.Request) -> bool:
        """Whether the request carries a valid credential (default: the emulator's own,
        presented as :meth:`credential_of` finds it). Never raises."""
        return credential_matches(self.credential_of(request), self.credential)

    def public_path(self, request: web.Request) -> bool:
        """Provider routes served without the emulator's credential: they answer a
        request that is not :meth:`authenticated` themselves, as the provider does."""
        return False

    def secrets(self) -> list[str]:
        """Every live credential, redacted wherever it appears in the request log
        (default: the emulator's own; emulators add the tokens they issued)."""
        return [self.credential]

    def serves_host(self, host: str) -> bool:
        """Whether Host name ``host`` (lower case, no port) is one this emulator serves
        besides its bound address (default: none)."""
        return False

    def marker_env(self) -> dict[str, str]:
        """The environment entry every process this emulator starts must carry."""
        return {MARKER_ENV: self.marker}

    def close(self) -> None:
        """Release provider state (kill processes, end open streams); idempotent.

        Called by :meth:`stop` while the server still runs.
        """

    # -- the request log ---------------------------------------------------------

    @property
    def requests(self) -> list[LoggedRequest]:
        """A snapshot of the request log, oldest first (bounded, see :mod:`._requestlog`)."""
        return self._log.snapshot()

    @property
    def unauthenticated_requests(self) -> int:
        """How many requests were refused (or served by a public route) without a valid
        credential since the log was last cleared; they are never logged."""
        return self._log.unauthenticated

    def clear_requests(self) -> None:
        """Forget the request log and the count of unauthenticated requests."""
        self._log.clear()

    # -- lifecycle ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://host:port`` once started."""
        if not self._started.is_set():
            raise RuntimeError("the emulator is not running")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

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
        """Release provider state, end every process still carrying :attr:`marker`,
        then stop serving and remove a workdir made for it.

        :meth:`close` runs first, so that no handler is still following a live
        command (which would hold the server's shutdown) when the loop stops.
        """
        self.close()
        _reap.end_marked(MARKER_ENV, self.marker)
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
            _cancel_pending(loop)
            loop.close()

    async def _open(self) -> None:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        app.router.add_post("/_emulator/faults", self._control_add_fault)
        app.router.add_delete("/_emulator/faults", self._control_clear_faults)
        app.router.add_get("/_emulator/requests", self._control_requests)
        app.router.add_get("/_emulator/requests/unauthenticated", self._control_unauthenticated)
        app.router.add_delete("/_emulator/requests", self._control_clear)
        self.add_routes(app)
        # aiohttp's keep-alive timer closes a connection that has no complete request
        # head for this long after it opened or after its last answer.
        # Stopping gives requests still being answered SHUTDOWN_GRACE seconds, then drops
        # them, as a server that goes away does (a held or stalled one would hold it up).
        self._runner = web.AppRunner(
            app,
            handle_signals=False,
            access_log=None,
            keepalive_timeout=self.idle_timeout,
            shutdown_timeout=SHUTDOWN_GRACE,
        )
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
        """The door of every request: its Host, its credential (a refusal is counted,
        never logged), then the route, its body watched for idleness."""
        if not self._hosts.allows(request.headers.get("Host")):
            return _misdirected()
        control = request.path.startswith(_CONTROL_PREFIX)
        authenticated = (
            self._control_authorized(request) if control else self.authenticated(request)
        )
        if not authenticated:
            self._log.count_unauthenticated()
            if control or not self.public_path(request):
                return self.unauthorized(request)
        if control:
            return await self._watched(request, lambda: self._admit_control(request, handler))
        return await self._watched(
            request, lambda: self._admit(request, handler, authenticated=authenticated)
        )

    async def _admit(
        self, request: web.Request, handler: Handler, *, authenticated: bool
    ) -> web.StreamResponse:
        """A provider request past the credential check: logged when authenticated, then
        the shared input checks, a queued fault, the route."""
        problem = request_problem(request)
        if authenticated:
            await self._log_request(request, read_body=problem is None)
        if problem is not None:
            return self.bad_request(request, problem)
        fault = self.faults.take(None, request.method, request.path)
        if fault is not None:
            answer = await _apply(fault, request)
            if answer is not None:
                return answer
        try:
            return await handler(request)
        except BadInput as error:
            return self.bad_request(request, str(error))

    async def _admit_control(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """An authenticated control-API request: the shared input checks, then the route."""
        problem = request_problem(request)
        if problem is not None:
            return _control_error(400, problem)
        try:
            return await handler(request)
        except BadInput as error:
            return _control_error(400, str(error))

    async def _watched(
        self, request: web.Request, serve: Callable[[], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """``serve()``'s answer, the connection closed meanwhile once the request's body,
        still incomplete, has had no new byte for :attr:`idle_timeout` (see
        :meth:`_watch_body`); then a 408 that no one reads stands for the answer."""
        if _is_websocket(request) or not request.body_exists:
            return await serve()
        watchdog = asyncio.ensure_future(self._watch_body(request))
        try:
            return await serve()
        except ConnectionError:
            if watchdog.done() and not watchdog.cancelled() and watchdog.result():
                return web.Response(status=408)
            raise
        finally:
            watchdog.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watchdog

    async def _watch_body(self, request: web.Request) -> bool:
        """Close the connection once the request's body, still incomplete, has had no new
        byte for :attr:`idle_timeout` while the connection was free to deliver one (a
        transport paused because a route reads slowly is not the client's silence);
        whether it did."""
        content, transport = request.content, request.transport
        received = -1
        while transport is not None and not content.is_eof():
            if content.total_bytes == received and transport.is_reading():
                transport.close()
                return True
            received = content.total_bytes
            await asyncio.sleep(self.idle_timeout)
        return False

    async def _log_request(self, request: web.Request, *, read_body: bool) -> None:
        """Log an authenticated request (its body too with :attr:`log_bodies`, when
        ``read_body`` and it is not a WebSocket upgrade)."""
        body, truncated = b"", False
        if read_body and self.log_bodies and not _is_websocket(request):
            raw = await request.read()
            body, truncated = raw[:MAX_BODY], len(raw) > MAX_BODY
        self._log.append(
            redact_request(
                request.method,
                request.path,
                request.query.items(),
                request.headers,
                self.secrets(),
                body=body,
                truncated=truncated,
            )
        )

    def _control_authorized(self, request: web.Request) -> bool:
        """The control API takes the emulator's credential presented the provider's way,
        or as a Bearer header."""
        given = (self.credential_of(request), _bearer(request))
        return any(credential_matches(each, self.credential) for each in given)

    # -- control API -----------------------------------------------------------------

    async def _control_add_fault(self, request: web.Request) -> web.Response:
        try:
            spec = load_json(await _read_limited(request, MAX_CONTROL_BODY))
        except _TooLarge:
            return _control_error(413, f"the body is larger than {MAX_CONTROL_BODY} bytes")
        except BadInput as error:
            return _control_error(400, str(error))
        try:
            self.faults.queue(fault_from_spec(spec))
        except FaultError as error:
            return _control_error(400, str(error))
        except TypeError:
            return _control_error(400, "fields: a fault's fields, each of the right type")
        return web.json_response({"ok": True}, status=201)

    async def _control_clear_faults(self, request: web.Request) -> web.Response:
        cleared = len(self.faults)
        self.faults.clear()
        return web.json_response({"ok": True, "cleared": cleared})

    async def _control_requests(self, request: web.Request) -> web.Response:
        return web.json_response(
            [
                {
                    "method": r.method,
                    "path": r.path,
                    "query": list(r.query),
                    "headers": dict(r.headers),
                    "body": r.body.decode("utf-8", "replace"),
                    "truncated": r.truncated,
                }
                for r in self.requests
            ]
        )

    async def _control_unauthenticated(self, request: web.Request) -> web.Response:
        return web.json_response({"unauthenticated": self.unauthenticated_requests})

    async def _control_clear(self, request: web.Request) -> web.Response:
        self.clear_requests()
        return web.json_response({"ok": True})


class _TooLarge(Exception):
    pass


async def _read_limited(request: web.Request, limit: int) -> bytes:
    """The request's body, or :class:`_TooLarge` as soon as it passes ``limit`` bytes."""
    if request.content_length is not None and request.content_length > limit:
        raise _TooLarge
    data = bytearray()
    async for chunk in request.content.iter_chunked(64 * 1024):
        data += chunk
        if len(data) > limit:
            raise _TooLarge
    return bytes(data)


def _control_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": message}, status=status)


def _misdirected() -> web.Response:
    return web.json_response(
        {"error": "misdirected_request", "message": "the Host header does not name this emulator"},
        status=421,
    )


def _cancel_pending(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still running on ``loop`` (requests dropped at stop) and let each
    task see its cancellation, so none is destroyed pending when the loop closes."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def _checked_idle_timeout(seconds: float) -> float:
    """``seconds`` as an idle timeout; ValueError naming it unless it is a number
    above 0 and at most :data:`MAX_IDLE_TIMEOUT`."""
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, (int, float))
        or not (math.isfinite(seconds) and 0 < seconds <= MAX_IDLE_TIMEOUT)
    ):
        raise ValueError(f"idle_timeout: a number of seconds above 0, at most {MAX_IDLE_TIMEOUT:g}")
    return float(seconds)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[7:] if header.startswith("Bearer ") else None


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
        return await _oversize(fault.size, request)
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


async def _oversize(size: int, request: web.Request) -> web.StreamResponse:
    """``size`` bytes of ``x`` as a JSON answer, written in pieces (never held whole)."""
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.content_length = size
    await response.prepare(request)
    piece = b"x" * _OVERSIZE_CHUNK
    left = size
    while left > 0:
        await response.write(piece[:left])
        left -= min(left, _OVERSIZE_CHUNK)
    await response.write_eof()
    return response
