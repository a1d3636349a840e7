"""Daytona's refinements of the shared status → taxonomy map (``_http.error_for``).

Written once and used by every Daytona call:

* **429** — ``RateLimited.retry_after`` is the largest delay any rate-limit
  header advises: the plain ``Retry-After`` (the failed-auth tracker) and the
  per-throttler ``Retry-After-<throttler>`` headers Daytona's API sends
  (``Retry-After-authenticated``, ``Retry-After-sandbox-create``, …). Without
  such a header, a body ``retryAfter`` that is a non-negative integer is
  honoured (parity with managoat); otherwise ``None``.
* **Toolbox 500 "session not found"** — the daemon wraps its not-found error
  into a 500 for exec into an unknown session; that is ``NotFound``.
* **409 on a lifecycle call** ("Sandbox state change in progress") is
  transient: :func:`conflict_is_transient` turns it into ``Unavailable``.
* **A session exec refused before its command ran** (the session is unknown,
  its shell has exited: 410, or the daemon could not write to it: 400 "failed
  to write command") is told apart by :func:`exec_refused`.
* **A file call refused by file permissions** (bulk download, listing, bulk
  upload) is ``Denied(("path", path))``: :func:`file_error`
  (docs/protocols/daytona.md#refused-by-file-permissions).

Details never carry a credential: bodies are the provider's answer (bounded),
transport failures name the exception type and the endpoint (``host:port``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ... import files
from ..._http import Response, error_for, parse_body, retry_after_from
from ...errors import Invalid, NotFound, RateLimited, SandboxError, Unavailable

__all__ = [
    "conflict_is_transient",
    "error_from",
    "exec_refused",
    "file_error",
    "is_status",
    "not_started",
    "rate_limit_delay",
    "session_ended",
]

_RETRY_AFTER_PREFIX = "retry-after-"


def _header_seconds(value: str) -> float | None:
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
        return None
    return seconds


def rate_limit_delay(headers: Mapping[str, str], body: Any) -> float | None:
    """Seconds a 429 asks for: the max over ``Retry-After`` and ``Retry-After-*``,
    else a non-negative integer body ``retryAfter``, else ``None``."""
    delays: list[float] = []
    plain = retry_after_from(headers)
    if plain is not None:
        delays.append(plain)
    for key, value in headers.items():
        if key.lower().startswith(_RETRY_AFTER_PREFIX):
            seconds = _header_seconds(value)
            if seconds is not None:
                delays.append(seconds)
    if delays:
        return max(delays)
    if isinstance(body, Mapping):
        advised = body.get("retryAfter")
        if isinstance(advised, int) and not isinstance(advised, bool) and advised >= 0:
            return float(advised)
    return None


def _session_not_found(body: Any) -> bool:
    message = body.get("message") if isinstance(body, Mapping) else body
    return isinstance(message, str) and "session not found" in message


def error_from(response: Response) -> SandboxError:
    """The taxonomy error for a non-2xx Daytona answer (API or toolbox)."""
    error = error_for(response.status, response.body, response.headers)
    if response.status == 429:
        parsed = parse_body(response.body, response.headers.get("Content-Type"))
        return RateLimited(rate_limit_delay(response.headers, parsed))
    if response.status == 500 and _session_not_found(error.body):
        return NotFound(error.detail).with_context(status=error.status, request_id=error.request_id)
    return error


def _message(error: SandboxError) -> str:
    body = error.body
    message = body.get("message") if isinstance(body, Mapping) else body
    return message if isinstance(message, str) else ""


def exec_refused(error: SandboxError) -> bool:
    """Whether a session exec was refused before its command ran, because of the session:
    it is unknown (``NotFound`` — deleted, or the daemon restarted), its shell has
    exited (410), or the command could not be written to its shell (400 "failed to
    write command"). Running the command in another session is then safe."""
    if isinstance(error, NotFound) or is_status(error, 410):
        return True
    return is_status(error, 400) and "failed to write command" in _message(error)


def not_started(error: SandboxError) -> bool:
    """Whether the toolbox answered that the sandbox is not running (the runner's 400
    "… no IP address found. Is the Sandbox started?"): the request reached no daemon."""
    return is_status(error, 400) and "sandbox started" in _message(error).lower()


def session_ended(error: SandboxError) -> bool:
    """Whether a sync session exec failed because the session's shell ended (or the
    session was cancelled) while the command ran: a 400 about the session."""
    return is_status(error, 400) and "session" in _message(error)


#: The bulk download's error-part code for a file its daemon may not read.
_FILE_ACCESS_DENIED = "FILE_ACCESS_DENIED"


def file_error(error: SandboxError, path: str) -> SandboxError:
    """``error`` of a file call on ``path``, refined: ``Denied(("path", path))`` when the
    daemon was refused by file permissions — a 403 ``FILE_ACCESS_DENIED`` error part,
    or a 400, 403 or 500 whose ``message`` (an entry of a bulk upload's ``errors``,
    the text of an older daemon's plain-text answer) says "permission denied" or
    "operation not permitted"; else ``error`` unchanged."""
    body = error.body
    if error.status not in (400, 403, 500):
        return error
    if isinstance(body, Mapping):
        listed = body.get("errors")
        texts = [body.get("message"), *(listed if isinstance(listed, list) else [])]
        access_denied = error.status == 403 and body.get("code") == _FILE_ACCESS_DENIED
    else:
        texts, access_denied = [body], False
    if access_denied or any(files.refused(text) for text in texts):
        return files.denied(path).with_context(status=error.status, request_id=error.request_id)
    return error


def is_status(error: SandboxError, status: int) -> bool:
    """Whether ``error`` came from an HTTP answer with ``status``."""
    return error.status == status


def conflict_is_transient(error: SandboxError) -> SandboxError:
    """A 409 (a state transition in progress) as ``Unavailable``; anything else unchanged."""
    if isinstance(error, Invalid) and is_status(error, 409):
        return Unavailable(error.detail).with_context(
            status=error.status, request_id=error.request_id
        )
    return error
