"""Shapes of the Sprites wire protocol shared by the emulator's routes.

Errors are JSON ``{"error": code, "message": text}`` (docs/protocols/sprites.md#error-body); NDJSON
streams (kill, checkpoint, restore) are written one line per chunk, each line
a JSON object, with ``Content-Type: application/x-ndjson``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from aiohttp import web

from .. import _cut
from .state import now, rfc3339

NDJSON = "application/x-ndjson"
#: The longest duration taken, in seconds (about 68 years).
MAX_DURATION = float(2**31)
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def error(
    status: int,
    error_code: str,
    message: str,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> web.Response:
    """A JSON error answer (``extra`` adds fields, e.g. the filesystem's ``code``)."""
    return web.json_response(
        {"error": error_code, "message": message, **extra},
        status=status,
        headers=dict(headers or {}),
    )


def not_found(what: str = "resource") -> web.Response:
    """The 404 answer."""
    return error(404, "not_found", f"{what} not found")


def invalid(message: str) -> web.Response:
    """The 400 answer for a bad request."""
    return error(400, "invalid_request", message)


def duration(text: str) -> float | None:
    """Seconds from a Go duration (``1000ms``, ``10s``, ``1m30s``) or bare seconds; None if
    bad, or not a finite number of seconds up to :data:`MAX_DURATION`."""
    seconds = _seconds(text.strip())
    if seconds is None or not (math.isfinite(seconds) and seconds <= MAX_DURATION):
        return None
    return seconds


def _seconds(text: str) -> float | None:
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    position, total = 0, 0.0
    for match in _DURATION.finditer(text):
        if match.start() != position:
            return None
        total += float(match.group(1)) * _UNIT[match.group(2)]
        position = match.end()
    return total if position == len(text) else None


def flag(value: str | None, default: bool) -> bool:
    """A ``true``/``false`` query flag (``1``/``0`` too); absent means ``default``."""
    if value is None or value == "":
        return default
    return value.lower() in ("true", "1", "yes")


def event(kind: str, **fields: Any) -> dict[str, Any]:
    """A checkpoint/restore stream event, with its ``time``."""
    return {"type": kind, **fields, "time": rfc3339(now())}


class NdjsonStream:
    """A streamed ``200 application/x-ndjson`` answer written line by line."""

    def __init__(self, request: web.Request) -> None:
        self._request = request
        self.response = web.StreamResponse(status=200, headers={"Content-Type": NDJSON})

    async def open(self) -> NdjsonStream:
        """Send the status and headers."""
        await self.response.prepare(self._request)
        return self

    async def line(self, record: Mapping[str, Any] | str) -> None:
        """One line: a JSON object, or raw text as given (for malformed-stream faults)."""
        text = record if isinstance(record, str) else json.dumps(record)
        await self.response.write(text.encode() + b"\n")

    async def finish(self) -> web.StreamResponse:
        """End the body."""
        await self.response.write_eof()
        return self.response


async def scripted(
    request: web.Request, lines: Sequence[Any], *, cut: bool = False
) -> web.StreamResponse:
    """Answer with exactly ``lines`` (objects or raw strings) as an NDJSON stream.

    ``cut``: the last line goes out without its newline and the connection is
    closed before the chunked body ends — a stream truncated inside a line.
    """
    stream = await NdjsonStream(request).open()
    texts = [record if isinstance(record, str) else json.dumps(record) for record in lines]
    if not cut:
        for text in texts:
            await stream.line(text)
        return await stream.finish()
    body = "\n".join(texts).encode()
    await stream.response.write(body)
    _cut.close(request.transport)
    return stream.response
