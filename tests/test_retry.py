"""Retry: the with_backoff rules (docs/protocols/contract.md#retry) and the idempotent decorator."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import (
    AlreadyExists,
    CommandExited,
    Denied,
    Invalid,
    NotFound,
    NotSupported,
    ProviderError,
    RateLimited,
    RestoreFailed,
    Truncated,
    Unavailable,
    WriteFailed,
)
from managoat_sandbox.retry import idempotent, transient, with_backoff
from managoat_sandbox.testing import Fake


class Script:
    """A callable that plays a list of outcomes: exceptions are raised, values returned."""

    def __init__(self, *outcomes: Any) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def no_sleep(delays: list[float]) -> Callable[[float], None]:
    return delays.append


def test_first_try_success_passes_through_without_retrying() -> None:
    fn = Script("ok")
    assert with_backoff(fn, sleep=no_sleep([])) == "ok"
    assert fn.calls == 1


def test_retries_a_transient_error_and_returns_the_eventual_success() -> None:
    fn = Script(Unavailable("timeout"), "won")
    assert with_backoff(fn, base=0.001, sleep=no_sleep([])) == "won"
    assert fn.calls == 2


def test_gives_up_after_the_attempt_budget_and_raises_the_last_error() -> None:
    errors = [Unavailable(("blip", n)) for n in range(5)]
    fn = Script(*errors)
    with pytest.raises(Unavailable) as caught:
        with_backoff(fn, attempts=3, base=0.001, sleep=no_sleep([]))
    assert fn.calls == 3
    assert caught.value is errors[2]


def test_does_not_retry_a_permanent_error() -> None:
    fn = Script(NotFound(), "never")
    with pytest.raises(NotFound):
        with_backoff(fn, sleep=no_sleep([]))
    assert fn.calls == 1


def test_retries_an_unknown_exception_and_reraises_when_exhausted() -> None:
    fn = Script(RuntimeError("Failed to start command: closed"))
    with pytest.raises(RuntimeError, match="closed"):
        with_backoff(fn, attempts=2, base=0.001, sleep=no_sleep([]))
    assert fn.calls == 2


def test_a_raise_before_the_budget_returns_the_recovery() -> None:
    fn = Script(RuntimeError("boom"), "ok")
    assert with_backoff(fn, base=0.001, sleep=no_sleep([])) == "ok"
    assert fn.calls == 2


def test_honours_a_custom_retriable_classifier() -> None:
    fn = Script(Unavailable("special"), "never")
    with pytest.raises(Unavailable):
        with_backoff(fn, retriable=lambda e: e.detail != "special", sleep=no_sleep([]))
    assert fn.calls == 1


def test_unknown_shapes_default_to_transient() -> None:
    assert transient(TimeoutError())
    assert transient(RuntimeError("x"))
    assert transient(ConnectionResetError())


def test_the_taxonomy_classifies_directly() -> None:
    for error in (
        Unavailable(("http", 502, {})),
        RateLimited(17),
        ProviderError("sprites", "weird"),
        CommandExited(),
        WriteFailed("x"),
    ):
        assert transient(error), error
    for error in (
        NotFound(),
        Truncated(),
        NotSupported(),
        AlreadyExists(),
        Denied(("http", 401, {})),
        Invalid(("http", 422, {})),
        RestoreFailed("no such checkpoint"),
    ):
        assert not transient(error), error


def test_delays_are_half_to_full_jitter_of_a_capped_exponential() -> None:
    delays: list[float] = []
    fn = Script(Unavailable("x"))
    with pytest.raises(Unavailable):
        with_backoff(fn, attempts=6, base=0.1, max_delay=0.3, sleep=no_sleep(delays))
    ceilings = [0.1, 0.2, 0.3, 0.3, 0.3]
    assert len(delays) == 5
    for delay, ceiling in zip(delays, ceilings, strict=True):
        assert ceiling / 2 <= delay <= ceiling


def test_defaults_come_from_the_retry_config_scope() -> None:
    config.configure("retry", attempts=4, base_ms=100, max_ms=100)
    delays: list[float] = []
    fn = Script(Unavailable("x"))
    with pytest.raises(Unavailable):
        with_backoff(fn, sleep=no_sleep(delays))
    assert fn.calls == 4
    assert all(0.05 <= d <= 0.1 for d in delays)


def test_attempts_one_turns_retries_off_and_below_one_is_an_error() -> None:
    fn = Script(Unavailable("x"), "ok")
    with pytest.raises(Unavailable):
        with_backoff(fn, attempts=1, sleep=no_sleep([]))
    assert fn.calls == 1
    with pytest.raises(Invalid) as caught:
        with_backoff(fn, attempts=0)
    assert caught.value.detail[0] == "attempts"
    assert fn.calls == 1


def test_retry_after_is_honoured_as_a_minimum_delay() -> None:
    delays: list[float] = []
    fn = Script(RateLimited(2.5), "ok")
    assert with_backoff(fn, base=0.001, sleep=no_sleep(delays)) == "ok"
    assert delays == [2.5]


def test_retry_after_beyond_the_cap_is_reraised_at_once() -> None:
    fn = Script(RateLimited(60), "ok")
    with pytest.raises(RateLimited):
        with_backoff(fn, max_retry_after=30, sleep=no_sleep([]))
    assert fn.calls == 1


def test_keyboard_interrupt_is_never_caught() -> None:
    fn = Script(KeyboardInterrupt(), "ok")
    with pytest.raises(KeyboardInterrupt):
        with_backoff(fn, sleep=no_sleep([]))
    assert fn.calls == 1


def test_each_retry_logs_one_warning_naming_operation_attempt_class_and_delay(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fn = Script(Unavailable("x"), "ok")
    with caplog.at_level(logging.WARNING, logger="managoat_sandbox"):
        with_backoff(fn, base=0.002, label="get", sleep=no_sleep([]))
    [record] = caplog.records
    message = record.getMessage()
    assert "get" in message and "attempt 1" in message and "Unavailable" in message
    assert "retrying in" in message


def test_idempotent_refuses_non_idempotent_functions_at_decoration_time() -> None:
    for name in (
        "exec",
        "spawn",
        "write_stdin",
        "create_new",
        "destroy_once",
        "create_checkpoint",
        "create_checkpoint_once",
        "restore_checkpoint",
        "terminate_session",
        "attach",
    ):

        def fn() -> None: ...

        fn.__name__ = name
        with pytest.raises(TypeError, match="not an idempotent operation"):
            idempotent(fn)


def test_idempotent_retries_only_transient_taxonomy_errors() -> None:
    calls = {"n": 0}

    @idempotent
    def get() -> str:
        calls["n"] += 1
        if calls["n"] == 1:
            raise Unavailable("blip")
        return "ok"

    assert get() == "ok" and calls["n"] == 2

    @idempotent
    def destroy() -> None:
        calls["n"] += 1
        raise TypeError("bad argument")

    calls["n"] = 0
    with pytest.raises(TypeError):
        destroy()
    assert calls["n"] == 1


def test_idempotent_accepts_options() -> None:
    calls = {"n": 0}

    @idempotent(attempts=5)
    def list_sessions() -> None:
        calls["n"] += 1
        raise Unavailable("down")

    with pytest.raises(Unavailable):
        list_sessions()
    assert calls["n"] == 5


def test_the_facade_retries_idempotent_operations_and_runs_the_others_once() -> None:
    fake = Fake()
    config.configure(adapters={"fake": fake})
    handle = sandbox.create("fake", "retry-box")
    fake.fail_next("get", Unavailable("blip"), times=2)
    assert sandbox.get(handle).status == "running"
    fake.fail_next("exec", Unavailable("blip"))
    with pytest.raises(Unavailable):
        sandbox.exec(handle, "emit", ["out:x"])
    assert sandbox.exec(handle, "emit", ["out:x"]).output == b"x"
    fake.fail_next("get", Unavailable("blip"), times=3)
    with pytest.raises(Unavailable):
        sandbox.get(handle)
    fake.fail_next("get", Denied("no"))
    with pytest.raises(Denied):
        sandbox.get(handle)
    assert sandbox.get(handle).status == "running"


def test_more_tries_than_a_float_can_double_never_overflow() -> None:
    delays: list[float] = []
    fn = Script(*[Unavailable("down")] * 1099, "ok")
    assert (
        with_backoff(fn, attempts=1100, base=1e-9, max_delay=1e-6, sleep=no_sleep(delays)) == "ok"
    )
    assert fn.calls == 1100 and max(delays) <= 1e-6


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"attempts": True}, TypeError),
        ({"attempts": 2.0}, TypeError),
        ({"attempts": -1}, Invalid),
        ({"base": "1"}, TypeError),
        ({"base": -1}, Invalid),
        ({"base": float("nan")}, Invalid),
        ({"max_delay": 10**400}, Invalid),
        ({"max_retry_after": float("inf")}, Invalid),
    ],
)
def test_arguments_follow_the_rules_of_the_settings_they_stand_in_for(
    options: dict[str, Any], error: type[Exception]
) -> None:
    fn = Script(Unavailable("x"), "ok")
    with pytest.raises(error):
        with_backoff(fn, sleep=no_sleep([]), **options)
    assert fn.calls == 0
