"""How an HTTP answer becomes an error: the one status → taxonomy policy.

(docs/protocols/contract.md#http-status-mapping):

* 404 → ``NotFound``; 401/403 → ``Denied``; 429 → ``RateLimited``; a 503's
  ``Retry-After`` (as urllib3 honours it) becomes ``Unavailable.retry_after``;
  >= 500 → ``Unavailable``; any other non-2xx (3xx included: redirects are
  never followed) → ``Invalid``;
* the detail is ``("http", status, body)``, the body parsed as JSON when it
  is JSON, else text, bounded to 64 KiB;
* ``RateLimited.retry_after`` comes from the provider's body field when it has
  one, else the ``Retry-After`` header (delta-seconds or HTTP-date).

A provider refines the map only where it needs to, with an :class:`ErrorPolicy`
(its ``retry_after`` body field, its status refinements). Every answer the
library refuses — a plain HTTP answer (:meth:`.._http.HttpClient.send` and
``open``) or a refused WebSocket upgrade (:func:`.._http.open_websocket`) — is
mapped here, once. A provider answer of the wrong shape is :func:`unexpected`.
How a *transport* failure (no answer at all) becomes an error is the
transport's: :func:`.._transport.transport_error`.
"""

from __future__ import annotations

import email.utils
import json
import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .errors import (
    Denied,
    Invalid,
    NotFound,
    ProviderError,
    RateLimited,
    SandboxError,
    Unavailable,
)
from .reasons import Reason

__all__ = [
    "BODY_LIMIT",
    "REQUEST_ID_HEADERS",
    "ErrorPolicy",
    "Response",
    "error_for",
    "is_success",
    "parse_body",
    "request_id_from",
    "retry_after_from",
    "unexpected",
]

#: The largest response body read into memory (and kept in an error detail).
BODY_LIMIT = 64 * 1024


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
            raise Unavailable(Reason.MALFORMED_JSON, status=self.status) from None


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
    if status == 404:
        return NotFound(Reason.HTTP, status=status, body=parsed)
    if status in (401, 403):
        return Denied(Reason.HTTP, status=status, body=parsed)
    if status == 429:
        return RateLimited(retry_after_from(headers, parsed, retry_after_field))
    if status >= 500:
        advice = retry_after_from(headers, parsed, retry_after_field) if status == 503 else None
        return Unavailable(Reason.HTTP, status=status, body=parsed, retry_after=advice)
    return Invalid(Reason.HTTP, status=status, body=parsed)


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
    """True for a 2xx status: what :meth:`.._http.HttpClient.send` accepts unless told
    otherwise."""
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


def unexpected(provider: str, what: Reason, answer: object) -> ProviderError:
    """A well-formed answer of the wrong shape (a list where an object was due, a
    missing field): ``ProviderError(provider, (what, <type of answer>))``.

    Every provider maps such an answer to this one error; ``what`` is a reason that
    carries an ``answer``, and the detail names the answer's type, never its content
    (which could echo anything). A body that is not JSON at all is
    :meth:`Response.json`'s ``Unavailable(("malformed_json", status))``.
    """
    return ProviderError(provider, what, answer=type(answer).__name__)
