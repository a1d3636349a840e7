"""Running blocking work (process starts, kills, stdin writes) off the event loop.

Each call gets a short-lived daemon thread that ends with the call, instead of
a pool whose idle workers would outlive every command.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


def _settle(future: asyncio.Future[T], result: T | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)  # type: ignore[arg-type]


async def run_blocking(fn: Callable[[], T], name: str = "e2b-emulator-call") -> T:
    """Run ``fn()`` in its own thread and await its result (or exception)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def work() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = fn()
        except BaseException as caught:  # handed to the awaiting coroutine
            error = caught
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody awaits the result
            loop.call_soon_threadsafe(_settle, future, result, error)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
