"""The journal: one append-only file holding a process's output in arrival order.

Format: a sequence of records ``[stream: u8][length: u32 big-endian][data]``
with stream 1 = stdout, 2 = stderr (a pseudo-terminal's output is all stdout).
The writer emits each record with one ``os.write`` on an ``O_APPEND`` file, so
readers never see a torn header in practice; readers still treat an incomplete
trailing record as not yet written and pick it up once it is complete.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from .errors import EngineError
from .session import JOURNAL

STDOUT = 1
STDERR = 2

_HEADER = struct.Struct(">BI")
BLOCK = 64 * 1024
_READ_LIMIT = 4 * 1024 * 1024


@dataclass(frozen=True)
class Output:
    """A run of output bytes from one stream (1 = stdout, 2 = stderr)."""

    stream: int
    data: bytes


def encode_record(stream: int, data: bytes) -> bytes:
    """One journal record carrying ``data`` for ``stream``."""
    return _HEADER.pack(stream, len(data)) + data


def coalesce(outputs: list[Output]) -> list[Output]:
    """Merge adjacent outputs of the same stream, keeping the order."""
    runs: list[tuple[int, list[bytes]]] = []
    for output in outputs:
        if runs and runs[-1][0] == output.stream:
            runs[-1][1].append(output.data)
        else:
            runs.append((output.stream, [output.data]))
    return [Output(stream, b"".join(chunks)) for stream, chunks in runs]


class JournalWriter:
    """Appends records to a journal file (used by the supervisor only)."""

    def __init__(self, path: Path) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)

    def write(self, stream: int, data: bytes) -> None:
        """Append one record; a short write (disk full, signal) is completed in a loop."""
        view = memoryview(encode_record(stream, data))
        while view:
            view = view[os.write(self._fd, view) :]

    def close(self) -> None:
        """Close the file."""
        os.close(self._fd)


class JournalReader:
    """Reads a session's journal incrementally from byte zero.

    Each :meth:`read` returns the complete records appended since the previous
    call, adjacent same-stream records merged. Not thread-safe; one reader per
    consumer. Raises FileNotFoundError if the session has no journal.
    """

    def __init__(self, session_dir: Path) -> None:
        self._fd = os.open(session_dir / JOURNAL, os.O_RDONLY | os.O_CLOEXEC)
        self._pending = bytearray()
        self._offset = 0

    @property
    def offset(self) -> int:
        """Bytes of the journal consumed as complete records so far."""
        return self._offset

    def read(self) -> list[Output]:
        """Complete records available now (reading at most about 4 MiB), or []."""
        budget = _READ_LIMIT
        while budget > 0:
            block = os.read(self._fd, BLOCK)
            if not block:
                break
            self._pending += block
            budget -= len(block)
        return self._parse()

    def _parse(self) -> list[Output]:
        buf = self._pending
        outputs: list[Output] = []
        pos = 0
        while len(buf) - pos >= _HEADER.size:
            stream, length = _HEADER.unpack_from(buf, pos)
            if stream not in (STDOUT, STDERR):
                raise EngineError(f"corrupt journal record at offset {self._offset + pos}")
            end = pos + _HEADER.size + length
            if end > len(buf):
                break
            outputs.append(Output(stream, bytes(buf[pos + _HEADER.size : end])))
            pos = end
        del buf[:pos]
        self._offset += pos
        return coalesce(outputs)

    def close(self) -> None:
        """Close the file; idempotent."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> JournalReader:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
