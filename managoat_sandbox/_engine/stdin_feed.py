"""The agent's side of a process's stdin: a bounded buffer drained into a pipe or terminal.

Runs inside the agent's single-threaded loop, never blocks: the target
descriptor is non-blocking and written only when the loop says it is
writable. The feed never closes the target itself (the loop may still be
watching it): once :attr:`StdinFeed.done` is true the owner stops watching
and calls :meth:`StdinFeed.release`. Writers are told, per write, whether their data was taken
(``OK``), whether stdin was closed before (``CLOSED``) or the process has
ended (``EXITED``), or to come back later (``FULL``) while more than
:data:`LIMIT` bytes wait — that is how a writer feels back-pressure from a
process that does not read.
"""

from __future__ import annotations

import os

OK = "ok"
CLOSED = "closed"
EXITED = "exited"
FULL = "full"

LIMIT = 1024 * 1024
CTRL_D = b"\x04"
_CHUNK = 64 * 1024


class StdinFeed:
    """The pending input of one process and the descriptor it goes to."""

    def __init__(self, target: int, *, tty: bool) -> None:
        os.set_blocking(target, False)
        self.target: int | None = target
        self._tty = tty
        self.pending = bytearray()
        self.closed = False
        self.exited = False

    def offer(self, data: bytes) -> str:
        """Take ``data`` for the process: OK, CLOSED, EXITED or FULL (take nothing)."""
        if self.exited:
            return EXITED
        if self.closed:
            return CLOSED
        if len(self.pending) >= LIMIT:
            return FULL
        self.pending += data
        return OK

    def end_of_input(self) -> str:
        """End input after what is pending; OK (idempotent), or EXITED."""
        if self.exited:
            return EXITED
        if not self.closed:
            self.closed = True
            if self._tty:
                self.pending += CTRL_D
        return OK

    @property
    def done(self) -> bool:
        """Nothing more will be written: input ended and delivered, or the process ended."""
        return self.exited or (self.closed and not self.pending)

    def wants_write(self) -> bool:
        """Whether the target should be watched for writability."""
        return self.target is not None and bool(self.pending) and not self.exited

    def feed(self) -> None:
        """Write what the target takes now; a broken target ends input."""
        if self.target is None:
            return
        try:
            written = os.write(self.target, self.pending[:_CHUNK])
        except BlockingIOError:
            return
        except OSError:
            self.closed = True
            self.pending.clear()
            return
        del self.pending[:written]

    def process_exited(self) -> None:
        """The process has ended: drop undelivered input; later writes get EXITED."""
        self.exited = True
        self.pending.clear()

    def release(self) -> None:
        """Close the target (the child sees end of input); idempotent."""
        if self.target is not None:
            os.close(self.target)
            self.target = None
