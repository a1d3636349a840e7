"""Retry with bounded, jittered backoff — for idempotent operations only.

:func:`with_backoff` retries any retriable failure; :func:`idempotent` is the
decorator the facade uses, which retries only taxonomy errors whose
``transient`` is true and refuses, at decoration time, any function that is not
one of the idempotent operations (so ``exec``, ``spawn``, ``create_new`` and
friends can never be retried by it).
"""

from __future__ import annotations

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar, overload

import attrs

from . import _setting_rules
from ._budget import Budget, budget_for
from ._settings import read
from .contract import IDEMPOTENT_OPERATIONS
from .errors import RateLimited, SandboxError, Unavailable
from .reasons import Reason

__all__ = ["Budget", "budget_for", "idempotent", "transient", "with_backoff"]

log = logging.getLogger("managoat_sandbox.retry")

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


def transient(error: BaseException) -> bool:
    """Whether an idempotent caller may retry after ``error``.

    Taxonomy errors answer with their ``transient`` flag; anything outside the
    taxonomy counts as transient (a pointless retry costs milliseconds).
    """
    if isinstance(error, SandboxError):
        return type(error).transient
    return True


#: The backoff ceiling stops doubling after this many tries (at 2**64 times ``base``, past
#: any useful delay), so ``base * 2**n`` stays a finite float for any ``attempts``.
_MAX_DOUBLINGS = 64


def _seconds(value: float | None, key_ms: str, name: Reason) -> float:
    """Argument ``name`` (seconds), else config ``retry.<key_ms>``; both by one rule."""
    if value is None:
        return float(read("retry", key_ms))
    return float(_setting_rules.argument(_setting_rules.delay_seconds, name, value))


def _attempts(value: int | None) -> int:
    """Argument ``attempts``, else config ``retry.attempts``; both by one rule."""
    if value is None:
        return int(read("retry", "attempts"))
    return int(_setting_rules.argument(_setting_rules.count(1), Reason.ATTEMPTS, value))


def with_backoff(
    fn: Callable[[], T],
    *,
    attempts: int | None = None,
    base: float | None = None,
    max_delay: float | None = None,
    max_retry_after: float | None = None,
    label: str = "external call",
    retriable: Callable[[BaseException], bool] = transient,
    sleep: Callable[[float], None] = time.sleep,
    budget: Budget | None = None,
) -> T:
    """Call ``fn()``, retrying retriable exceptions; re-raise the last one.

    ``attempts`` counts every try (default: config ``retry.attempts``, 3).
    The delay before try ``n+1`` is uniform in ``[c/2, c]`` with
    ``c = min(base * 2**(n-1), max_delay)`` (seconds; defaults from config
    ``retry.base_ms``/``retry.max_ms``). Each argument follows its setting's
    rule: ``attempts`` an int from 1, the delays numbers of seconds from 0 up
    to ``threading.TIMEOUT_MAX``; a wrong type is ``TypeError``, a value out of
    range ``Invalid``. A ``RateLimited`` or ``Unavailable``
    carrying a ``retry_after`` waits at least that long, and is re-raised at
    once when it asks for more than ``max_retry_after``. With a ``budget``
    (:mod:`managoat_sandbox._budget`) every retry takes a token from it and a
    success returns some; with the budget spent the error is re-raised at
    once. A re-raised taxonomy error's ``attempts`` says how many tries were
    made (and its message, when more than one). ``KeyboardInterrupt`` and
    ``SystemExit`` are never caught.
    """
    policy = _Policy(
        _attempts(attempts),
        retriable,
        _seconds(base, "base_ms", Reason.BASE),
        _seconds(max_delay, "max_ms", Reason.MAX_DELAY),
        _seconds(max_retry_after, "max_retry_after_ms", Reason.MAX_RETRY_AFTER),
        budget,
        label,
    )
    attempt = 1
    while True:
        try:
            result = fn()
        except Exception as error:
            delay = policy.delay_after(error, attempt)
            if delay is None:
                if isinstance(error, SandboxError):
                    error.attempts = attempt
                raise
            log.warning(
                "retry: %s attempt %d failed (%s), retrying in %.3fs",
                label,
                attempt,
                type(error).__name__,
                delay,
            )
            sleep(delay)
            attempt += 1
        else:
            if budget is not None:
                budget.refund()
            return result


@attrs.frozen
class _Policy:
    """One call's retry settings, resolved once before the first try."""

    total: int
    retriable: Callable[[BaseException], bool]
    base: float
    max_delay: float
    max_retry_after: float
    budget: Budget | None
    label: str

    def delay_after(self, error: Exception, attempt: int) -> float | None:
        """Seconds to wait before the next try after ``error``, or ``None`` to re-raise it."""
        if attempt >= self.total or not self.retriable(error):
            return None
        ceiling = min(self.base * 2.0 ** min(attempt - 1, _MAX_DOUBLINGS), self.max_delay)
        delay = random.uniform(ceiling / 2, ceiling)
        advice = error.retry_after if isinstance(error, (RateLimited, Unavailable)) else None
        if advice is not None:
            if advice > self.max_retry_after:
                return None
            delay = max(delay, float(advice))
        if self.budget is not None and not self.budget.take():
            log.debug("retry: %s not retried: the provider's retry budget is spent", self.label)
            return None
        return delay


def _retriable_taxonomy(error: BaseException) -> bool:
    return isinstance(error, SandboxError) and type(error).transient


@overload
def idempotent(fn: F) -> F: ...
@overload
def idempotent(fn: None = None, **options: Any) -> Callable[[F], F]: ...
def idempotent(fn: F | None = None, **options: Any) -> F | Callable[[F], F]:
    """Wrap an idempotent operation in :func:`with_backoff`.

    Usable bare (``@idempotent``) or with ``with_backoff`` options
    (``@idempotent(attempts=5)``). Only transient taxonomy errors are retried.
    Raises ``TypeError`` at decoration time unless ``fn.__name__`` is one of
    the idempotent operations.
    """

    def decorate(target: F) -> F:
        name = getattr(target, "__name__", None)
        if name not in IDEMPOTENT_OPERATIONS:
            raise TypeError(
                f"{name!r} is not an idempotent operation; only "
                f"{sorted(IDEMPOTENT_OPERATIONS)} may be retried"
            )

        @functools.wraps(target)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            return with_backoff(
                lambda: target(*args, **kwargs),
                label=name,
                retriable=_retriable_taxonomy,
                **options,
            )

        return wrapper  # type: ignore[return-value]

    return decorate if fn is None else decorate(fn)
