"""The progress a transfer reports: counted here, handed to the caller's callback."""

from __future__ import annotations

from collections.abc import Callable

from ..types import TransferProgress

__all__ = ["REPORT_EVERY", "Counter", "ProgressCallback"]

#: A callback taking each progress report.
ProgressCallback = Callable[[TransferProgress], object]

#: Bytes between two reports within one file (a report also follows every file).
REPORT_EVERY = 1024 * 1024


class Counter:
    """Files and bytes done, reported to ``callback`` after every file and every
    :data:`REPORT_EVERY` bytes (not thread-safe: one transfer, one thread)."""

    def __init__(
        self,
        callback: ProgressCallback | None,
        *,
        files_total: int | None = None,
        bytes_total: int | None = None,
    ) -> None:
        self.callback = callback
        self.files = 0
        self.bytes = 0
        self.files_total = files_total
        self.bytes_total = bytes_total
        self._reported = 0

    def add_bytes(self, count: int) -> None:
        """Count ``count`` more bytes of the file being copied."""
        self.bytes += count
        if self.bytes - self._reported >= REPORT_EVERY:
            self.report()

    def add_file(self) -> None:
        """Count one more file (or symbolic link) copied whole."""
        self.files += 1
        self.report()

    def report(self) -> None:
        """Give the callback the progress so far."""
        self._reported = self.bytes
        if self.callback is not None:
            self.callback(self.now())

    def now(self) -> TransferProgress:
        """The progress so far."""
        return TransferProgress(self.files, self.bytes, self.files_total, self.bytes_total)

    def done(self) -> TransferProgress:
        """The finished transfer's progress, its totals set to what was copied."""
        return TransferProgress(self.files, self.bytes, self.files, self.bytes)
