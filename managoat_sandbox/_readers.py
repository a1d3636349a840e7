"""Reader threads that outlive their stream a moment, to read the next one.

A streamed command needs a thread that reads its transport while the caller
does something else; starting one and letting it end costs a short command
more CPU time and latency than anything else it does (the new thread's start
handshake, its stack, its end and the join). :class:`Readers` keeps a reader
whose work is done for ``linger`` seconds, waiting for the next work; work
handed to it while it waits starts no thread (one wakeup instead). A reader
that gets none in that time ends. An adapter that wants this passes its
:class:`Readers` to :meth:`~._streaming.Stream.start`.

A reader runs one work at a time and takes the name given with it (threads are
named after the stream they read); a waiting reader is named ``idle_name``, so
no thread carries the name of a stream it is done with. Nothing bounds how
many readers there are: as many as there are works running at once, each
ending ``linger`` seconds after its last one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import attrs

__all__ = ["Readers"]

Work = Callable[[], None]


#: A work to run: the name its reader takes, the work, and the event set once it is done.
_Job = tuple[str, Work, threading.Event]


@attrs.define(eq=False)
class _Reader:
    """One reader's next work (``None`` while it waits); guarded by the ``Readers``
    lock. ``wake`` is set when work is handed to it."""

    job: _Job | None
    wake: threading.Event = attrs.field(factory=threading.Event)


class Readers:
    """Reader threads, each kept ``linger`` seconds after its work for the next one,
    named ``idle_name`` while it waits."""

    def __init__(self, linger: float, *, idle_name: str) -> None:
        self._linger = linger
        self._idle_name = idle_name
        self._lock = threading.Lock()
        self._waiting: list[_Reader] = []

    def run(self, name: str, work: Work) -> threading.Event:
        """Run ``work()`` in a waiting reader, renamed ``name``, or in a new daemon
        thread of that name; the event returned is set once ``work`` has returned and
        its reader no longer carries ``name``. ``work`` should not raise: what it
        raises ends its reader (the event is still set)."""
        done = threading.Event()
        with self._lock:
            reader = self._waiting.pop() if self._waiting else None
            if reader is not None:
                reader.job = (name, work, done)
        if reader is not None:
            reader.wake.set()
        else:
            fresh = _Reader((name, work, done))
            threading.Thread(target=self._serve, args=(fresh,), name=name, daemon=True).start()
        return done

    def _serve(self, reader: _Reader) -> None:
        """Run the reader's work, then wait for the next, until ``linger`` passes with
        none (a work handed over while it gives up is still taken: the lock decides)."""
        current = threading.current_thread()
        job = reader.job
        while job is not None:
            name, work, done = job
            current.name = name
            try:
                work()
            finally:
                current.name = self._idle_name
                done.set()
            with self._lock:
                reader.job = None
                reader.wake.clear()
                self._waiting.append(reader)
            reader.wake.wait(self._linger)
            with self._lock:
                job = reader.job
                if job is None:
                    self._waiting.remove(reader)
