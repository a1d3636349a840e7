"""Following a session: replay its output from byte zero, tail it, end with its fate."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TypeAlias

from .journal import JournalReader, Output, coalesce
from .session import Exited, Lost, require_session, terminal_state

Event: TypeAlias = Output | Exited | Lost


def _drain(reader: JournalReader) -> Iterator[Output]:
    while chunk := reader.read():
        yield from chunk


def follow(
    session_dir: Path, *, stop: threading.Event | None = None, poll: float = 0.01
) -> Iterator[Event]:
    """Yield the session's output from byte zero, then live, then its end.

    Output events come in journal order (adjacent same-stream records may be
    merged). The last event is exactly one of ``Exited`` — yielded only after
    the exit record exists and the journal was read to its end again — or
    ``Lost`` when the supervisor is gone without an exit record. If ``stop``
    is set the generator returns within about ``poll`` seconds without a
    terminal event. Raises FileNotFoundError if ``session_dir`` is not a session.
    """
    require_session(session_dir)
    stop = stop if stop is not None else threading.Event()
    with JournalReader(session_dir) as reader:
        while not stop.is_set():
            chunk = reader.read()
            if chunk:
                yield from chunk
                continue
            end = terminal_state(session_dir)
            if end is not None:
                yield from _drain(reader)
                yield end
                return
            stop.wait(poll)


def read_all(session_dir: Path) -> tuple[list[Output], Exited | Lost | None]:
    """A snapshot: all output journaled so far and the end, or None while running.

    The end is determined before reading, so for an ended session the output
    is complete. Raises FileNotFoundError if ``session_dir`` is not a session.
    """
    require_session(session_dir)
    end = terminal_state(session_dir)
    with JournalReader(session_dir) as reader:
        return coalesce(list(_drain(reader))), end
