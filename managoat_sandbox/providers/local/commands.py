"""Local commands: one engine session each, tailed into frames by a reader thread."""

from __future__ import annotations

import contextlib
import threading
from pathlib import Path

import attrs

from ... import _engine as engine
from ..._streaming import Stream
from ...errors import CommandExited, Invalid, Unavailable, WriteFailed

__all__ = ["LocalCommand", "follow_into"]


def follow_into(stream: Stream, session_dir: Path) -> None:
    """Start ``stream``'s reader: the session's journal from byte zero, then its fate.

    The exit code is the supervisor's record; a supervisor gone without one, or
    a journal that vanished under the reader, is ``closed_before_exit``.
    """

    def pump(s: Stream) -> None:
        try:
            for event in engine.follow(session_dir, stop=s.stopped):
                if isinstance(event, engine.Output):
                    if event.stream == engine.STDERR:
                        s.stderr(event.data)
                    else:
                        s.stdout(event.data)
                elif isinstance(event, engine.Exited):
                    s.exit(event.code)
                    return
                else:
                    s.fail(Unavailable("closed_before_exit"))
                    return
        except (OSError, engine.EngineError):
            s.fail(Unavailable("closed_before_exit"))

    stream.start(pump)


@attrs.define(eq=False)
class LocalCommand:
    """What a local ``Command.private`` holds.

    ``live`` is false for an attach to a session that had already ended: such a
    command replays, but is not connected (stdin calls raise ``CommandExited``).
    """

    stream: Stream
    session_dir: Path
    live: bool = True
    _writer: engine.StdinWriter | None = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def _check(self) -> None:
        self.stream.check_stdin()
        if not self.live:
            raise CommandExited("the session had ended before attach")

    def write(self, data: bytes) -> None:
        """Write to the process's stdin: total, as the contract says."""
        self._check()
        with self._lock:
            try:
                if self._writer is None:
                    self._writer = engine.StdinWriter(self.session_dir)
                self._writer.write(data)
            except (OSError, engine.EngineError) as error:
                self._drop_writer()
                raise _stdin_error(error) from None

    def close_stdin(self) -> None:
        """Send EOF; idempotent while connected, also after the process ended."""
        self._check()
        with self._lock:
            self._drop_writer()
            try:
                engine.close_stdin(self.session_dir)
            except (OSError, engine.EngineError) as error:
                raise _stdin_error(error) from None

    def stop(self) -> None:
        """Detach this end; the session goes on. Never raises."""
        self.stream.stop()
        with self._lock:
            self._drop_writer()
        self.stream.join(2.0)

    def _drop_writer(self) -> None:
        if self._writer is not None:
            with contextlib.suppress(OSError, engine.EngineError):
                self._writer.close()
            self._writer = None


def _stdin_error(error: OSError | engine.EngineError) -> Exception:
    """Translate an engine failure: exited → ``CommandExited``, stdin not open (never
    opened, or already closed) → ``Invalid("stdin_not_open")``, else ``WriteFailed``."""
    if isinstance(error, engine.ProcessExited):
        return CommandExited("exited")
    if isinstance(error, engine.StdinNotOpen):
        return Invalid("stdin_not_open")
    return WriteFailed(type(error).__name__)
