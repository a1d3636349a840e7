"""The transport seam: how requests and WebSocket handshakes reach the network.

A :class:`Transport` (in the spirit of httpx's ``BaseTransport.handle_request``)
sends one prepared request and hands back the answer unread, whatever its
status, and opens WebSockets. It maps what only it can know — its library's
failures — to the taxonomy (:func:`transport_error`: the endpoint, never the
URL; a timeout is ``DeadlineExpired("timeout")``); what an *answer* means is
decided once, by the status policy (:mod:`._status`), in
:class:`~._http.HttpClient` and :func:`~._http.open_websocket`, never here.

:class:`RequestsTransport`, the default, hands each request to a ``requests``
transport adapter of a per-thread ``requests.Session``
(``session.get_adapter(url).send(...)``), so ``responses`` (which patches
``HTTPAdapter.send``) and any adapter a user mounts keep working, and opens
WebSockets with websocket-client. Its sessions mount
:class:`~._requests_adapter.DirectAdapter`, ``requests``' own adapter with less
work per request; and for a client that asks for it
(``HttpClient(direct=True)``) it sends a plain request without preparing it
(:meth:`RequestsTransport.send_plain`) while nothing would see the difference.
A test gives a provider another transport
(``Sprites(transport=...)``, ``E2B(transport=...)``, ``Daytona(transport=...)``)
instead of patching a library; :func:`canned` builds the answer such a
transport returns.

Also here: control of a streamed answer's socket (:func:`set_read_timeout`,
:func:`interrupt`).
"""

from __future__ import annotations

import io
import socket
import threading
from collections.abc import Mapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from ._prepare import Plain
from ._status import Response
from .errors import DeadlineExpired, Unavailable
from .reasons import Reason

if TYPE_CHECKING:
    import requests

__all__ = [
    "RequestsTransport",
    "Transport",
    "UpgradeRefused",
    "canned",
    "endpoint",
    "interrupt",
    "requests_module",
    "set_read_timeout",
    "transport_error",
]

#: The port a URL of each scheme means when it names none.
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


class UpgradeRefused(Exception):
    """The server answered a WebSocket upgrade with a status other than 101; ``answer``
    is that answer (its body as read: none for a redirect), for the status policy."""

    def __init__(self, answer: Response) -> None:
        super().__init__(answer.status)
        self.answer = answer


class Transport(Protocol):
    """Where every request and WebSocket of an adapter goes.

    ``handle_request`` sends ``request`` and returns the answer with its body not
    yet read (the caller reads and closes it), whatever its status; ``connect``
    opens a WebSocket (an object with websocket-client's ``WebSocket`` methods) or
    raises :class:`UpgradeRefused` with the server's answer. Both raise the
    taxonomy error of a failure to reach the server (:func:`transport_error`),
    never a status's. Neither follows redirects or reads proxy settings from the
    environment. ``isolated`` gives a transport whose connections are its own
    (none shared with this one, none kept after its ``release``); ``release``
    closes the connections it keeps for the calling thread.
    """

    def handle_request(
        self, request: requests.PreparedRequest, *, timeout: tuple[float, float]
    ) -> requests.Response: ...

    def connect(self, url: str, headers: Mapping[str, str], *, timeout: float) -> Any: ...

    def isolated(self) -> Transport: ...

    def release(self) -> None: ...


def requests_module() -> Any:
    """The ``requests`` module (typed ``Any``: a module has no finer type), imported on
    first use: with urllib3 it is most of an HTTP
    adapter's import time, and nothing needs it before the first request."""
    import requests  # noqa: PLC0415

    return requests


def endpoint(url: str) -> str:
    """Where ``url`` points, as ``host:port``: safe to put in an error or a log line.

    Only the host and the port are kept (an IPv6 host in brackets; the
    scheme's default port when the URL names none, no port when the one it
    names is malformed): never the userinfo, the path or the query, which may
    carry a credential.
    """
    parts = urlsplit(url)
    host = parts.hostname or "?"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return host
    return host if port is None else f"{host}:{port}"


def transport_error(error: BaseException, url: str) -> Unavailable:
    """A transport failure talking to ``url`` as ``Unavailable``.

    A ``requests`` timeout is ``DeadlineExpired("timeout")``; anything else is
    ``Unavailable(("transport", kind, "host:port"))``: the exception's class
    name and :func:`endpoint` of ``url``, never the URL itself or a header.
    """
    if isinstance(error, requests_module().Timeout):
        return DeadlineExpired(Reason.TIMEOUT)
    return Unavailable(Reason.TRANSPORT, kind=type(error).__name__, address=endpoint(url))


class RequestsTransport:
    """The default :class:`Transport`: ``requests`` for HTTP (one pooled session per
    thread, each request handed straight to the session's transport adapter), and
    websocket-client for WebSockets."""

    def __init__(self) -> None:
        self._local = threading.local()

    def session(self) -> requests.Session:
        """This thread's pooled session: its transport adapters (the connection pools),
        a :class:`~._requests_adapter.DirectAdapter` for ``http://`` and ``https://``.
        Requests never go through ``Session.request``, so its headers, environment
        settings, cookies and hooks play no part."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests_module().Session()
            from ._requests_adapter import DirectAdapter  # noqa: PLC0415  (needs requests)

            for prefix in ("https://", "http://"):
                session.mount(prefix, DirectAdapter())
            self._local.session = session
        return session

    def handle_request(
        self, request: requests.PreparedRequest, *, timeout: tuple[float, float]
    ) -> requests.Response:
        """``request`` sent through this thread's session's adapter for its URL, streamed."""
        url: str = request.url  # type: ignore[assignment]  # a prepared request has one
        try:
            return self.session().get_adapter(url).send(request, stream=True, timeout=timeout)
        except requests_module().RequestException as error:
            raise transport_error(error, url) from None

    def send_plain(
        self, request: Plain, *, timeout: tuple[float, float]
    ) -> requests.Response | None:
        """``request`` sent as :meth:`handle_request` sends its ``PreparedRequest``, without
        building one (:meth:`~._requests_adapter.DirectAdapter.send_plain`), when this
        thread's adapter for its URL is the transport's own and ``HTTPAdapter.send`` is
        requests' own (:func:`~._requests_adapter.requests_sends`): its answer, unread.
        ``None`` otherwise (``responses`` or a mounted adapter would not see it): the
        caller then prepares it and calls :meth:`handle_request`."""
        from ._requests_adapter import DirectAdapter, requests_sends  # noqa: PLC0415

        adapter = self.session().get_adapter(request.url)
        if type(adapter) is not DirectAdapter or not requests_sends():
            return None
        try:
            return adapter.send_plain(request, timeout)
        except requests_module().RequestException as error:
            raise transport_error(error, request.url) from None

    def connect(self, url: str, headers: Mapping[str, str], *, timeout: float) -> Any:
        """A connected ``websocket.WebSocket`` (typed ``Any``: websocket-client ships no
        annotations for its methods): no redirect followed, no proxy, no ``Origin``.

        A refused upgrade is :class:`UpgradeRefused` (a redirect too, without a body);
        a timeout ``DeadlineExpired("timeout")``; any other failure
        :func:`transport_error`.
        """
        import websocket  # noqa: PLC0415  (most adapters never open one)

        ws: Any = websocket.WebSocket(enable_multithread=True, skip_utf8_validation=True)
        try:
            ws.connect(
                url,
                header=[f"{key}: {value}" for key, value in headers.items()],
                timeout=timeout,
                suppress_origin=True,
                redirect_limit=0,
                http_no_proxy=["*"],
            )
        except websocket.WebSocketBadStatusException as error:
            ws.shutdown()
            raise _refused(error, url) from None
        except websocket.WebSocketTimeoutException:
            ws.shutdown()
            raise DeadlineExpired(Reason.TIMEOUT) from None
        except (websocket.WebSocketException, OSError) as error:
            ws.shutdown()
            handshake = getattr(ws, "handshake_response", None)
            status = getattr(handshake, "status", None)
            if isinstance(status, int) and 300 <= status < 400:
                answered = getattr(handshake, "headers", None) or {}
                raise UpgradeRefused(Response(int(status), dict(answered), b"")) from None
            raise transport_error(error, url) from None
        return ws

    def isolated(self) -> RequestsTransport:
        """A transport of its own (a fresh session, hence fresh connections)."""
        return RequestsTransport()

    def release(self) -> None:
        """Close this thread's pooled session, if it has one (a reader thread ending)."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None


def _refused(error: Any, url: str) -> Exception:
    """A ``WebSocketBadStatusException`` as :class:`UpgradeRefused` (its status, headers
    and body), or as a transport failure when it carries no status."""
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        return transport_error(error, url)
    headers: Mapping[str, str] = getattr(error, "resp_headers", None) or {}
    body = getattr(error, "resp_body", None) or b""
    if isinstance(body, str):
        body = body.encode("utf-8", errors="replace")
    return UpgradeRefused(Response(status, dict(headers), bytes(body)))


def canned(
    request: requests.PreparedRequest,
    status: int,
    body: bytes = b"",
    headers: Mapping[str, str] | None = None,
) -> requests.Response:
    """The answer a :class:`Transport` returns for ``request`` when it makes the answer
    up (a test's transport): ``status``, ``headers`` and ``body``, streamed from memory
    exactly as one read off a connection is (no socket: :func:`set_read_timeout` and
    :func:`interrupt` do nothing to it)."""
    lib = requests_module()
    import urllib3  # noqa: PLC0415

    raw = urllib3.HTTPResponse(
        body=io.BytesIO(body),
        headers=dict(headers or {}),
        status=status,
        preload_content=False,
        decode_content=False,
        request_url=request.url,
    )
    response: requests.Response = lib.Response()
    response.status_code = status
    response.headers = lib.structures.CaseInsensitiveDict(raw.headers)
    response.encoding = lib.utils.get_encoding_from_headers(response.headers)
    response.raw = raw
    response.reason = ""
    response.url = request.url or ""
    response.request = request
    return response


def _socket_of(response: requests.Response) -> socket.socket | None:
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def set_read_timeout(response: requests.Response, seconds: float) -> None:
    """Bound each further read of a streaming ``response`` to ``seconds`` (if it has a socket)."""
    sock = _socket_of(response)
    if sock is not None:
        try:  # noqa: SIM105 - called before every read: no context manager to build
            sock.settimeout(seconds if seconds > 0.001 else 0.001)
        except OSError:
            pass


def interrupt(response: requests.Response) -> None:
    """Unblock a read of a streaming ``response`` in another thread: shut its socket down."""
    sock = _socket_of(response)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
