"""A Daytona command's end (what its ``Command.private`` holds), and stdin through the
command-input endpoint."""

from __future__ import annotations

import logging
import threading

import attrs

from ..._streaming import Stream
from ...errors import CommandExited, NotFound, SandboxError, WriteFailed
from ...reasons import Reason
from . import shim
from .errors import is_status
from .toolbox import Toolbox

__all__ = ["DaytonaCommandEnd"]

log = logging.getLogger("managoat_sandbox.daytona")

_STOP_JOIN = 1.0


def _exited(error: SandboxError) -> bool:
    """410 (the command completed) or 404 (its session is gone): the process has exited."""
    return is_status(error, 410) or isinstance(error, NotFound)


@attrs.define(eq=False)
class DaytonaCommandEnd:
    """One command's local end: its stream and where its session lives.

    ``live`` is false for an attach to a command that had already exited: it
    replays, but is not connected (stdin calls raise ``CommandExited``).
    ``attached`` marks an end made by ``attach``: the daemon's exit code can lag
    the exit the journal records, so an attach may find a finished command
    still "running"; once its replay has delivered the exit, its stdin calls
    raise ``CommandExited`` as a not-live attach's do.
    """

    stream: Stream
    toolbox: Toolbox
    session_id: str
    command_id: str
    live: bool = True
    attached: bool = False
    _stdin_closed: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def _check(self) -> None:
        self.stream.check_stdin()
        if not self.live:
            raise CommandExited(Reason.EXITED)

    def write(self, data: bytes) -> None:
        """Send ``data`` to the command's stdin: total, as the contract says."""
        self._check()
        self.stream.check_writable()
        if not data:
            return
        try:
            self.toolbox.send_input(self.session_id, self.command_id, shim.input_lines(data))
        except SandboxError as error:
            if _exited(error):
                raise CommandExited(Reason.EXITED) from None
            raise WriteFailed.of(error) from None

    def close_stdin(self) -> None:
        """Close stdin for real: the relay feeding the command ends, the command reads EOF.

        The end-of-input line travels after any data already written, so it
        cannot overtake it. If it cannot be sent, the relay is killed instead.
        Always returns normally while connected, even if that kill fails.
        """
        self._check()
        if self.attached and self.stream.finished.is_set():
            raise CommandExited(Reason.EXITED)
        with self._lock:
            if self._stdin_closed or self.stream.finished.is_set():
                return
            self._stdin_closed = True
        try:
            self.toolbox.send_input(self.session_id, self.command_id, shim.close_line())
            return
        except SandboxError as error:
            if _exited(error):
                return
            log.debug(
                "daytona: end-of-input for %s not sent (%r); killing the relay",
                self.session_id,
                error,
            )
        try:
            self.toolbox.execute(shim.kill_relay(self.session_id))
        except SandboxError as error:
            log.debug("daytona: killing the stdin relay of %s failed: %r", self.session_id, error)

    def stop(self) -> None:
        """Detach this end; the remote command goes on. Never raises."""
        self.stream.stop()
        self.stream.join(_STOP_JOIN)
