"""The Connect protocol pieces envd speaks: envelopes, end-of-stream trailers, error codes.

Envelope layout (docs/protocols/e2b.md#connect-envelopes): one flags byte (``0x00`` data, ``0x01``
compressed, ``0x02`` end of stream), then the payload length as an unsigned
32-bit big-endian integer, then exactly that many bytes of UTF-8 JSON. A
server stream is a sequence of data envelopes closed by one end-of-stream
envelope whose JSON is ``{}`` on success or ``{"error": {...}}`` on failure.
Unary calls carry plain JSON and map a Connect error code to an HTTP status.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

from .._input import BadInput, load_json

__all__ = [
    "COMPRESSED",
    "DATA",
    "END_STREAM",
    "HTTP_STATUS",
    "EnvelopeError",
    "decode_one",
    "encode",
    "end_stream",
    "error_body",
]

DATA = 0x00
COMPRESSED = 0x01
END_STREAM = 0x02
HEADER = struct.Struct(">BI")

#: Connect error code -> HTTP status of a unary error response.
HTTP_STATUS: Mapping[str, int] = {
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


class EnvelopeError(ValueError):
    """A request body that is not exactly one well-formed data envelope."""


def _compact(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode()


def encode(message: Any, flags: int = DATA) -> bytes:
    """One envelope holding ``message`` as compact JSON (``bytes`` are sent as they are)."""
    payload = message if isinstance(message, bytes) else _compact(message)
    return HEADER.pack(flags, len(payload)) + payload


def error_body(code: str, message: str) -> dict[str, str]:
    """A Connect error object: ``{"code": ..., "message": ...}``."""
    return {"code": code, "message": message}


def end_stream(error: Any = None) -> bytes:
    """The end-of-stream envelope: ``{}``, or ``{"error": error}`` when given."""
    return encode({} if error is None else {"error": error}, END_STREAM)


def decode_one(body: bytes) -> Any:
    """The JSON message of a request body made of exactly one data envelope."""
    if len(body) < HEADER.size:
        raise EnvelopeError("request body shorter than an envelope header")
    flags, length = HEADER.unpack_from(body)
    if flags != DATA:
        raise EnvelopeError(f"unexpected envelope flags 0x{flags:02x}")
    if len(body) != HEADER.size + length:
        raise EnvelopeError("request body is not exactly one envelope")
    try:
        return load_json(body[HEADER.size :])
    except BadInput as error:
        raise EnvelopeError(f"envelope payload: {error}") from None
