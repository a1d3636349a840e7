"""One monotonic deadline: exec's, or a bounded operation's.

A :class:`Deadline` is fixed when it is made (``timeout`` seconds from now, on a
monotonic clock) and never moves: every wait is bounded by what is left of it
(:meth:`Deadline.clamp`), and every expiry raises its one error
(:meth:`Deadline.error`). The exec collector that keeps exec's deadline rules
(output never extends it; a successful exit after expiry is still a timeout) is
:mod:`managoat_sandbox._collect`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import overload

from ._args import optional_seconds
from .errors import DeadlineExpired
from .reasons import Reason

__all__ = ["Deadline"]


class Deadline:
    """A single deadline ``timeout`` seconds from now; ``None`` (or ``inf``) never expires.

    ``timeout`` follows exec's rule (:func:`~managoat_sandbox._args.optional_seconds`),
    checked here so that every exec built on a ``Deadline`` refuses a bad one before
    it runs anything, whether called through the facade or not: a negative or NaN
    timeout is ``Invalid(("timeout", ...))`` naming the allowed range, and ``0`` is
    already expired.

    Every bound derived from it goes through :meth:`clamp`, and every expiry
    raises :meth:`error`: exec's ``DeadlineExpired(("exec_timeout", timeout))``,
    or, for a deadline built with a ``reason`` (a bounded operation's
    :func:`~managoat_sandbox.reasons.timed_out`), ``DeadlineExpired(reason)``.
    """

    def __init__(
        self,
        timeout: float | None,
        *,
        reason: Reason | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.timeout = timeout
        self.reason = reason
        self._clock = clock
        seconds = optional_seconds(timeout)
        self._expires = None if seconds is None else clock() + seconds

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no deadline."""
        expires = self._expires
        if expires is None:
            return None
        left = expires - self._clock()
        return left if left > 0 else 0.0

    def expired(self) -> bool:
        """Whether no time is left (never, for no deadline)."""
        expires = self._expires
        return expires is not None and expires - self._clock() <= 0

    def error(self) -> DeadlineExpired:
        """The error an expired deadline raises: ``DeadlineExpired(reason)`` when built with
        a ``reason``, else exec's ``DeadlineExpired(("exec_timeout", timeout))``."""
        if self.reason is not None:
            return DeadlineExpired(self.reason)
        return DeadlineExpired(Reason.EXEC_TIMEOUT, seconds=self.timeout)

    def check(self) -> None:
        """Raise :meth:`error` if no time is left."""
        if self.expired():
            raise self.error()

    @overload
    def clamp(self, limit: float) -> float: ...

    @overload
    def clamp(self, limit: None = None) -> float | None: ...

    def clamp(self, limit: float | None = None) -> float | None:
        """``limit`` seconds (``None``: unbounded) cut to what is left of the deadline.

        The smaller of the two, ``None`` only when both are unbounded; raises
        :meth:`error` when no time is left, so a wait is never given zero.
        """
        expires = self._expires
        if expires is None:
            return limit
        left = expires - self._clock()
        if left <= 0:
            raise self.error()
        return left if limit is None or left < limit else limit
