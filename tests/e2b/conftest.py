"""Shared fixtures: one E2B emulator per test module, an adapter pointed at it (faults
cleared around each test, no reader or heartbeat thread left after it) and a fresh sandbox.
A module may define its own of any of them."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.types import Handle

from ..conftest import wait_until
from .emulated import API_KEY, adapter_threads, point_at

#: Bound, in seconds, on the wait for the adapter's threads to end after a test.
THREADS_WAIT = 10.0
#: How long an idle heartbeat thread lingers in these tests (each test waits for it).
LINGER = 0.05


@pytest.fixture(scope="module")
def emulator() -> Iterator[E2BEmulator]:
    """One emulator per module; its log keeps bodies (tests assert on what was sent)."""
    with E2BEmulator(credential=API_KEY, log_bodies=True) as running:
        yield running  # type: ignore[misc]


@pytest.fixture
def e2b(emulator: E2BEmulator) -> Iterator[E2B]:
    point_at(emulator)
    emulator.faults.clear()
    yield E2B(heartbeat_linger=LINGER)
    emulator.faults.clear()
    assert wait_until(lambda: not adapter_threads(), timeout=THREADS_WAIT), adapter_threads()


@pytest.fixture
def handle(e2b: E2B, emulator: E2BEmulator) -> Iterator[Handle]:
    created = e2b.create(f"box-{time.monotonic_ns()}")
    yield created
    emulator.faults.clear()
    e2b.destroy(created)
