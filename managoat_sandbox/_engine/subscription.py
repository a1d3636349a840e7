"""Following one process from the library's side: live from the agent, or from disk.

A :class:`Subscription` yields batches of events — output runs, then exactly
one end — from the agent's socket as they arrive (no polling), or replays a
session's journal and exit record from disk when the agent no longer runs
it. When the agent's connection ends before the end frame, a journaled
session is finished from disk (the rest of the journal, then its exit record
or :class:`~.events.Lost`); an ephemeral one is ``Lost("closed_before_exit")``.

:meth:`Subscription.close` may be called from any thread; a read in progress
returns at once with no further events.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

from . import records, wire
from .errors import EngineError
from .events import OUTPUT_KINDS, End, Event, Lost, Output, coalesce, end_from_record

_RECV = 256 * 1024
_SHORTEST_WAIT = 0.001
_FRAME_KINDS = frozenset((wire.OUT, wire.ERR, wire.END))


class Subscription:
    """The events of one process, in order, ending with exactly one end event.

    ``sock`` is a connection the agent streams the process on (None: replay
    ``session`` from disk). ``offset`` is where in the session's journal the
    stream starts. ``on_finish`` takes the connection back once the end frame
    arrived cleanly (it can serve further requests).
    """

    def __init__(
        self,
        sock: socket.socket | None,
        *,
        session: records.SessionRecord | None = None,
        offset: int = 0,
        on_finish: Callable[[socket.socket], None] | None = None,
    ) -> None:
        self._sock = sock
        self._session = session
        self._offset = offset
        self._on_finish = on_finish
        self._parser = wire.Parser(kinds=_FRAME_KINDS)
        self._lock = threading.Lock()
        self._closed = False
        self._reading = False
        self.ended = False

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self.is_closed()

    def is_closed(self) -> bool:
        """Whether :meth:`close` was called (a call, so that it is read afresh each time:
        another thread may close the subscription during a read)."""
        return self._closed

    def read(self, timeout: float | None = None) -> list[Event]:
        """The next batch of events (blocking); [] once ended or closed.

        ``timeout`` bounds the wait for the batch (TimeoutError).
        """
        if self.ended or self._closed:
            return []
        while True:
            events = self._parse()
            if events:
                return events
            with self._lock:
                sock = self._sock
                if self.is_closed():
                    return []
                if sock is None:
                    return self._finish_from_disk()
                self._reading = True
            try:
                # settimeout(0) would make the socket non-blocking: wait at least a moment.
                sock.settimeout(None if timeout is None else max(timeout, _SHORTEST_WAIT))
                data = sock.recv(_RECV)
            except (TimeoutError, BlockingIOError):
                raise TimeoutError("no event within the timeout") from None
            except OSError:
                data = b""
            finally:
                with self._lock:
                    self._reading = False
                    stale = self._sock if self.is_closed() else None
                    if stale is not None:
                        self._sock = None
                if stale is not None:
                    stale.close()
            if self.is_closed():
                return []
            if not data:
                return self._connection_ended()
            self._parser.feed(data)

    def wait_end(self, timeout: float) -> End | None:
        """Skip output and return the end, or None if none came within ``timeout`` seconds
        (or the subscription was closed)."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                batch = self.read(timeout=remaining)
            except TimeoutError:
                return None
            if not batch:
                return None
            for event in batch:
                if not isinstance(event, Output):
                    return event

    def __iter__(self) -> Iterator[Event]:
        while batch := self.read():
            yield from batch

    def _parse(self) -> list[Event]:
        frames: list[tuple[int, bytes]] = []
        end: End | None = None
        try:
            for kind, payload in self._parser.frames():
                if kind in OUTPUT_KINDS:
                    frames.append((kind, payload))
                    self._offset += wire.HEADER.size + len(payload)
                else:
                    end = end_from_record(wire.parse_end(payload))
                    break
        except EngineError:
            end = Lost("corrupt stream")
        events: list[Event] = list(coalesce(frames))
        if end is not None:
            events.append(end)
            self.ended = True
            self._release(reuse=self._parser.pending == 0 and not isinstance(end, Lost))
        return events

    def _connection_ended(self) -> list[Event]:
        self._release(reuse=False)
        if self._session is None:
            self.ended = True
            return [Lost("closed_before_exit")]
        return self._finish_from_disk()

    def _finish_from_disk(self) -> list[Event]:
        """The rest of a journaled session from its files, then its recorded end.

        The end is read first, so when it exists the journal read after it is complete.
        """
        session = self._session
        self.ended = True
        if session is None:
            return [Lost("closed_before_exit")]
        try:
            end_record = session.end()
            parser = wire.Parser(kinds=OUTPUT_KINDS)
            frames: list[tuple[int, bytes]] = []
            for chunk in records.read_chunks(session.journal, self._offset):
                parser.feed(chunk)
                frames.extend(parser.frames())
        except (OSError, EngineError):
            return [Lost("agent_gone")]
        events: list[Event] = list(coalesce(frames))
        events.append(end_from_record(end_record) if end_record is not None else Lost("agent_gone"))
        return events

    def close(self) -> None:
        """Stop following: a read in progress returns with nothing; idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            sock = self._sock
            if sock is None:
                return
            if self._reading:
                # The reading thread closes it once its read returns.
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                return
            self._sock = None
        sock.close()

    def _release(self, *, reuse: bool) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
        if sock is None:
            return
        if reuse and self._on_finish is not None:
            self._on_finish(sock)
        else:
            sock.close()
