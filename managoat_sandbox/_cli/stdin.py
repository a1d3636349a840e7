"""Forwarding the terminal's stdin into a command (``spawn --stdin``, ``attach --stdin``)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

from .. import facade as sandbox
from ..errors import CommandExited, SandboxError
from ..types import Command

__all__ = ["CHUNK", "StdinFailed", "StdinForwarder"]

#: Most bytes forwarded per ``write_stdin``.
CHUNK = 64 * 1024


@attrs.frozen
class StdinFailed:
    """Posted to the frames queue when forwarding failed for a reason other than exit."""

    error: SandboxError


class StdinForwarder:
    """Copies stdin into ``command`` on a daemon thread, then sends EOF.

    Each chunk read (``read(CHUNK)``, returning as soon as some input is
    there) goes out with ``write_stdin``; end of input is ``close_stdin``. A
    ``CommandExited`` (the command ended, or we detached) ends forwarding
    quietly; any other taxonomy error is handed to ``report`` once, and
    forwarding ends.

    The thread is a daemon because a read of stdin blocks and cannot be
    interrupted: :meth:`stop` makes the thread end, without forwarding
    anything more, as soon as its current read returns (the next chunk or
    EOF) — or the process exits first, which a daemon thread does not delay.
    """

    def __init__(
        self,
        command: Command,
        read: Callable[[int], bytes],
        report: Callable[[StdinFailed], None],
    ) -> None:
        self._command = command
        self._read = read
        self._report = report
        self._stopped = threading.Event()
        self.thread = threading.Thread(
            target=self._run, name=f"managoat-sandbox-stdin-{command.ref}", daemon=True
        )

    def start(self) -> None:
        """Start forwarding."""
        self.thread.start()

    def stop(self) -> None:
        """Forward nothing more; the thread ends when its current read returns."""
        self._stopped.set()

    def _run(self) -> None:
        try:
            while True:
                try:
                    chunk = self._read(CHUNK)
                except (OSError, ValueError):  # stdin closed or unreadable: treat as EOF
                    chunk = b""
                if self._stopped.is_set():
                    return
                if not chunk:
                    sandbox.close_stdin(self._command)
                    return
                sandbox.write_stdin(self._command, chunk)
        except CommandExited:
            return
        except SandboxError as error:
            if not self._stopped.is_set():
                self._report(StdinFailed(error))
