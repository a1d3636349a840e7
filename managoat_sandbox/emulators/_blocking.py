"""Running one blocking call from an emulator's event loop, shared by every emulator.

An emulator's handlers must not block its event loop, yet the work they do
(starting and signalling processes, reading and writing a sandbox's files)
blocks. :func:`run_blocking` runs that work on a thread of its own that ends
with the call, never on a pool: an idle pool worker left behind after a
request would outlive every command and look like a leaked thread to the
thread-count checks of the emulators' callers.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


async def run_blocking(
    function: Callable[[], T],
    *,
    name: str | None = None,
    discard: Callable[[T], object] | None = None,
) -> T:
    """Await ``function()`` run on a fresh daemon thread; its value, or its exception.

    Where it runs: a new thread named ``name``, by default the running loop's
    thread name plus ``-call`` (``e2b-emulator`` serves ``e2b-emulator-call``),
    so that a thread left running can be traced to its emulator. The thread
    ends as soon as ``function`` returns or raises.

    Exceptions: whatever ``function`` raises (any ``BaseException``) is raised
    here, in the awaiting coroutine, with its traceback.

    Cancellation: cancelling the awaiting coroutine does not interrupt
    ``function`` (a thread cannot be stopped); it runs to its end and its
    exception is dropped. Its value, which nobody will have, is given to
    ``discard`` (on a thread, as it may block): a ``function`` that acquires
    something (a descriptor, a process) names here how to release it. The
    same holds if the loop has closed by the time ``function`` ends.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    lock = threading.Lock()
    #: What ``function`` gave (value, error) once it has ended; whether the awaiting
    #: coroutine gave up on it; whether it went to ``discard``.
    outcome: list[tuple[T | None, BaseException | None]] = []
    gave_up = threading.Event()
    dropped = threading.Event()

    def drop() -> None:
        with lock:
            if dropped.is_set() or not outcome:
                return
            dropped.set()
            value, error = outcome[0]
        if error is None and discard is not None:
            discard(value)  # type: ignore[arg-type]

    def settle() -> None:
        if future.done():  # cancelled meanwhile: the coroutine drops the value
            return
        value, error = outcome[0]
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def work() -> None:
        value: T | None = None
        error: BaseException | None = None
        try:
            value = function()
        except BaseException as caught:  # handed to the awaiting coroutine
            error = caught
        with lock:
            outcome.append((value, error))
            unwanted = gave_up.is_set()
        if unwanted:
            drop()
            return
        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop has closed: nobody awaits this call any more
            drop()

    thread_name = name or f"{threading.current_thread().name}-call"
    threading.Thread(target=work, name=thread_name, daemon=True).start()
    try:
        return await future
    except asyncio.CancelledError:
        with lock:
            gave_up.set()
            ended = bool(outcome)
        if ended:  # ended before the cancellation reached us: its value is ours to drop
            threading.Thread(target=drop, name=thread_name, daemon=True).start()
        raise
