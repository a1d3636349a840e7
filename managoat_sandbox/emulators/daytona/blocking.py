"""Run a blocking call from the event loop on a thread that ends with the call.

The emulator's handlers must not block its event loop, but an idle thread
pool left behind after a request would look like a leaked thread to the
callers' thread-count checks. Each call therefore gets its own short-lived
daemon thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["run_blocking"]

T = TypeVar("T")


async def run_blocking(function: Callable[[], T], *, name: str = "daytona-emulator-call") -> T:
    """Await ``function()`` run on a fresh thread; its exception is re-raised here."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(value: T | None, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)  # type: ignore[arg-type]

    def deliver(value: T | None, error: BaseException | None) -> None:
        # A closed loop raises RuntimeError: nobody awaits this call any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    def work() -> None:
        try:
            value = function()
        except BaseException as error:
            deliver(None, error)
        else:
            deliver(value, None)

    threading.Thread(target=work, name=name, daemon=True).start()
    return await future
