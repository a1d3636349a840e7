"""Bridging the emulator's event loop and the blocking process engine.

:func:`in_thread` runs one blocking call on a short-lived thread of its own
(never a pool), so no emulator thread outlives the work it was started for.
:func:`tail` is :func:`managoat_sandbox._engine.follow` for the event loop:
the session's output from byte zero, live, then exactly one ``Exited`` or
``Lost``; it polls the journal, backing off while the process is quiet.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TypeVar

from ... import _engine as engine

_T = TypeVar("_T")
_FIRST_POLL = 0.002
_MAX_POLL = 0.05


async def in_thread(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a fresh daemon thread; its result or exception, awaited."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[_T] = loop.create_future()

    def settle_result(value: _T) -> None:
        if not future.done():
            future.set_result(value)

    def settle_error(error: BaseException) -> None:
        if not future.done():
            future.set_exception(error)

    def run() -> None:
        try:
            value = fn()
        except BaseException as error:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle_error, error)
        else:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(settle_result, value)

    threading.Thread(target=run, name="sprites-emulator-io", daemon=True).start()
    return await future


async def tail(session_dir: Path) -> AsyncIterator[engine.Event]:
    """The session's output events from byte zero, then its end (Exited or Lost).

    Stops silently when the journal disappears (the sprite was deleted).
    """
    try:
        reader = engine.JournalReader(session_dir)
    except OSError:
        return
    delay = _FIRST_POLL
    with reader:
        while True:
            try:
                chunk = reader.read()
                end = None if chunk else engine.status(session_dir)
            except (OSError, engine.EngineError):
                return
            if chunk:
                for output in chunk:
                    yield output
                delay = _FIRST_POLL
                continue
            if not isinstance(end, engine.Running):
                try:
                    rest = reader.read()
                    while rest:
                        for output in rest:
                            yield output
                        rest = reader.read()
                except (OSError, engine.EngineError):
                    return
                if end is not None:
                    yield end
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, _MAX_POLL)
