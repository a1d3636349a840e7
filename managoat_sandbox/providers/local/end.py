"""A local command's end: its subscription to the agent, delivered as frames by a
reader thread, and its stdin through the agent."""

from __future__ import annotations

import threading

import attrs

from ..._engine import events
from ..._engine.box import Box, Channel, Refused
from ..._engine.errors import EngineError
from ..._engine.stdin_feed import LIMIT as STDIN_PIECE
from ..._engine.subscription import Subscription
from ..._streaming import Stream
from ...errors import CommandExited, Invalid, SandboxError, Unavailable, WriteFailed
from ...reasons import Reason

__all__ = ["LocalCommandEnd", "end_error", "follow_into"]


def end_error(lost: events.Lost) -> SandboxError:
    """The taxonomy error for an end that is not a real exit (never a guessed code)."""
    if lost.reason.startswith("journal_failed"):
        return Unavailable(Reason.JOURNAL_FAILED, problem=lost.reason.partition(": ")[2])
    return Unavailable(Reason.CLOSED_BEFORE_EXIT)


def follow_into(stream: Stream, subscription: Subscription, end: LocalCommandEnd) -> None:
    """Start ``stream``'s reader: every event of ``subscription`` as a frame. When it
    ends, ``end`` lets go of its stdin connection (:meth:`LocalCommandEnd.release`)."""

    def pump(s: Stream) -> None:
        try:
            while batch := subscription.read():
                for event in batch:
                    if isinstance(event, events.Output):
                        if event.stream == 2:
                            s.stderr(event.data)
                        else:
                            s.stdout(event.data)
                    elif isinstance(event, events.Exited):
                        s.exit(event.code)
                        return
                    else:
                        s.fail(end_error(event))
                        return
        finally:
            end.release()

    stream.start(pump, on_stop=subscription.close)


@attrs.define(eq=False)
class LocalCommandEnd:
    """What a local ``Command.private`` holds: the command's local end.

    ``live`` is false for an attach to a session that had already ended: such a
    command replays, but is not connected (stdin calls raise ``CommandExited``).
    """

    stream: Stream
    box: Box
    session_id: str
    live: bool = True
    _channel: Channel | None = None
    #: Requests on the channel not yet answered, and whether the command has ended.
    _in_flight: int = 0
    _ended: bool = False
    #: Whether this end has sent EOF (so a stdin found closed was closed by its caller).
    _eof_sent: bool = False
    _lock: threading.Lock = attrs.field(factory=threading.Lock)

    def _check(self) -> Channel | None:
        """The stdin connection (opened on first use), counted in flight until
        :meth:`_done`; None once the command has ended (its exit delivered): there is
        nothing left to write to."""
        self.stream.check_stdin()
        if not self.live:
            raise CommandExited(Reason.EXITED)
        with self._lock:
            if self.stream.finished.is_set():
                return None
            if self._channel is None:
                self._channel = self.box.channel()
            self._in_flight += 1
            return self._channel

    def _done(self) -> None:
        """A request is answered; the last one after the command's end closes the channel."""
        with self._lock:
            self._in_flight -= 1
        self._close_channel(when_idle=True)

    def release(self) -> None:
        """The command has ended: close the stdin connection — at once when idle, else once
        the requests in flight are answered (a write the command took just before it
        exited is still answered as written)."""
        with self._lock:
            self._ended = True
        self._close_channel(when_idle=True)

    def _close_channel(self, *, when_idle: bool) -> None:
        """Close the stdin connection, if one is open; with ``when_idle``, only once the
        command has ended and no request is in flight (else its last request does it)."""
        with self._lock:
            if when_idle and (self._in_flight or not self._ended):
                return
            channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()

    def _send(self, op: str, data: bytes = b"") -> str:
        channel = self._check()
        if channel is None:
            return "exited"
        try:
            reply = channel.request({"op": op, "id": self.session_id}, data)
        except Refused as refusal:
            if refusal.code == "unknown":
                return "exited"
            raise WriteFailed(Reason.REFUSED, code=refusal.code) from None
        except (OSError, EngineError) as error:
            if self.stream.stopped.is_set():
                raise CommandExited(Reason.DETACHED) from None
            raise WriteFailed(Reason.TRANSPORT, kind=type(error).__name__) from None
        finally:
            self._done()
        return str(reply.get("status"))

    def write(self, data: bytes) -> None:
        """Write to the process's stdin: total, as the contract says. Sent in pieces of
        :data:`STDIN_PIECE` bytes, each taken once the agent holds less than that for the
        process, so a write of any size blocks while the process does not read;
        :meth:`stop` interrupts that (``CommandExited``).

        A stdin the agent reports closed is ``Invalid("stdin_not_open")`` after this
        end's own :meth:`close_stdin`. Otherwise the process's end of it is gone —
        the process is exiting (the agent finds the pipe broken before it reaps the
        process) or closed its stdin — and nothing will read the write:
        ``CommandExited``, as for a write that raced the exit."""
        view = memoryview(data)
        for start in range(0, max(len(view), 1), STDIN_PIECE):
            status = self._send("stdin", bytes(view[start : start + STDIN_PIECE]))
            if status == "exited" or (status == "closed" and not self._eof_sent):
                raise CommandExited(Reason.EXITED)
            if status in ("closed", "not_open"):
                raise Invalid(Reason.STDIN_NOT_OPEN)

    def close_stdin(self) -> None:
        """Send EOF; idempotent while connected, also after the process ended."""
        self._eof_sent = True
        if self._send("eof") == "not_open":
            raise Invalid(Reason.STDIN_NOT_OPEN)

    def stop(self) -> None:
        """Detach this end; the session goes on. Never raises."""
        self.stream.stop()
        self._close_channel(when_idle=False)
        self.stream.join(2.0)
