"""32 threads against a failing provider: the shared retry budget keeps the load near one
request per operation, and once it is spent every error surfaces after one try."""

from __future__ import annotations

import threading

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import Unavailable

from .conftest import TOKEN

THREADS = 32
CALLS_PER_THREAD = 5
BUDGET = 20
#: Seconds each thread may take for its calls (a bound, never expected to be reached).
THREAD_WAIT = 120.0


def test_threads_hammering_a_failing_provider_share_one_retry_budget(
    emu: SpritesEmulator,
) -> None:
    config.configure("sprites", base_url=emu.base_url, token=TOKEN)
    config.configure("retry", attempts=3, budget=BUDGET)
    handle = sandbox.create("sprites", "budgeted")
    path = "/v1/sprites/budgeted"
    emu.faults.add("status", status=503, method="GET", path=f"^{path}$", times=100_000)
    emu.clear_requests()
    errors: list[Unavailable] = []
    lock = threading.Lock()

    def hammer() -> None:
        for _ in range(CALLS_PER_THREAD):
            try:
                sandbox.get(handle)
            except Unavailable as error:
                with lock:
                    errors.append(error)

    threads = [threading.Thread(target=hammer) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THREAD_WAIT)
    assert not any(thread.is_alive() for thread in threads)

    operations = THREADS * CALLS_PER_THREAD
    assert len(errors) == operations
    sent = sum(1 for r in emu.requests if r.method == "GET" and r.path == path)
    # Without a budget: 3 tries each. With it: one each, plus at most BUDGET retries.
    assert operations <= sent <= operations + BUDGET
    assert sum(error.attempts == 1 for error in errors) >= operations - BUDGET

    emu.faults.clear()
    emu.clear_requests()
    sandbox.destroy(handle)
