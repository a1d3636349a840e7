"""The request log of an emulator: bounded, free of secrets, and only of the authenticated.

Every request that carries the emulator's credential is logged with its
method, path, query and headers, redacted by :func:`redact_request`, the one
place that decides what the log keeps of a secret:

* a header or query parameter whose *name* looks like a credential's
  (:func:`managoat_sandbox._secrets.credential_like`, the library's one rule
  for that) has its value replaced by ``<redacted>``;
* every occurrence of a *value* that is a live credential (the emulator's
  own, and the tokens it issued to its sandboxes) is replaced by
  ``<redacted>`` wherever it stands: in a header's name or value, a query
  parameter's name or value, or the path.

Requests without a valid credential are not logged, only counted
(:attr:`RequestLog.unauthenticated`), so that whoever reaches the port cannot
push real entries out. Bodies are not kept unless the emulator was made with
``log_bodies=True`` (tests that assert on what a client sent opt in): a
request body is often a file being written, secrets included. A kept body is
cut to :data:`MAX_BODY` bytes (``truncated`` says so). The log holds at most
:data:`MAX_ENTRIES` entries and :data:`MAX_BODY_BYTES` bytes of bodies; past
either, the oldest entries go.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .._secrets import CREDENTIAL_STEMS, CREDENTIAL_WORDS, credential_like

__all__ = [
    "CREDENTIAL_STEMS",
    "CREDENTIAL_WORDS",
    "REDACTED",
    "LoggedRequest",
    "RequestLog",
    "credential_like",
    "redact_request",
]

REDACTED = "<redacted>"
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


def redact_request(
    method: str,
    path: str,
    query: Iterable[tuple[str, str]],
    headers: Mapping[str, str],
    secrets: Iterable[str],
    *,
    body: bytes = b"",
    truncated: bool = False,
) -> LoggedRequest:
    """The entry logging this request: the values of credential-like names replaced by
    ``<redacted>``, and every occurrence of each of ``secrets`` (the live credentials)
    in the path, the query and the headers replaced by ``<redacted>``."""
    known = sorted({secret for secret in secrets if secret}, key=len, reverse=True)

    def scrub(text: str) -> str:
        for secret in known:
            text = text.replace(secret, REDACTED)
        return text

    def kept(name: str, value: str) -> tuple[str, str]:
        return scrub(name), REDACTED if credential_like(name) else scrub(value)

    return LoggedRequest(
        method,
        scrub(path),
        tuple(kept(name, value) for name, value in query),
        dict(kept(name, value) for name, value in headers.items()),
        body,
        truncated,
    )


class RequestLog:
    """A thread-safe, bounded list of :class:`LoggedRequest`, oldest first."""

    def __init__(
        self, *, max_entries: int = MAX_ENTRIES, max_body_bytes: int = MAX_BODY_BYTES
    ) -> None:
        self._lock = threading.Lock()
        self._entries: collections.deque[LoggedRequest] = collections.deque()
        self._body_bytes = 0
        self._unauthenticated = 0
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

    def count_unauthenticated(self) -> None:
        """Count one request refused for a missing or wrong credential (never logged)."""
        with self._lock:
            self._unauthenticated += 1

    @property
    def unauthenticated(self) -> int:
        """How many requests were refused for their credential since the last :meth:`clear`."""
        with self._lock:
            return self._unauthenticated

    def snapshot(self) -> list[LoggedRequest]:
        """Every entry, oldest first."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        """Forget every entry, and the count of unauthenticated requests."""
        with self._lock:
            self._entries.clear()
            self._body_bytes = 0
            self._unauthenticated = 0
