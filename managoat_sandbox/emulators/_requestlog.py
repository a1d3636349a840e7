"""The request log of an emulator: bounded, and free of secrets unless a test opts in.

Every request is logged with its method, path, query and headers; credential
headers and credential-like query parameters are always redacted. Bodies are
not kept unless the emulator was made with ``log_bodies=True`` (tests that
assert on what a client sent opt in): a request body is often a file being
written, secrets included. A kept body is cut to :data:`MAX_BODY` bytes
(``truncated`` says so). The log holds at most :data:`MAX_ENTRIES` entries and
:data:`MAX_BODY_BYTES` bytes of bodies; past either, the oldest entries go.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "LoggedRequest",
    "RequestLog",
    "redact_headers",
    "redact_query",
]

REDACTED = "<redacted>"
SECRET_HEADERS = frozenset(
    {
        "authorization",
        "x-api-key",
        "x-access-token",
        "x-daytona-api-key",
        "x-daytona-preview-token",
        "cookie",
        "proxy-authorization",
    }
)
_SECRET_WORDS = ("token", "key", "signature", "secret", "password", "auth")
#: Bounds of one emulator's log.
MAX_ENTRIES = 10_000
MAX_BODY = 1024 * 1024
MAX_BODY_BYTES = 32 * 1024 * 1024


@attrs.frozen
class LoggedRequest:
    """One request as the emulator saw it; credentials are redacted, and ``body`` is
    empty unless bodies are logged (then at most :data:`MAX_BODY` bytes, ``truncated``
    telling whether more was sent)."""

    method: str
    path: str
    query: tuple[tuple[str, str], ...]
    headers: Mapping[str, str]
    body: bytes = b""
    truncated: bool = False

    def json(self) -> Any:
        """The body parsed as JSON."""
        return json.loads(self.body)


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` with every credential header's value replaced by ``<redacted>``."""
    return {k: (REDACTED if k.lower() in SECRET_HEADERS else v) for k, v in headers.items()}


def redact_query(query: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The query's pairs, with the values of credential-like names redacted."""
    return tuple(
        (k, REDACTED if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in query.items()
    )


class RequestLog:
    """A thread-safe, bounded list of :class:`LoggedRequest`, oldest first."""

    def __init__(
        self, *, max_entries: int = MAX_ENTRIES, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[LoggedRequest] = collections.deque()
        self._body_bytes = 0
        self._max_entries = max_entries
        self._max_body_bytes = max_body_bytes

    def append(self, entry: LoggedRequest) -> None:
        """Log ``entry``, dropping the oldest entries past the bounds."""
        with self._lock:
            self._entries.append(entry)
            self._body_bytes += len(entry.body)
            while self._entries and (
                len(self._entries) > self._max_entries or self._body_bytes > self._max_body_bytes
            ):
                self._body_bytes -= len(self._entries.popleft().body)

    def snapshot(self) -> list[LoggedRequest]:
        """Every entry, oldest first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()
            self._body_bytes = 0
