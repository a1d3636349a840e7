"""E2B's refinements of the shared status → taxonomy map (``_http.error_for``).

* A 429's ``RateLimited.retry_after`` comes from the body field
  ``retryAfterSeconds`` when it is a non-negative number, else from the
  ``Retry-After`` header (real E2B sends only the header).
* An error carried by a Connect end-of-stream envelope (HTTP 200) is mapped
  through Connect's code → status table, so a streaming ``not_found`` means
  what a unary ``not_found`` (HTTP 404) means; an error value that is not a
  ``{"code": …}`` object is a ``ProviderError``.
* A malformed envelope stream is a ``ProviderError``.
* On the file calls (``POST /files``, ``GET /files``, ``ListDir``), mapped by
  :func:`files_policy`, which knows the path: a path that leads through a
  file is the caller's mistake, ``Invalid`` (never retried), as on every
  other adapter: envd answers it with a 500 (Connect ``internal``) whose
  message ends in Go's text for ``ENOTDIR`` (docs/protocols/e2b.md#files-api);
  a path the sandbox's user may not read, list or write is
  ``Denied(("path", path))``: envd answers a refused ``open`` with a 500
  (Connect ``internal``) whose message holds Go's text for ``EACCES`` or
  ``EPERM``, and a 403 (Connect ``permission_denied``) says so too
  (docs/protocols/e2b.md#refused-by-file-permissions).

Details never hold a credential: bodies are the provider's answer, and URLs
and headers are never put in an error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ... import files
from ..._http import ErrorPolicy, Response, error_for
from ...errors import Invalid, ProviderError, SandboxError
from ...reasons import Reason

__all__ = [
    "POLICY",
    "PROVIDER",
    "RETRY_AFTER_FIELD",
    "codec_error",
    "connect_error",
    "files_policy",
]

PROVIDER = "e2b"
RETRY_AFTER_FIELD = "retryAfterSeconds"
#: How :meth:`~.._http.HttpClient.send` maps an answer of the control plane or envd.
POLICY = ErrorPolicy(PROVIDER, retry_after_field=RETRY_AFTER_FIELD)

#: How envd ends the message of the 500 it answers for a path through a file: Go's
#: text for ``ENOTDIR`` (``stat <path>: not a directory``, or bare from its symlink
#: walk).
NOT_A_DIRECTORY = ": not a directory"


def _file_error(response: Response, path: str) -> SandboxError:
    error = error_for(
        response.status, response.body, response.headers, retry_after_field=RETRY_AFTER_FIELD
    )
    body = error.body
    message = body.get("message") if isinstance(body, Mapping) else None
    if response.status == 403 or (response.status == 500 and files.refused(message)):
        return files.denied(path).with_context(status=error.status, request_id=error.request_id)
    if response.status == 500 and isinstance(message, str) and message.endswith(NOT_A_DIRECTORY):
        return Invalid(error.detail).with_context(status=error.status, request_id=error.request_id)
    return error


def files_policy(path: str) -> ErrorPolicy:
    """:data:`POLICY` for a file call on ``path`` (see the module docstring): a path
    through a file is ``Invalid``, one the sandbox's user may not use ``Denied(("path",
    path))``."""
    return ErrorPolicy(
        PROVIDER,
        retry_after_field=RETRY_AFTER_FIELD,
        refine=lambda response: _file_error(response, path),
    )


#: Connect error codes and the HTTP status a unary call answers with each.
CONNECT_STATUS: Mapping[str, int] = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}


def connect_error(error: Any) -> SandboxError:
    """The taxonomy error for the ``error`` of a Connect end-of-stream envelope."""
    if isinstance(error, Mapping):
        status = CONNECT_STATUS.get(str(error.get("code")))
        if status is not None:
            body = json.dumps(error).encode("utf-8")
            return error_for(
                status,
                body,
                {"Content-Type": "application/json"},
                retry_after_field=RETRY_AFTER_FIELD,
            )
    return ProviderError(
        PROVIDER,
        Reason.BAD_ENVELOPE,
        problem=f"the end-of-stream error ({type(error).__name__}) has no Connect code",
    )


def codec_error(reason: str) -> ProviderError:
    """A broken envelope stream."""
    return ProviderError(PROVIDER, Reason.BAD_ENVELOPE, problem=reason)
