"""HTTP shared by every HTTP adapter: pooled sessions, bounded bodies, status → taxonomy.

One place decides how an HTTP answer becomes an error
(docs/protocols/contract.md#http-status-mapping):

* 404 → ``NotFound``; 401/403 → ``Denied``; 429 → ``RateLimited``; a 503's
  ``Retry-After`` (as urllib3 honours it) becomes ``Unavailable.retry_after``;
  >= 500 → ``Unavailable``; any other non-2xx (3xx included: redirects are
  never followed) → ``Invalid``;
* connection errors and resets → ``Unavailable(("transport", kind, "host:port"))``
  (:func:`transport_error`: the endpoint, never the URL's userinfo, path or
  query); read timeouts → ``DeadlineExpired("timeout")`` (an ``Unavailable``);
* the detail is ``("http", status, body)``, the body parsed as JSON when it
  is JSON, else text, bounded to 64 KiB;
* ``RateLimited.retry_after`` comes from the provider's body field when it has
  one, else the ``Retry-After`` header (delta-seconds or HTTP-date).

Every provider sends through :meth:`HttpClient.send` (a fully read answer) or
:meth:`HttpClient.open` (a streamed one): the request, the transport failure
mapping and the status mapping are done here, with the provider's
:class:`ErrorPolicy` (its ``retry_after`` body field, its status refinements)
passed in. A provider answer of the wrong shape is :func:`unexpected`.

Adapters refine the map only where their provider needs it. Requests carry
explicit connect/read timeouts and bodies are read with a cap, so a broken or
hostile server can neither hang a caller forever nor make it allocate without
limit. Credentials live in headers, which are never logged or put in errors.
"""

from __future__ import annotations

import email.utils
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs

from . import reasons
from ._prepare import prepared
from ._secrets import credentials_in, scrub_bytes
from .errors import (
    DeadlineExpired,
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    RateLimited,
    SandboxError,
    Unavailable,
)

if TYPE_CHECKING:
    import requests

__all__ = [
    "BODY_LIMIT",
    "ErrorPolicy",
    "HttpClient",
    "Response",
    "endpoint",
    "error_for",
    "interrupt",
    "parse_body",
    "requests_module",
    "retry_after_from",
    "set_read_timeout",
    "transport_error",
    "unexpected",
]

#: The port a URL of each scheme means when it names none.
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}

#: The largest response body read into memory (and kept in an error detail).
BODY_LIMIT = 64 * 1024
_CHUNK = 16 * 1024


@attrs.frozen
class Response:
    """A fully read, size-bounded HTTP response."""

    status: int
    headers: Mapping[str, str] = attrs.field(repr=False)
    body: bytes = attrs.field(repr=False)

    @property
    def ok(self) -> bool:
        """True for a 2xx status."""
        return 200 <= self.status < 300

    def json(self) -> Any:
        """The body parsed as JSON; a body that does not parse (torn, or not JSON at all)
        is ``Unavailable(("malformed_json", status))``, as a torn transfer is."""
        try:
            return json.loads(self.body)
        except ValueError:
            raise Unavailable(("malformed_json", self.status)) from None


def parse_body(body: bytes, content_type: str | None = None) -> Any:
    """The body as JSON if it parses, else as text (both bounded to 64 KiB)."""
    body = body[:BODY_LIMIT]
    if body[:1] in (b"{", b"[") or (content_type or "").startswith("application/json"):
        try:
            return json.loads(body)
        except ValueError:
            pass
    return body.decode("utf-8", errors="replace")


def _seconds(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if math.isnan(value) or math.isinf(value) or value < 0:
        return None
    return float(value)


def retry_after_from(
    headers: Mapping[str, str], body: Any = None, field: str | None = None
) -> float | None:
    """Seconds to wait: the body's ``field`` if valid, else ``Retry-After``; else None."""
    if field is not None and isinstance(body, Mapping):
        found = _seconds(body.get(field))
        if found is not None:
            return found
    header = headers.get("Retry-After") or headers.get("retry-after")
    if header is None:
        return None
    header = header.strip()
    try:
        return _seconds(float(header))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(header)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def error_for(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    retry_after_field: str | None = None,
) -> SandboxError:
    """The taxonomy error for a non-2xx answer (see the module docstring), carrying the
    answer's ``status`` and ``request_id`` as context."""
    return _mapped(status, body, headers, retry_after_field).with_context(
        status=status, request_id=request_id_from(headers)
    )


def _mapped(
    status: int, body: bytes, headers: Mapping[str, str], retry_after_field: str | None
) -> SandboxError:
    parsed = parse_body(body, headers.get("Content-Type") or headers.get("content-type"))
    detail = (reasons.HTTP, status, parsed)
    if status == 404:
        return NotFound(detail)
    if status in (401, 403):
        return Denied(detail)
    if status == 429:
        return RateLimited(retry_after_from(headers, parsed, retry_after_field))
    if status >= 500:
        advice = retry_after_from(headers, parsed, retry_after_field) if status == 503 else None
        return Unavailable(detail, retry_after=advice)
    return Invalid(detail)


#: Headers a provider's request id may come in, most specific first.
REQUEST_ID_HEADERS = ("X-Request-Id", "Request-Id", "Fly-Request-Id", "X-Amzn-RequestId")
#: The longest request id kept (a hostile server cannot fill an error with text).
_REQUEST_ID_LIMIT = 128


def request_id_from(headers: Mapping[str, str]) -> str | None:
    """The provider's id of the request an answer belongs to, when it sent one: the
    first of :data:`REQUEST_ID_HEADERS` present, if printable and at most 128
    characters."""
    lowered = {key.lower(): value for key, value in headers.items()}
    for name in REQUEST_ID_HEADERS:
        value = lowered.get(name.lower())
        if value and len(value) <= _REQUEST_ID_LIMIT and value.isprintable():
            return value
    return None


def is_success(status: int) -> bool:
    """True for a 2xx status: what :meth:`HttpClient.send` accepts unless told otherwise."""
    return 200 <= status < 300


@attrs.frozen
class ErrorPolicy:
    """One provider's refinements of :func:`error_for`.

    ``provider`` names it in a :func:`unexpected` answer; ``retry_after_field``
    is the body field that advises a delay on a 429 or 503; ``refine``, when
    given, maps an answer by the provider's own rules instead (it is expected to
    build on :func:`error_for` for every status it does not special-case).
    """

    provider: str
    retry_after_field: str | None = None
    refine: Callable[[Response], SandboxError] | None = None

    def error(self, response: Response) -> SandboxError:
        """The taxonomy error for a non-accepted ``response``."""
        if self.refine is not None:
            return self.refine(response)
        return error_for(
            response.status,
            response.body,
            response.headers,
            retry_after_field=self.retry_after_field,
        )


def unexpected(provider: str, what: str, answer: object) -> ProviderError:
    """A well-formed answer of the wrong shape (a list where an object was due, a
    missing field): ``ProviderError(provider, (what, <type of answer>))``.

    Every provider maps such an answer to this one error; the detail names the
    answer's type, never its content (which could echo anything). A body that is
    not JSON at all is :meth:`Response.json`'s ``Unavailable(("malformed_json", status))``.
    """
    return ProviderError(provider, (what, type(answer).__name__))


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
        return DeadlineExpired(reasons.TIMEOUT)
    return Unavailable((reasons.TRANSPORT, type(error).__name__, endpoint(url)))


class HttpClient:
    """Pooled HTTP for one adapter instance: one ``requests.Session`` per thread.

    There is no default timeout: every call gives its own ``(connect, read)``
    seconds. Redirects are never followed. Bodies over ``limit`` bytes are refused as
    ``Unavailable(("response_too_large", limit))``.
    """

    def __init__(self, *, user_agent: str = "managoat_sandbox") -> None:
        self._local = threading.local()
        self._user_agent = user_agent

    def release(self) -> None:
        """Close this thread's pooled session, if it has one (a reader thread ending)."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is not None:
            session.close()
            self._local.session = None

    def session(self) -> requests.Session:
        """This thread's pooled session: its transport adapters (the connection pools)
        and default headers. Requests never go through ``Session.request``
        (:meth:`stream`), so its environment settings, cookies and hooks play no part."""
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = requests_module().Session()
            session.headers["User-Agent"] = self._user_agent
            self._local.session = session
        return session

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
        ``PreparedRequest.prepare`` would find nothing to do in) and handed
        straight to the session's transport adapter: none of what
        ``Session.request`` adds applies here (cookies, hooks, redirects,
        environment settings), and skipping it saves about a quarter of a
        millisecond per request (docs/performance.md). Transport failures while
        connecting are ``Unavailable``.
        """
        requests = requests_module()
        session = self.session()
        try:
            request = prepared(
                requests, method, url, {**session.headers, **(headers or {})}, kwargs
            )
            response = session.get_adapter(url).send(request, stream=True, timeout=timeout)
        except requests.RequestException as error:
            raise transport_error(error, url) from None
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
        with self.stream(method, url, timeout=timeout, headers=headers, **kwargs) as response:
            if not accept(response.status_code):
                body = read_bounded(response, BODY_LIMIT)
                answer = Response(response.status_code, dict(response.headers), body)
                raise policy.error(_scrubbed(answer, headers))
            yield response


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
            raise Unavailable((reasons.RESPONSE_TOO_LARGE, limit))
        chunks.append(chunk)
    return b"".join(chunks)


def _socket_of(response: requests.Response) -> socket.socket | None:
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None


def set_read_timeout(response: requests.Response, seconds: float) -> None:
    """Bound each further read of a streaming ``response`` to ``seconds`` (if it has a socket)."""
    sock = _socket_of(response)
    if sock is not None:
        with suppress(OSError):
            sock.settimeout(max(seconds, 0.001))


def interrupt(response: requests.Response) -> None:
    """Unblock a read of a streaming ``response`` in another thread: shut its socket down."""
    sock = _socket_of(response)
    if sock is not None:
        with suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
