"""Sprites' special cases on top of the shared status → taxonomy map (:mod:`.._http`).

* ``retry_after`` comes from the body's ``retry_after_seconds``, else the
  ``Retry-After`` header (body first, then header: docs/protocols/sprites.md#rate-limit-advice);
* a refused WebSocket upgrade is mapped like any HTTP answer (a 503 while a
  fresh sprite boots is therefore ``Unavailable``, which is transient);
* the bounded "once" operations drop the provider's body (``sanitised``), so
  provider prose never reaches a caller or a log;
* transport failures name their kind and the endpoint (``host:port``), never
  a URL or a header.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import websocket

from ... import reasons
from ..._http import ErrorPolicy, Response, transport_error
from ...errors import DeadlineExpired, SandboxError, Unavailable

__all__ = [
    "POLICY",
    "PROVIDER",
    "RETRY_AFTER_FIELD",
    "http_error",
    "sanitised",
    "transport",
    "upgrade_error",
]

PROVIDER = "sprites"
RETRY_AFTER_FIELD = "retry_after_seconds"
#: How :meth:`~.._http.HttpClient.send` maps a Sprites answer it refuses.
POLICY = ErrorPolicy(PROVIDER, retry_after_field=RETRY_AFTER_FIELD)


def http_error(response: Response) -> SandboxError:
    """The taxonomy error for a non-2xx REST answer (:data:`POLICY`)."""
    return POLICY.error(response)


def sanitised(status: int) -> SandboxError:
    """The taxonomy error for a status with the body dropped (``{}``) and no advice.

    401 → ``Denied(("http", 401, {}))``, 429 → ``RateLimited(None)``,
    503 → ``Unavailable(("http", 503, {}))``, 302 → ``Invalid(("http", 302, {}))``.
    """
    return POLICY.error(Response(status, {}, b"{}"))


def upgrade_error(error: Any, url: str) -> SandboxError:
    """A refused upgrade (``WebSocketBadStatusException``) of ``url`` as a taxonomy error."""
    headers: Mapping[str, str] = getattr(error, "resp_headers", None) or {}
    body = getattr(error, "resp_body", None) or b""
    if isinstance(body, str):
        body = body.encode("utf-8", errors="replace")
    status = getattr(error, "status_code", None)
    if not isinstance(status, int):
        return transport(error, url)
    return POLICY.error(Response(status, headers, body))


def transport(error: BaseException, url: str) -> Unavailable:
    """A transport failure (requests, websocket or socket) talking to ``url`` as
    ``Unavailable``: ``"timeout"``, else :func:`.._http.transport_error`'s detail."""
    if isinstance(error, websocket.WebSocketTimeoutException):
        return DeadlineExpired(reasons.TIMEOUT)
    return transport_error(error, url)
