"""Commands' output in the agent (:mod:`.agent`): read, journaled, handed to subscribers.

A :class:`Pump` reads a process's output pipes from the agent's selector,
never blocking: every frame is recorded (journaled first, for a detachable
session) and then offered to each of its subscribers. Reading is paced by the
subscribers (:meth:`Pump.pace`), so that what a command writes waits in its
pipes, or in its journal, rather than in the agent's memory.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal

from .agent_connection import BACKLOG, READ, Process

#: How far a detachable session's journal may run ahead of the closest of its
#: subscribers before its pipes stop being read (:meth:`Pump.pace`).
JOURNAL_LEAD = 4 * BACKLOG


class Pump:
    """Reads the output of the agent's processes, registered in the agent's selector ``sel``."""

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel

    def watch(self, process: Process) -> None:
        """Read ``process``'s output pipes whenever they are readable."""
        for fd, stream in process.outputs.items():
            self.sel.register(
                fd,
                selectors.EVENT_READ,
                lambda mask, fd=fd, stream=stream: self._on_output(process, fd, stream),
            )

    def _on_output(self, process: Process, fd: int, stream: int) -> None:
        try:
            data = os.read(fd, READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if not process.paused:
                self.sel.unregister(fd)
            process.stop_reading(fd)
            return
        self.emit(process, stream, data)

    def emit(self, process: Process, stream: int, data: bytes) -> None:
        """Record one output frame and hand it to every subscriber."""
        at = process.size
        try:
            frame = process.record(stream, data)
        except OSError as exc:
            self._journal_failed(process, exc)
            return
        for conn in list(process.subscribers):
            conn.offer(process, frame, at)
            conn.flush()
        self.pace(process)

    def pace(self, process: Process) -> None:
        """Read ``process``'s pipes only while one of its subscribers keeps up.

        Every subscriber trailing by its limit (:meth:`.agent_connection.Connection.behind`:
        :data:`.agent_connection.BACKLOG` buffered for an ephemeral process,
        :data:`JOURNAL_LEAD` journaled for a session) stops the reading, so the
        command blocks on write; reading resumes once one of them is back within
        half of it, or none is left. A session whose process has been reaped is
        always read: its end must not wait for a subscriber (``terminate_session``
        waits for it), and what descendants that outlive it write goes to the
        journal, bounded by the sandbox's ``file_size``. Never waits for anyone: a
        slow subscriber holds up only the command it follows.
        """
        if process.end is not None:
            return
        limit = JOURNAL_LEAD if process.journaled else BACKLOG
        lags = [conn.behind(process) for conn in process.subscribers]
        free = process.journaled and process.status is not None
        if not process.paused:
            if lags and not free and min(lags) >= limit:
                for fd in process.outputs:
                    self.sel.unregister(fd)
                process.paused = True
        elif free or not lags or min(lags) < limit // 2:
            process.paused = False
            self.watch(process)

    def stop(self, process: Process) -> None:
        """Stop reading every output pipe of ``process`` (they stay open: see
        :meth:`.agent_process.Process.stop_reading`)."""
        for fd in list(process.outputs):
            if not process.paused:
                self.sel.unregister(fd)
            process.stop_reading(fd)

    def _journal_failed(self, process: Process, exc: OSError) -> None:
        """Output that cannot be journaled would be lost: end the process, say why."""
        process.broken = f"journal_failed: {errno.errorcode.get(exc.errno or 0, str(exc))}"
        self.stop(process)
        process.signal_group(signal.SIGKILL)
