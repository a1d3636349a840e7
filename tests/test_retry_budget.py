"""Retry advice on 503, the attempt count on the final error, and the shared retry budget."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from managoat_sandbox import config
from managoat_sandbox._budget import REFUND, Budget, budget_for
from managoat_sandbox._http import error_for
from managoat_sandbox.errors import Invalid, Unavailable
from managoat_sandbox.retry import with_backoff


def _failing(error: Exception, calls: list[int]) -> object:
    def fn() -> object:
        calls.append(1)
        raise error

    return fn


def test_a_503_carries_its_retry_after_and_the_retry_waits_for_it() -> None:
    error = error_for(503, b"booting", {"Retry-After": "2"})
    assert isinstance(error, Unavailable)
    assert error.retry_after == 2.0
    waits: list[float] = []
    calls: list[int] = []
    with pytest.raises(Unavailable):
        with_backoff(
            _failing(error, calls), attempts=2, base=0.001, max_delay=0.002, sleep=waits.append
        )
    assert waits and waits[0] >= 2.0


def test_a_503_asking_for_more_than_the_cap_is_raised_at_once() -> None:
    error = error_for(503, b"", {"Retry-After": "3600"})
    calls: list[int] = []
    with pytest.raises(Unavailable) as raised:
        with_backoff(_failing(error, calls), attempts=3, max_retry_after=5, sleep=lambda _: None)
    assert len(calls) == 1 and raised.value.attempts == 1


def test_other_5xx_carry_no_advice() -> None:
    error = error_for(500, b"", {"Retry-After": "2"})
    assert isinstance(error, Unavailable) and error.retry_after is None


def test_the_final_error_says_how_many_attempts_were_made() -> None:
    calls: list[int] = []
    with pytest.raises(Unavailable) as raised:
        with_backoff(_failing(Unavailable("down"), calls), attempts=3, sleep=lambda _: None)
    assert len(calls) == 3
    assert raised.value.attempts == 3
    assert "after 3 attempts" in str(raised.value)
    assert pickle.loads(pickle.dumps(raised.value)).attempts == 3


def test_a_permanent_error_is_tried_once_and_says_nothing_of_attempts() -> None:
    calls: list[int] = []
    with pytest.raises(Invalid) as raised:
        with_backoff(_failing(Invalid("bad"), calls), attempts=3, sleep=lambda _: None)
    assert len(calls) == 1
    assert raised.value.attempts == 1
    assert "attempts" not in str(raised.value)


def test_a_budget_spends_a_token_per_retry_and_refills_on_success() -> None:
    config.configure("retry", budget=2)
    budget = Budget()
    assert budget.take() and budget.take()
    assert not budget.take()
    for _ in range(round(1 / REFUND)):
        budget.refund()
    assert budget.take()
    assert not budget.take()


def test_a_spent_budget_surfaces_the_error_after_one_try() -> None:
    config.configure("retry", budget=1)
    budget = budget_for("some-provider")
    first: list[int] = []
    with pytest.raises(Unavailable):
        with_backoff(
            _failing(Unavailable("down"), first), attempts=5, sleep=lambda _: None, budget=budget
        )
    assert len(first) == 2
    second: list[int] = []
    with pytest.raises(Unavailable) as raised:
        with_backoff(
            _failing(Unavailable("down"), second), attempts=5, sleep=lambda _: None, budget=budget
        )
    assert len(second) == 1 and raised.value.attempts == 1


def test_budgets_are_per_provider_and_start_full_under_a_new_configuration() -> None:
    assert budget_for("a") is budget_for("a")
    assert budget_for("a") is not budget_for("b")
    before = budget_for("a")
    config.reset()
    assert budget_for("a") is not before


@pytest.mark.parametrize("value", [-1, "many", True, float("inf"), float("nan"), 10**400])
def test_a_bad_budget_setting_is_refused_naming_it(value: object) -> None:
    with pytest.raises(Invalid, match=r"retry\.budget") as caught:
        config.configure("retry", budget=value)
    assert caught.value.detail == ("config", "retry", "budget")
    assert Budget().take()


def test_a_script_without_logging_set_up_prints_no_retry_lines() -> None:
    script = (
        "import managoat_sandbox as s\n"
        "from managoat_sandbox.retry import with_backoff\n"
        "from managoat_sandbox.errors import Unavailable\n"
        "def down(): raise Unavailable('down')\n"
        "try:\n"
        "    with_backoff(down, attempts=2, base=0.001, max_delay=0.001)\n"
        "except Unavailable:\n"
        "    print('raised')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "raised\n"
    assert done.stderr == ""
