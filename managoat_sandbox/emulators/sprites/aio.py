"""Bridging the emulator's event loop and the blocking process engine's subscriptions.

One-off blocking calls go through the emulators' shared
:func:`~managoat_sandbox.emulators._blocking.run_blocking`.
:func:`follow` hands a box subscription's events to the loop as the agent
pushes them: its output from where the subscription starts, then exactly one
end (``Exited`` with the real code, or ``Lost``). :func:`end_of` waits for a
subscription's end only.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncGenerator

from ..._engine.errors import EngineError
from ..._engine.events import End, Event, Exited, Lost
from ..._engine.subscription import Subscription
from .._blocking import run_blocking

#: Batches read ahead of the loop before the reading thread waits for it.
_AHEAD = 4
#: The shortest wait for an end (a zero timeout would make the socket non-blocking).
_MIN_WAIT = 0.001


def is_end(event: Event) -> bool:
    """Whether ``event`` is a process's end (``Exited`` or ``Lost``)."""
    return isinstance(event, (Exited, Lost))


async def follow(subscription: Subscription) -> AsyncGenerator[Event, None]:
    """The subscription's events in order, ending after its end event.

    A thread of its own reads the subscription (blocking, no polling) at most
    a few batches ahead of the consumer. The subscription is closed when the
    generator finishes or is closed (use :func:`contextlib.aclosing`), which
    also ends the thread. Stops without an end only if the subscription fails
    or is closed elsewhere.
    """
    loop = asyncio.get_running_loop()
    batches: asyncio.Queue[list[Event]] = asyncio.Queue()
    credits = threading.Semaphore(_AHEAD)
    stopped = threading.Event()

    def pump() -> None:
        while True:
            credits.acquire()
            if stopped.is_set():
                return
            try:
                batch = subscription.read()
            except (OSError, EngineError):
                batch = []
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(batches.put_nowait, batch)
            if not batch or is_end(batch[-1]):
                return

    threading.Thread(target=pump, name="sprites-emulator-follow", daemon=True).start()
    try:
        while True:
            batch = await batches.get()
            credits.release()
            for event in batch:
                yield event
            if not batch or is_end(batch[-1]):
                return
    finally:
        stopped.set()
        subscription.close()
        credits.release()


def _wait_end(subscription: Subscription, seconds: float) -> End | None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            batch = subscription.read(timeout=max(deadline - time.monotonic(), _MIN_WAIT))
        except (OSError, EngineError):  # TimeoutError included
            return None
        if not batch:
            return None
        last = batch[-1]
        if isinstance(last, (Exited, Lost)):
            return last
        if time.monotonic() >= deadline:
            return None


async def end_of(subscription: Subscription, seconds: float) -> End | None:
    """The subscription's end event within ``seconds`` (output is skipped; an end
    already there counts even for 0); None if it does not come in time or the
    subscription is closed meanwhile."""
    return await run_blocking(lambda: _wait_end(subscription, seconds))
