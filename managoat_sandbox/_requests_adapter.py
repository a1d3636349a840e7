"""The transport adapter a :class:`~._transport.RequestsTransport` session mounts:
``requests``' own ``HTTPAdapter``, with less work per request.

``send`` is ``HTTPAdapter.send``, inherited untouched, so anything that patches
it intercepts these requests exactly as it would a stock adapter's: ``responses``
(which replaces ``HTTPAdapter.send`` on the class) mocks them, and its
pass-through sends them through the hooks below. Only the hooks ``send`` calls,
which ``requests`` exposes for subclasses, are narrowed, and each is requests' own
whenever its arguments are not the ones the transport passes (no proxies, the
default certificate verification, no client certificate):

* ``get_connection_with_tls_context``: the pool of a URL is keyed once per URL,
  for the last :data:`REMEMBERED` URLs (requests' own
  ``build_connection_pool_key_attributes``, then the request context and pool key
  urllib3's ``PoolManager.connection_from_host`` would make of them), instead of
  parsing the URL three times and building the key anew per request; the pool is
  still asked of the pool manager by that key each time
  (``connection_from_pool_key``), so its least-recently-used order is kept and a
  pool it has discarded is replaced as usual;
* ``request_url``: that remembered path;
* ``build_response``: an answer that sets no cookie (no ``Set-Cookie`` header) is
  not handed to the cookie parser, which would find nothing; any other answer is
  built by requests.

:meth:`DirectAdapter.send_plain` sends a :class:`~._prepare.Plain` request, one
that ``prepare`` would send as it is, by the same steps as ``send`` (the hooks
above, urllib3's ``urlopen`` with the same arguments, ``build_response``) but
without building its ``PreparedRequest`` first: its headers go to urllib3 as the
plain ``dict`` they are, which urllib3 copies and walks at C speed where it walks
a ``CaseInsensitiveDict`` in Python (30-35 µs less before the request leaves, on
the benchmark machine: docs/performance.md).
A failure is the exception ``send`` raises for it (:func:`_requests_error`). The
transport uses it only while ``send`` is requests' own (:func:`requests_sends`):
whatever replaces ``HTTPAdapter.send`` (``responses``, a ``mock.patch``) sees every
request, as a ``PreparedRequest``, through ``send``.

Imported with ``requests``, on a transport's first request (:mod:`._transport`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import requests
import requests.adapters
import urllib3.exceptions
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers
from urllib3 import BaseHTTPResponse, HTTPHeaderDict, PoolManager
from urllib3.connectionpool import ConnectionPool, port_by_scheme
from urllib3.util import Timeout

from ._prepare import Plain

__all__ = ["REMEMBERED", "DirectAdapter", "requests_sends"]

#: The file ``HTTPAdapter.send`` is defined in, when it is requests' own.
_SEND_FILE = requests.adapters.__file__
#: ``HTTPAdapter.send`` as :func:`requests_sends` last found it to be requests' own.
_own_send: list[object] = []


def requests_sends() -> bool:
    """Whether ``HTTPAdapter.send`` is requests' own function, as requests defines it:
    not a replacement (``responses`` puts one there to mock requests; a ``mock.patch``
    does, a wrapper that keeps the name does not keep the code)."""
    send = HTTPAdapter.send
    if _own_send and send is _own_send[0]:
        return True
    code = getattr(send, "__code__", None)
    own = (
        code is not None
        and code.co_name == "send"
        and code.co_filename == _SEND_FILE
        and getattr(send, "__qualname__", None) == "HTTPAdapter.send"
        and not hasattr(send, "__wrapped__")
    )
    if own:
        _own_send[:] = [send]
    return own


def _prepared(request: Plain) -> requests.PreparedRequest:
    """The ``PreparedRequest`` of ``request``, its headers the ``dict`` it is sent with."""
    prepared = requests.PreparedRequest()
    prepared.method, prepared.url, prepared.body = request.method, request.url, request.body
    prepared.headers = request.headers  # type: ignore[assignment]  # as sent
    return prepared


def _requests_error(error: Exception) -> Exception:
    """The exception ``HTTPAdapter.send`` raises when urllib3's ``urlopen`` raised
    ``error`` (requests' class for it, whose name is a taxonomy error's ``kind``;
    ``error`` itself when ``send`` lets it through)."""
    failed = requests.exceptions
    if isinstance(error, (urllib3.exceptions.ProtocolError, OSError)):
        return failed.ConnectionError(error)
    if isinstance(error, urllib3.exceptions.MaxRetryError):
        reason = error.reason
        if isinstance(reason, urllib3.exceptions.ConnectTimeoutError) and not isinstance(
            reason, urllib3.exceptions.NewConnectionError
        ):
            return failed.ConnectTimeout(error)
        if isinstance(reason, urllib3.exceptions.ResponseError):
            return failed.RetryError(error)
        if isinstance(reason, urllib3.exceptions.ProxyError):
            return failed.ProxyError(error)
        if isinstance(reason, urllib3.exceptions.SSLError):
            return failed.SSLError(error)
        return failed.ConnectionError(error)
    if isinstance(error, urllib3.exceptions.ClosedPoolError):
        return failed.ConnectionError(error)
    if isinstance(error, urllib3.exceptions.ProxyError):
        return failed.ProxyError(error)
    if isinstance(error, urllib3.exceptions.SSLError):
        return failed.SSLError(error)
    if isinstance(error, urllib3.exceptions.ReadTimeoutError):
        return failed.ReadTimeout(error)
    if isinstance(error, urllib3.exceptions.InvalidHeader):
        return failed.InvalidHeader(error)
    return error


#: How many URLs an adapter remembers the pool key and path of (all are forgotten
#: when one more comes: the URLs of a sandbox's calls are few and repeat).
REMEMBERED = 64


@attrs.frozen
class _Route:
    """How a URL is sent: its pool's ``key`` in ``manager``, the request ``context``
    a new pool for it is made from (copied for each use: urllib3 edits it), and the
    ``path`` sent."""

    manager: PoolManager
    key: Any
    context: Mapping[str, Any]
    path: str


class DirectAdapter(HTTPAdapter):
    """``HTTPAdapter`` with the per-request hooks narrowed (see the module docstring).

    Each transport session mounts its own; shared between threads, the worst that can
    happen to its memory of URLs is that a route is worked out twice.
    """

    def __init__(self) -> None:
        super().__init__()
        self._routes: dict[str, _Route] = {}
        self._timeouts: dict[tuple[float, float], Timeout] = {}

    def send_plain(self, request: Plain, timeout: tuple[float, float]) -> requests.Response:
        """``request`` sent and its answer returned unread, as ``send`` (streaming, with
        ``timeout`` as ``(connect, read)`` seconds) sends and returns its
        ``PreparedRequest``; see the module docstring. The answer's ``request`` is a
        ``PreparedRequest`` whose headers are the ``dict`` that was sent."""
        route = self._routes.get(request.url)
        if route is None or route.manager is not self.poolmanager:
            route = self._route(_prepared(request))
            if route is None:
                return self.send(_prepared(request), stream=True, timeout=timeout)
        pool = route.manager.connection_from_pool_key(
            route.key, request_context=dict(route.context)
        )
        self.cert_verify(pool, request.url, True, None)  # type: ignore[no-untyped-call]
        timeouts = self._timeouts.get(timeout)
        if timeouts is None:
            if len(self._timeouts) >= REMEMBERED:
                self._timeouts.clear()
            timeouts = self._timeouts[timeout] = Timeout(connect=timeout[0], read=timeout[1])
        try:
            answer = pool.urlopen(
                method=request.method,
                url=route.path,
                body=request.body,
                headers=request.headers,
                redirect=False,
                assert_same_host=False,
                preload_content=False,
                decode_content=False,
                retries=self.max_retries,
                timeout=timeouts,
                chunked=False,
            )
        except Exception as error:
            mapped = _requests_error(error)
            if mapped is error:
                raise
            raise mapped from error
        return self.build_response(_prepared(request), answer)

    def _route(self, request: requests.PreparedRequest) -> _Route | None:
        """The route of ``request``'s URL (remembered); ``None`` when requests or urllib3
        cannot key it (requests' own hook then raises their error)."""
        url = request.url
        if url is None:
            return None
        manager: PoolManager = self.poolmanager
        route = self._routes.get(url)
        if route is not None and route.manager is manager:
            return route
        try:
            host, pool = self.build_connection_pool_key_attributes(request, True)
        except ValueError:
            return None
        # What PoolManager.connection_from_host makes of them: the manager's pool
        # keywords with these over them (None removes one), then scheme, port, host.
        context = dict(manager.connection_pool_kw)
        for name, value in pool.items():
            if value is None:
                context.pop(name, None)
            else:
                context[name] = value
        scheme = host["scheme"] or "http"
        key_of = manager.key_fn_by_scheme.get(scheme.lower())
        if not host["host"] or key_of is None:
            return None
        port = host["port"]
        context["scheme"] = scheme
        context["port"] = port_by_scheme.get(scheme.lower(), 80) if port is None else port
        context["host"] = host["host"]
        if len(self._routes) >= REMEMBERED:
            self._routes.clear()
        route = self._routes[url] = _Route(manager, key_of(context), context, request.path_url)
        return route

    def get_connection_with_tls_context(
        self,
        request: requests.PreparedRequest,
        verify: bool | str | None,
        proxies: Mapping[str, str] | None = None,
        cert: tuple[str, str] | str | None = None,
    ) -> ConnectionPool:
        """The pool for ``request``, by its remembered route when the call is the
        transport's (see the module docstring); otherwise requests' own."""
        route = None if proxies or verify is not True or cert is not None else self._route(request)
        if route is None:
            return super().get_connection_with_tls_context(
                request, verify, proxies=proxies, cert=cert
            )
        found: ConnectionPool = route.manager.connection_from_pool_key(
            route.key, request_context=dict(route.context)
        )
        return found

    def request_url(
        self, request: requests.PreparedRequest, proxies: Mapping[str, str] | None
    ) -> str:
        """The remembered path of ``request``'s URL when no proxy is given (what requests
        sends then); otherwise requests' own answer."""
        route = None if proxies or request.url is None else self._routes.get(request.url)
        if route is None:
            return super().request_url(request, proxies)
        return route.path

    def build_response(
        self, req: requests.PreparedRequest, resp: BaseHTTPResponse
    ) -> requests.Response:
        """The ``requests.Response`` of urllib3's answer ``resp``, as requests builds it;
        an answer that sets no cookie skips the cookie parser (its jar stays empty, as
        the parser would leave it)."""
        headers = getattr(resp, "headers", None)
        if not isinstance(headers, HTTPHeaderDict) or "Set-Cookie" in headers:
            return super().build_response(req, resp)
        response = requests.Response()
        response.status_code = resp.status
        response.headers = CaseInsensitiveDict(headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = resp
        response.reason = resp.reason  # type: ignore[assignment]  # as requests sets them
        response.url = req.url  # type: ignore[assignment]
        response.request = req
        response.connection = self
        return response
