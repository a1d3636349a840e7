"""The suite's one wait helper, :func:`tests.conftest.wait_until`: a deadline in elapsed time."""

from __future__ import annotations

import types

import pytest

from . import conftest
from .conftest import wait_until


class Clock:
    """A monotonic clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock ``wait_until`` reads, replaced by one the test moves."""
    fake = Clock()
    monkeypatch.setattr(conftest, "time", types.SimpleNamespace(monotonic=fake.monotonic))
    return fake


def test_a_slow_predicate_cannot_stretch_the_deadline(clock: Clock) -> None:
    calls: list[float] = []

    def slow_and_false() -> bool:
        calls.append(clock.now)
        clock.now += 1.0  # each poll takes a second of the five
        return False

    assert wait_until(slow_and_false, timeout=5.0, step=0.001) is False
    assert len(calls) <= 7, "counted steps, not elapsed time"


def test_it_returns_as_soon_as_the_predicate_holds(clock: Clock) -> None:
    answers = iter([False, False, True])
    calls: list[bool] = []

    def third_time() -> bool:
        calls.append(True)
        return next(answers)

    assert wait_until(third_time, timeout=5.0, step=0.001) is True
    assert len(calls) == 3


def test_the_predicate_is_asked_once_more_at_the_deadline(clock: Clock) -> None:
    calls: list[bool] = []

    def true_only_after_the_deadline() -> bool:
        calls.append(True)
        clock.now += 10.0
        return len(calls) > 1

    assert wait_until(true_only_after_the_deadline, timeout=5.0) is True
    assert len(calls) == 2
