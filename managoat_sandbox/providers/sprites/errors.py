"""Sprites' special cases on top of the shared status → taxonomy map (:mod:`.._http`).

* ``retry_after`` comes from the body's ``retry_after_seconds``, else the
  ``Retry-After`` header (body first, then header: docs/protocols/sprites.md#rate-limit-advice);
* a refused WebSocket upgrade is mapped like any HTTP answer
  (:func:`.._http.open_websocket`; a 503 while a fresh sprite boots is
  therefore ``Unavailable``, which is transient);
* the bounded "once" operations drop the provider's body (``sanitised``), so
  provider prose never reaches a caller or a log;
* transport failures name their kind and the endpoint (``host:port``), never
  a URL or a header;
* a failed filesystem call (``fs/read``, ``fs/list``, ``fs/write``) is mapped
  by :func:`file_error`, which knows the path: its error body
  ``{"error": text, "code": errno name, "path"}`` (the code may be missing,
  e.g. on 404) is read as the vendor's SDKs read it, whatever the status, which
  the vendor does not document for these (docs/protocols/sprites.md#files).
"""

from __future__ import annotations

from ... import files
from ..._http import ErrorPolicy, Response, parse_body
from ...errors import Invalid, SandboxError

__all__ = [
    "POLICY",
    "PROVIDER",
    "RETRY_AFTER_FIELD",
    "file_error",
    "http_error",
    "sanitised",
]

PROVIDER = "sprites"
RETRY_AFTER_FIELD = "retry_after_seconds"
#: How :meth:`~.._http.HttpClient.send` maps a Sprites answer it refuses.
POLICY = ErrorPolicy(PROVIDER, retry_after_field=RETRY_AFTER_FIELD)


#: The errno names of a refusal by file permissions.
_REFUSED_CODES = frozenset({"EACCES", "EPERM"})
#: The errno names of a path of the wrong kind, and how the SDKs find them in the text.
_WRONG_KIND = {"EISDIR": "is a directory", "ENOTDIR": "not a directory"}


def http_error(response: Response) -> SandboxError:
    """The taxonomy error for a non-2xx REST answer (:data:`POLICY`)."""
    return POLICY.error(response)


def file_error(response: Response, path: str) -> SandboxError:
    """The taxonomy error for a non-2xx answer of a filesystem call on ``path``.

    404 is ``NotFound``; a body naming ``EACCES`` or ``EPERM`` (as its
    ``code``, or Go's "permission denied" / "operation not permitted" in its
    text) is ``Denied(("path", path))`` — the sandbox's user may not do that
    to the path; a body naming ``EISDIR`` or ``ENOTDIR`` (as its ``code``, or
    "is a directory" / "not a directory" in its text, as the SDKs recognise
    them) is ``Invalid``; anything else is :func:`http_error`'s answer. A 401
    stays the credential's ``Denied(("http", 401, body))``.
    """
    error = http_error(response)
    if response.status in (401, 404):
        return error
    parsed = parse_body(response.body, response.headers.get("Content-Type"))
    if not isinstance(parsed, dict):
        return error
    code = parsed.get("code")
    text = " ".join(str(parsed.get(key, "")) for key in ("error", "message"))
    if code in _REFUSED_CODES or files.refused(text):
        return files.denied(path).with_context(status=error.status, request_id=error.request_id)
    if code in _WRONG_KIND or any(words in text.lower() for words in _WRONG_KIND.values()):
        return Invalid(error.detail, message=error.message).with_context(
            status=error.status, request_id=error.request_id
        )
    return error


def sanitised(status: int) -> SandboxError:
    """The taxonomy error for a status with the body dropped (``{}``) and no advice.

    401 → ``Denied(("http", 401, {}))``, 429 → ``RateLimited(None)``,
    503 → ``Unavailable(("http", 503, {}))``, 302 → ``Invalid(("http", 302, {}))``.
    """
    return POLICY.error(Response(status, {}, b"{}"))
