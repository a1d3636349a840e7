"""Retry budgets: one token bucket per provider, shared by every thread.

Retries multiply the load on a provider that is already failing: 32 threads
each retrying three times send three times the requests exactly when the
provider can least take them. A budget bounds that. Each retry takes one token
from its provider's bucket; each success puts :data:`REFUND` back, up to the
bucket's capacity (config ``retry.budget``, in retries; default 100). While a
bucket is empty no retry is made: the failure surfaces at once, so a provider
that keeps failing sees about one request per operation until successes refill
it. Buckets are kept per provider for the life of the configuration that
serves it (a new ``adapters`` map or ``config.reset`` starts them full).
"""

from __future__ import annotations

import threading

from . import config
from ._settings import read

__all__ = ["REFUND", "Budget", "budget_for"]

#: Tokens a success returns: eight successes earn one retry (a binary fraction, so sums are exact).
REFUND = 0.125


class Budget:
    """A thread-safe token bucket; ``capacity`` is read from config at each use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._tokens: float | None = None

    @staticmethod
    def capacity() -> float:
        """The configured capacity (``retry.budget``), checked by its rule."""
        return float(read("retry", "budget"))

    def _level(self, capacity: float) -> float:
        tokens = capacity if self._tokens is None else min(self._tokens, capacity)
        self._tokens = tokens
        return tokens

    def take(self) -> bool:
        """Take one retry's token; ``False`` (and nothing taken) when the bucket is empty."""
        capacity = self.capacity()
        with self._lock:
            tokens = self._level(capacity)
            if tokens < 1:
                return False
            self._tokens = tokens - 1
            return True

    def refund(self) -> None:
        """Return :data:`REFUND` after a success, up to the capacity."""
        capacity = self.capacity()
        with self._lock:
            self._tokens = min(self._level(capacity) + REFUND, capacity)

    @property
    def tokens(self) -> float:
        """Tokens left now."""
        capacity = self.capacity()
        with self._lock:
            return self._level(capacity)


_lock = threading.Lock()
_budgets: dict[tuple[str, int], Budget] = {}


def budget_for(provider: str) -> Budget:
    """The budget shared by every retry against ``provider`` under the current configuration."""
    key = (provider, config.generation())
    with _lock:
        budget = _budgets.get(key)
        if budget is None:
            for stale in [k for k in _budgets if k[1] != key[1]]:
                del _budgets[stale]
            budget = _budgets[key] = Budget()
        return budget
