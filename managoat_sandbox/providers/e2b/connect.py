"""The Connect protocol's envelope codec (JSON messages, no compression).

A server-streaming Connect call (envd's ``Start`` and ``Connect``) sends one
request envelope and receives a sequence of envelopes. Each envelope is a flags
byte, a 4-byte unsigned big-endian payload length, then that many bytes of
UTF-8 JSON (UTF-8 only, as the Connect protocol says: no byte order mark, no
UTF-16). Flag ``0x02`` marks the end-of-stream envelope (``{}`` on success,
``{"error": {...}}`` on failure), after which the body ends. Flag ``0x01``
(compressed) is never negotiated and is refused.

HTTP chunk boundaries are unrelated to envelope boundaries: :class:`Decoder`
buffers and yields only complete envelopes, keeping an incomplete tail for the
next chunk.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import attrs

__all__ = [
    "END_STREAM",
    "MAX_ENVELOPE",
    "CodecError",
    "Decoder",
    "Envelope",
    "encode",
]

#: Flags byte of a data message and of the end-of-stream envelope.
DATA = 0x00
COMPRESSED = 0x01
END_STREAM = 0x02
#: The largest envelope payload accepted (envd sends at most 32 KiB of data, base64'd).
MAX_ENVELOPE = 4 * 1024 * 1024
_HEADER = struct.Struct(">BI")


class CodecError(Exception):
    """A byte sequence that is not a valid JSON Connect envelope stream.

    ``reason`` is a short, secret-free description.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@attrs.frozen
class Envelope:
    """One decoded envelope: ``end_stream`` for the trailer, and its JSON message."""

    end_stream: bool
    message: Any


#: Compact JSON, as ``json.dumps(message, separators=(",", ":"))`` writes it (one encoder,
#: not one per message).
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def encode(message: Any, *, end_stream: bool = False) -> bytes:
    """One envelope holding ``message`` as compact JSON."""
    payload = _COMPACT.encode(message).encode("utf-8")
    return _HEADER.pack(END_STREAM if end_stream else DATA, len(payload)) + payload


class Decoder:
    """Incremental decoder: feed it bytes as they arrive, get whole envelopes back.

    Not thread-safe; one decoder per stream. A malformed envelope (compressed
    flag, unknown flag bits, oversized, or payload that is not JSON) raises
    :class:`CodecError`; the stream is then unusable.
    """

    def __init__(self, *, limit: int = MAX_ENVELOPE) -> None:
        self._buffer = bytearray()
        self._limit = limit

    @property
    def pending(self) -> bytes:
        """The bytes of an incomplete envelope waiting for more input."""
        return bytes(self._buffer)

    def feed(self, data: bytes) -> list[Envelope]:
        """Add ``data`` and return every envelope now complete, in order."""
        self._buffer += data
        out: list[Envelope] = []
        while len(self._buffer) >= _HEADER.size:
            flags, length = _HEADER.unpack_from(self._buffer)
            if flags & COMPRESSED:
                raise CodecError("compressed envelope (never negotiated)")
            if flags & ~END_STREAM:
                raise CodecError(f"unknown envelope flags 0x{flags:02x}")
            if length > self._limit:
                raise CodecError(f"envelope of {length} bytes exceeds {self._limit}")
            end = _HEADER.size + length
            if len(self._buffer) < end:
                break
            payload = self._buffer[_HEADER.size : end]
            del self._buffer[:end]
            try:
                message = json.loads(payload.decode("utf-8")) if payload else {}
            except ValueError:  # not UTF-8 (UnicodeDecodeError), or not JSON
                raise CodecError("envelope payload is not JSON") from None
            out.append(Envelope(bool(flags & END_STREAM), message))
        return out
