"""Session command logs: the header-dependent renderings and the follow transports.

The log endpoints of docs/protocols/daytona.md#log-snapshot and the sections after it:

* :func:`render_mode` picks how a request sees the journal: ``combined``
  (markers stripped; no headers), ``raw`` (with the 3-byte markers;
  ``X-Daytona-Split-Output: true`` or an SDK version in [0.27.0, 0.167.0)) or
  ``json`` (``{output, stdout, stderr}``; SDK version >= 0.167.0 or ``-dev``);
* :func:`follow_chunks` tails a journal from byte 0 in frames of at most
  1024 bytes, reading the file on from where it stopped (each byte is read
  once), and ends when the command's exit code is recorded and the journal
  stayed idle for a while, when the session goes away, or when a fault cuts
  it short. The WebSocket follow sends ``raw`` for ``json``
  clients (the SDK demultiplexes the frames itself); the chunked follow is
  always combined, as the runner dials the daemon without headers.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncGenerator, Callable, Mapping

from .daemon import STDERR_MARK, STDOUT_MARK

__all__ = ["FRAME", "MarkerStripper", "demux", "follow_chunks", "render_mode", "strip"]

FRAME = 1024
#: How much of the journal one read takes (then sent as frames of FRAME bytes).
_BLOCK = 64 * 1024
_POLL = 0.02
_MARKERS = re.compile(b"(\x01\x01\x01|\x02\x02\x02)")
_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)")


def render_mode(headers: Mapping[str, str]) -> str:
    """``combined``, ``raw`` or ``json`` for a logs request with these headers."""
    version = headers.get("X-Daytona-SDK-Version")
    if version:
        match = _VERSION.match(version)
        if "-dev" in version or match is None:
            return "json"
        numbers = tuple(int(part) for part in match.groups())
        if numbers >= (0, 167, 0):
            return "json"
        return "raw" if numbers >= (0, 27, 0) else "combined"
    if headers.get("X-Daytona-Split-Output", "").lower() == "true":
        return "raw"
    return "combined"


def strip(journal: bytes) -> bytes:
    """The combined output: the journal without its channel markers."""
    return journal.replace(STDOUT_MARK, b"").replace(STDERR_MARK, b"")


def demux(journal: bytes) -> tuple[bytes, bytes]:
    """(stdout, stderr) of a journal; bytes before the first marker are dropped."""
    channels: dict[bytes, list[bytes]] = {STDOUT_MARK: [], STDERR_MARK: []}
    current: list[bytes] | None = None
    for part in _MARKERS.split(journal):
        if part in channels:
            current = channels[part]
        elif current is not None and part:
            current.append(part)
    return b"".join(channels[STDOUT_MARK]), b"".join(channels[STDERR_MARK])


class MarkerStripper:
    """Strips markers from a chunked stream, holding back a partial marker at a boundary."""

    def __init__(self) -> None:
        self._held = b""

    def feed(self, chunk: bytes) -> bytes:
        """The stripped bytes that are certain so far."""
        data = strip(self._held + chunk)
        keep = 0
        for size in (2, 1):
            tail = data[-size:]
            if len(data) >= size and tail in (STDOUT_MARK[:size], STDERR_MARK[:size]):
                keep = size
                break
        self._held = data[len(data) - keep :] if keep else b""
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        """What was held back, at the end of the stream (it was content after all)."""
        held, self._held = self._held, b""
        return held


async def follow_chunks(
    open_journal: Callable[[], int],
    *,
    follow: bool,
    exited: Callable[[], bool],
    gone: Callable[[], bool],
    idle_close: float,
    limit: int | None = None,
    cut: Callable[[], bool] = lambda: False,
) -> AsyncGenerator[bytes, None]:
    """Yield the journal (a read descriptor from ``open_journal``, closed at the end)
    from byte 0 in frames of at most :data:`FRAME` bytes.

    The file is followed from where the last read ended (never re-read), in
    blocks of :data:`_BLOCK`. Without ``follow`` it stops at the end of the
    file. With it, it tails the file and stops once ``exited()`` holds and
    nothing new arrived for ``idle_close`` seconds, or once ``gone()`` holds
    (the session was deleted). ``limit`` cuts the stream after that many bytes
    (the close-early and reset faults); ``cut()`` turning true ends it at once
    (a live cut). Raises what ``open_journal`` raises, and OSError if the
    journal cannot be read.
    """
    sent = 0
    idle = 0.0
    fd = open_journal()
    try:
        while not cut():
            want = _BLOCK if limit is None else min(_BLOCK, limit - sent)
            if want <= 0:
                return
            block = os.read(fd, want)
            if block:
                sent += len(block)
                idle = 0.0
                for start in range(0, len(block), FRAME):
                    yield block[start : start + FRAME]
                continue
            if not follow or gone():
                return
            if exited():
                if idle >= idle_close:
                    return
            else:
                idle = 0.0
            await asyncio.sleep(_POLL)
            idle += _POLL
    finally:
        os.close(fd)
