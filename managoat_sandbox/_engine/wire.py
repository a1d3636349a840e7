"""The agent's wire format: one framing for the socket and for the journal.

Every unit is a frame ``[kind: u8][length: u32 big-endian][payload]``:

``OUT`` (1) / ``ERR`` (2)
    Output bytes of a process's stdout / stderr. A journal file is nothing but
    a sequence of these frames, and a subscriber receives the journal's bytes
    verbatim, so replay and live tail are the same stream.
``END`` (3)
    The end of a process (JSON): ``{"code": int, "signal": int | null}`` for a
    real exit, or ``{"lost": reason}`` when the outcome cannot be known.
``REPLY`` (4) / ``REQUEST`` (5)
    A message: a JSON object, optionally followed by binary data (payload =
    ``[json length: u32][json][data]``).

Frames are bounded (:data:`MAX_FRAME`); a longer one is a protocol error, so
a corrupt stream can never make a reader allocate without limit.
"""

from __future__ import annotations

import json
import struct

from .errors import EngineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

OUT = 1
ERR = 2
END = 3
REPLY = 4
REQUEST = 5
KINDS = frozenset((OUT, ERR, END, REPLY, REQUEST))

HEADER = struct.Struct(">BI")
_JSON_LENGTH = struct.Struct(">I")
MAX_FRAME = 16 * 1024 * 1024


def frame(kind: int, payload: bytes) -> bytes:
    """One encoded frame."""
    return HEADER.pack(kind, len(payload)) + payload


def message(kind: int, header: dict[str, Any], data: bytes = b"") -> bytes:
    """One encoded REQUEST or REPLY frame: a JSON object and optional binary data."""
    text = json.dumps(header, separators=(",", ":")).encode()
    return frame(kind, _JSON_LENGTH.pack(len(text)) + text + data)


def parse_message(payload: bytes) -> tuple[dict[str, Any], bytes]:
    """The JSON object and data of a REQUEST or REPLY payload; EngineError if malformed."""
    if len(payload) < _JSON_LENGTH.size:
        raise EngineError("malformed message: too short")
    (length,) = _JSON_LENGTH.unpack_from(payload)
    end = _JSON_LENGTH.size + length
    if end > len(payload):
        raise EngineError("malformed message: JSON longer than the frame")
    try:
        header = json.loads(payload[_JSON_LENGTH.size : end])
    except ValueError as exc:
        raise EngineError(f"malformed message: {exc}") from None
    if not isinstance(header, dict):
        raise EngineError("malformed message: not a JSON object")
    return header, payload[end:]


def parse_end(payload: bytes) -> dict[str, Any]:
    """The JSON object of an END frame; EngineError if malformed."""
    try:
        record = json.loads(payload)
    except ValueError as exc:
        raise EngineError(f"malformed end record: {exc}") from None
    if not isinstance(record, dict):
        raise EngineError("malformed end record: not a JSON object")
    return record


class Parser:
    """Splits a byte stream into frames, incrementally.

    :meth:`feed` takes whatever arrived; :meth:`next` returns the next complete
    frame as ``(kind, payload)``, or None until more bytes arrive. An unknown
    kind or an oversized length raises EngineError.
    """

    def __init__(self, *, kinds: frozenset[int] = KINDS, limit: int = MAX_FRAME) -> None:
        self._buffer = bytearray()
        self._pos = 0
        self._kinds = kinds
        self._limit = limit

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        if self._pos:
            del self._buffer[: self._pos]
            self._pos = 0
        self._buffer += data

    @property
    def pending(self) -> int:
        """Bytes received but not yet returned as part of a complete frame."""
        return len(self._buffer) - self._pos

    def has_frame(self) -> bool:
        """Whether a complete frame is buffered (a partial one is not: it waits for bytes)."""
        buf, pos = self._buffer, self._pos
        if len(buf) - pos < HEADER.size:
            return False
        length: int = HEADER.unpack_from(buf, pos)[1]
        return len(buf) - pos - HEADER.size >= length

    def next(self) -> tuple[int, bytes] | None:
        """The next complete frame, or None if it has not fully arrived."""
        buf, pos = self._buffer, self._pos
        if len(buf) - pos < HEADER.size:
            return None
        kind, length = HEADER.unpack_from(buf, pos)
        if kind not in self._kinds or length > self._limit:
            raise EngineError(f"corrupt frame (kind {kind}, length {length})")
        end = pos + HEADER.size + length
        if end > len(buf):
            return None
        self._pos = end
        return kind, bytes(buf[pos + HEADER.size : end])

    def frames(self) -> Iterator[tuple[int, bytes]]:
        """Every complete frame buffered so far, in order."""
        while (item := self.next()) is not None:
            yield item
