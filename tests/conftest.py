"""Shared fixtures: a clean library configuration around every test.

Configuration is process-global, so tests that write it run serially (the
suite does not run tests in parallel; see ``test_config_guardrail.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest

from managoat_sandbox import config


@pytest.fixture(autouse=True)
def clean_config() -> Iterator[None]:
    """Reset configuration, with fast retries (1 ms base) as the original's test helper did."""
    config.reset()
    config.configure("retry", base_ms=1, max_ms=5)
    yield
    config.reset()


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, step: float = 0.01) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; returns the last answer."""
    event = threading.Event()
    waited = 0.0
    while not predicate():
        if waited >= timeout:
            return predicate()
        event.wait(step)
        waited += step
    return True
