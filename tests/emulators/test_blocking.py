"""The emulators' one ``run_blocking``: where it runs a call, and what comes back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from managoat_sandbox.emulators._blocking import run_blocking

DEADLINE = 10.0
T = TypeVar("T")


def _in_loop_thread(name: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` in an event loop on a thread called ``name``; its result."""
    outcome: dict[str, T] = {}

    def serve() -> None:
        outcome["value"] = asyncio.run(main())

    thread = threading.Thread(target=serve, name=name)
    thread.start()
    thread.join(DEADLINE)
    assert not thread.is_alive()
    return outcome["value"]


def test_the_value_comes_from_another_thread_that_then_ends() -> None:
    seen: list[threading.Thread] = []

    def work() -> int:
        seen.append(threading.current_thread())
        return 42

    async def main() -> int:
        value = await run_blocking(work)
        assert seen[0] is not threading.current_thread()
        return value

    assert asyncio.run(main()) == 42
    seen[0].join(DEADLINE)
    assert not seen[0].is_alive()


def test_the_exception_is_raised_in_the_awaiting_coroutine() -> None:
    error = KeyError("gone")

    def work() -> None:
        raise error

    async def main() -> None:
        await run_blocking(work)

    with pytest.raises(KeyError) as caught:
        asyncio.run(main())
    assert caught.value is error


def test_the_thread_is_named_after_the_loop_thread_unless_named() -> None:
    def name() -> str:
        return threading.current_thread().name

    async def main() -> tuple[str, str]:
        return await run_blocking(name), await run_blocking(name, name="chosen")

    assert _in_loop_thread("demo-emulator", main) == ("demo-emulator-call", "chosen")


def test_cancelling_the_caller_lets_the_call_finish_and_drops_its_value() -> None:
    started, release = threading.Event(), threading.Event()
    workers: list[threading.Thread] = []

    def work() -> str:
        workers.append(threading.current_thread())
        started.set()
        release.wait(DEADLINE)
        return "unwanted"

    async def main() -> list[dict[str, Any]]:
        problems: list[dict[str, Any]] = []
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: problems.append(context))
        task = asyncio.ensure_future(run_blocking(work))
        assert await run_blocking(lambda: started.wait(DEADLINE))
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        await run_blocking(lambda: workers[0].join(DEADLINE))
        assert not workers[0].is_alive()
        await asyncio.sleep(0)  # the worker's hand-over, queued before this, now runs
        return problems

    assert asyncio.run(main()) == []


@pytest.mark.parametrize("closed_loop", [False, True], ids=["cancelled", "loop-closed"])
def test_a_value_nobody_awaits_is_discarded_and_one_awaited_is_not(closed_loop: bool) -> None:
    started, release = threading.Event(), threading.Event()
    discarded: list[str] = []
    done = threading.Event()

    def work() -> str:
        started.set()
        release.wait(DEADLINE)
        return "acquired"

    def discard(value: str) -> None:
        discarded.append(value)
        done.set()

    async def main() -> None:
        assert await run_blocking(lambda: "kept", discard=discard) == "kept"
        task = asyncio.ensure_future(run_blocking(work, discard=discard))
        assert await run_blocking(lambda: started.wait(DEADLINE))
        if closed_loop:
            return  # asyncio.run cancels the task and closes the loop
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()

    asyncio.run(main())
    release.set()
    assert done.wait(DEADLINE)
    assert discarded == ["acquired"]
