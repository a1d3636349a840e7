"""Daytona's error bodies: the NestJS API filter's and the toolbox daemon's.

Two families (docs/protocols/daytona.md#errors):

* the control plane (``/api``) answers ``{"path", "timestamp", "statusCode",
  "error", "message"}`` where ``error`` is the HTTP reason phrase;
* the toolbox daemon and its proxy answer ``{"statusCode", "message", "code",
  "timestamp", "path", "method"}`` with a prefixed message
  (``"not found: session not found"``).

Handlers raise :class:`ApiError` or :class:`DaemonError`; the emulator turns
them into responses with :func:`api_error_response` / :func:`daemon_error_response`.
"""

from __future__ import annotations

from datetime import datetime, timezone
from http import HTTPStatus

from aiohttp import web

__all__ = [
    "ApiError",
    "DaemonError",
    "api_error_response",
    "daemon_error_response",
    "iso",
]

#: The daemon's error codes and message prefixes (docs/protocols/daytona.md#daemon-error-shape).
DAEMON_CODES: dict[int, tuple[str, str]] = {
    400: ("BAD_REQUEST", "bad request: "),
    401: ("UNAUTHORIZED", ""),
    403: ("FORBIDDEN", ""),
    404: ("NOT_FOUND", "not found: "),
    408: ("REQUEST_TIMEOUT", "request timeout: "),
    409: ("CONFLICT", "conflict: "),
    410: ("GONE", "gone: "),
    422: ("UNPROCESSABLE_ENTITY", ""),
    500: ("INTERNAL_SERVER_ERROR", ""),
}


def iso(moment: datetime) -> str:
    """An ISO-8601 UTC timestamp with milliseconds, as the API writes them."""
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + (
        f"{moment.microsecond // 1000:03d}Z"
    )


class ApiError(Exception):
    """A control-plane error: ``status`` and the Nest ``message``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class DaemonError(Exception):
    """A toolbox error: ``status`` and the message without its prefix.

    ``bare`` errors have no body at all (the daemon aborts some requests with a
    bare status); ``wrapped`` errors are the daemon's wrapped-error 500s whose
    message carries the inner prefix (``failed to execute command: not found: …``).
    A ``code`` makes it one of the daemon's *typed* errors (``FILE_NOT_FOUND``,
    ``FILE_ACCESS_DENIED``): that code, and the message without a prefix.
    """

    def __init__(
        self, status: int, message: str = "", *, bare: bool = False, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.bare = bare
        self.code = code


def api_error_response(request: web.Request, error: ApiError) -> web.Response:
    """The NestJS global filter's JSON body for ``error``."""
    return web.json_response(
        {
            "path": str(request.rel_url),
            "timestamp": iso(datetime.now(timezone.utc)),
            "statusCode": error.status,
            "error": HTTPStatus(error.status).phrase,
            "message": error.message,
        },
        status=error.status,
    )


def daemon_error_response(request: web.Request, error: DaemonError) -> web.Response:
    """The daemon's JSON error body for ``error`` (or no body for a bare one)."""
    if error.bare:
        return web.Response(status=error.status)
    code, prefix = DAEMON_CODES.get(error.status, ("INTERNAL_SERVER_ERROR", ""))
    if error.code is not None:
        code, prefix = error.code, ""
    return web.json_response(
        {
            "statusCode": error.status,
            "message": prefix + error.message,
            "code": code,
            "timestamp": iso(datetime.now(timezone.utc)),
            "path": request.path,
            "method": request.method,
        },
        status=error.status,
    )
