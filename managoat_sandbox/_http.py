"""HTTP shared by every HTTP adapter: the client, bounded bodies, WebSocket opening.

Three modules share the job:

* :mod:`._status` — how an answer becomes an error (``error_for``,
  :class:`ErrorPolicy`, ``retry_after_from``, ``request_id_from``): the one
  status → taxonomy policy (docs/protocols/contract.md#http-status-mapping);
* :mod:`._transport` — the seam where requests and WebSocket handshakes reach
  the network (:class:`~._transport.Transport`, its default
  :class:`~._transport.RequestsTransport`), which maps its library's failures
  (``transport_error``: ``Unavailable(("transport", kind, "host:port"))``, a
  timeout ``DeadlineExpired("timeout")``), and the control of a streamed
  answer's socket (``set_read_timeout``, ``interrupt``);
* here — :class:`HttpClient`, through which every provider sends: a request is
  prepared, given to the client's transport, and a status the caller does not
  accept is mapped by the provider's :class:`ErrorPolicy`
  (:meth:`HttpClient.send`: a fully read answer; :meth:`HttpClient.open`: a
  streamed one); :func:`open_websocket`, through which every WebSocket is
  opened, maps a refused upgrade by the same policy; and the bounded reading of
  bodies (:func:`body_chunks`, :func:`read_bounded`, :func:`raw_chunks`).

Every name the package imported from here before the split still comes from
here. Requests carry explicit connect/read timeouts and bodies are read with a
cap, so a broken or hostile server can neither hang a caller forever nor make it
allocate without limit. Credentials live in headers, which are never logged or
put in errors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

import attrs

from ._prepare import plain, prepared
from ._secrets import credentials_in, scrub_bytes
from ._status import (
    BODY_LIMIT,
    REQUEST_ID_HEADERS,
    ErrorPolicy,
    Response,
    error_for,
    is_success,
    parse_body,
    request_id_from,
    retry_after_from,
    unexpected,
)
from ._transport import (
    RequestsTransport,
    Transport,
    UpgradeRefused,
    endpoint,
    interrupt,
    requests_module,
    set_read_timeout,
    transport_error,
)
from .errors import DeadlineExpired, Invalid, SandboxError, Unavailable
from .reasons import Reason

if TYPE_CHECKING:
    import requests

__all__ = [
    "BODY_LIMIT",
    "DEFAULT_TRANSPORT",
    "REQUEST_ID_HEADERS",
    "ErrorPolicy",
    "HttpClient",
    "RequestsTransport",
    "Response",
    "Transport",
    "body_chunks",
    "endpoint",
    "error_for",
    "interrupt",
    "is_success",
    "open_websocket",
    "parse_body",
    "raw_chunks",
    "read_bounded",
    "request_id_from",
    "requests_module",
    "retry_after_from",
    "set_read_timeout",
    "transport_error",
    "unexpected",
]

_CHUNK = 16 * 1024

#: The transport of whatever is sent without a client's: stateless for WebSockets
#: and for :meth:`~._transport.Transport.isolated` requests.
DEFAULT_TRANSPORT = RequestsTransport()


class HttpClient:
    """Pooled HTTP for one adapter instance, through one :class:`~._transport.Transport`
    (default: a :class:`~._transport.RequestsTransport`, one ``requests.Session`` per
    thread).

    There is no default timeout: every call gives its own ``(connect, read)``
    seconds. Redirects are never followed. Bodies over ``limit`` bytes are refused as
    ``Unavailable(("response_too_large", limit))``.

    With ``direct``, a plain request (:func:`._prepare.plain`) through the default
    transport is sent without building its ``PreparedRequest``
    (:meth:`~._transport.RequestsTransport.send_plain`) whenever nothing would see
    the difference (no ``responses``, no mounted adapter): the same bytes on the
    wire, the same answer, the same failures, less work per request.
    """

    def __init__(
        self,
        *,
        user_agent: str = "managoat_sandbox",
        transport: Transport | None = None,
        direct: bool = False,
    ) -> None:
        self._user_agent = user_agent
        self._headers: dict[str, str] | None = None
        self._direct = direct
        self.transport: Transport = RequestsTransport() if transport is None else transport

    def release(self) -> None:
        """Close this thread's pooled connections, if it has some (a reader thread ending)."""
        self.transport.release()

    def session(self) -> requests.Session:
        """This thread's pooled session of the default transport: its transport adapters
        (the connection pools). Requests never go through ``Session.request``
        (:meth:`stream`), so its headers, environment settings, cookies and hooks play
        no part. ``TypeError`` for a client given another transport."""
        if not isinstance(self.transport, RequestsTransport):
            raise TypeError("this client's transport has no requests session")
        return self.transport.session()

    def _sent(
        self,
        method: str,
        url: str,
        *,
        timeout: tuple[float, float],
        headers: Mapping[str, str] | None,
        kwargs: Mapping[str, Any],
    ) -> requests.Response:
        """The transport's answer to the request, its body unread (see :meth:`stream`)."""
        requests = requests_module()
        defaults = self._headers
        if defaults is None:
            defaults = self._headers = {
                **requests.utils.default_headers(),
                "User-Agent": self._user_agent,
            }
        merged = {**defaults, **(headers or {})}
        found = None
        if self._direct and isinstance(self.transport, RequestsTransport):
            found = plain(requests, method, url, merged, kwargs)
            answer = None if found is None else self.transport.send_plain(found, timeout=timeout)
            if answer is not None:
                return answer
        try:
            request = prepared(requests, method, url, merged, kwargs, found=found)
        except requests.RequestException as error:
            raise transport_error(error, url) from None
        return self.transport.handle_request(request, timeout=timeout)

    @contextmanager
    def stream(
        self,
        method: str,
        url: str,
        *,
        timeout: tuple[float, float],
        headers: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> Iterator[requests.Response]:
        """An open streaming response (the caller reads it); closed on exit.

        The request is prepared (:func:`._prepare.prepared`, which skips what
        ``PreparedRequest.prepare`` would find nothing to do in), with ``requests``'
        default headers and this client's ``User-Agent`` under ``headers``, and
        handed straight to the transport: none of what ``Session.request`` adds
        applies here (cookies, hooks, redirects, environment settings), and skipping
        it saves about a quarter of a millisecond per request
        (docs/performance.md). Transport failures are ``Unavailable``.
        """
        response = self._sent(method, url, timeout=timeout, headers=headers, kwargs=kwargs)
        try:
            yield response
        finally:
            response.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        timeout: tuple[float, float],
        headers: Mapping[str, str] | None = None,
        limit: int = BODY_LIMIT,
        **kwargs: Any,
    ) -> Response:
        """One request, its body read up to ``limit`` bytes. Never raises for a status."""
        with self.stream(method, url, timeout=timeout, headers=headers, **kwargs) as response:
            body = read_bounded(response, limit)
            return Response(response.status_code, dict(response.headers), body)

    def send(
        self,
        method: str,
        url: str,
        *,
        policy: ErrorPolicy,
        timeout: tuple[float, float],
        headers: Mapping[str, str] | None = None,
        limit: int = BODY_LIMIT,
        accept: Callable[[int], bool] = is_success,
        **kwargs: Any,
    ) -> Response:
        """One request, its body read up to ``limit`` bytes; a status ``accept`` refuses
        (any non-2xx by default) is raised as ``policy``'s taxonomy error.

        Transport failures are :func:`transport_error`; a body over ``limit`` is
        ``Unavailable(("response_too_large", limit))``.
        """
        response = self.request(
            method, url, timeout=timeout, headers=headers, limit=limit, **kwargs
        )
        if not accept(response.status):
            raise policy.error(_scrubbed(response, headers))
        return response

    @contextmanager
    def open(
        self,
        method: str,
        url: str,
        *,
        policy: ErrorPolicy,
        timeout: tuple[float, float],
        headers: Mapping[str, str] | None = None,
        accept: Callable[[int], bool] = is_success,
        **kwargs: Any,
    ) -> Iterator[requests.Response]:
        """An open streaming response whose status ``accept`` took (any 2xx by default),
        the caller reading its body; closed on exit. Any other status is raised as
        ``policy``'s taxonomy error, after reading at most 64 KiB of its body."""
        response = self._sent(method, url, timeout=timeout, headers=headers, kwargs=kwargs)
        try:
            if not accept(response.status_code):
                body = read_bounded(response, BODY_LIMIT)
                answer = Response(response.status_code, dict(response.headers), body)
                raise policy.error(_scrubbed(answer, headers))
            yield response
        finally:
            response.close()


def open_websocket(
    url: str,
    headers: Mapping[str, str],
    *,
    policy: ErrorPolicy,
    timeout: float,
    transport: Transport | None = None,
) -> Any:
    """A WebSocket connected to ``url`` through ``transport`` (default:
    :data:`DEFAULT_TRANSPORT`), websocket-client's ``WebSocket`` (typed ``Any``).

    A refused upgrade is mapped as any HTTP answer is, by ``policy`` (a 503 while a
    machine boots is ``Unavailable``, so transient), except a redirect, which is
    never followed and whose body is never read: ``Invalid(("http", status, {}))``.
    A timeout is ``DeadlineExpired("timeout")``, any other failure
    :func:`transport_error`'s ``Unavailable`` (the transport's).
    """
    try:
        return (transport or DEFAULT_TRANSPORT).connect(url, headers, timeout=timeout)
    except UpgradeRefused as refused:
        raise _refusal(refused.answer, policy, headers) from None


def _refusal(answer: Response, policy: ErrorPolicy, headers: Mapping[str, str]) -> SandboxError:
    """The taxonomy error of a refused upgrade (see :func:`open_websocket`)."""
    if 300 <= answer.status < 400:
        return Invalid(Reason.HTTP, status=answer.status, body={}).with_context(
            status=answer.status, request_id=request_id_from(answer.headers)
        )
    return policy.error(_scrubbed(answer, headers))


def _scrubbed(response: Response, headers: Mapping[str, str] | None) -> Response:
    """``response`` with any credential the request carried cut out of its body, so a
    server that echoes the request cannot put a credential into an error detail."""
    return attrs.evolve(response, body=scrub_bytes(response.body, credentials_in(headers or {})))


def body_chunks(
    response: requests.Response,
    *,
    size: int = _CHUNK,
    before_read: Callable[[], object] | None = None,
) -> Iterator[bytes]:
    """A streaming response's body, chunk by chunk (at most ``size`` bytes each).

    ``before_read()`` runs before each read and may raise to abandon the body;
    transport failures are ``Unavailable``.
    """
    body = response.iter_content(size)
    while True:
        if before_read is not None:
            before_read()
        try:
            chunk = next(body, b"")
        except requests_module().RequestException as error:
            raise transport_error(error, response.url) from None
        if not chunk:
            return
        yield chunk


def read_bounded(response: requests.Response, limit: int) -> bytes:
    """Read a streaming response's body, refusing more than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    for chunk in body_chunks(response):
        size += len(chunk)
        if size > limit:
            raise Unavailable(Reason.RESPONSE_TOO_LARGE, limit=limit)
        chunks.append(chunk)
    return b"".join(chunks)


def raw_chunks(response: requests.Response, size: int = _CHUNK) -> Iterator[bytes]:
    """A streaming response's body as it arrives, undecoded, at most ``size`` bytes a
    read: a chunked body HTTP chunk by HTTP chunk (urllib3's ``read_chunked``: a
    chunk's bytes are read once, not through a stack of layers per read), any other
    body as each ``recv`` brings it. Each ``recv`` waits at most the socket's timeout,
    as with any read of the connection.

    Ends at the body's clean end; a read timeout is ``DeadlineExpired("timeout")``;
    a reset, an incomplete chunked body or any other failure of the connection is
    :func:`transport_error`'s ``Unavailable``.
    """
    import urllib3.exceptions  # noqa: PLC0415  (loaded with requests, which sent this)

    timeouts = (TimeoutError, urllib3.exceptions.ReadTimeoutError)
    failures = (
        urllib3.exceptions.HTTPError,
        requests_module().RequestException,
        OSError,
        ValueError,
    )
    raw = response.raw
    if getattr(raw, "chunked", False) and raw.supports_chunked_reads():
        read = partial(next, raw.read_chunked(size, decode_content=False), b"")
    else:
        read = partial(raw.read1, size, decode_content=False)
    while True:
        try:
            data = read()
        except timeouts:
            raise DeadlineExpired(Reason.TIMEOUT) from None
        except failures as error:
            raise transport_error(error, response.url) from None
        if not data:
            return
        yield data
