"""One monotonic deadline (exec's, or a bounded operation's) and the exec collector.

``exec`` over a streaming adapter is: check the deadline, spawn with a private
queue as owner, then collect frames while consulting the deadline *before
every wait* — output never extends it, queued frames do not outrun it, and a
successful exit that arrives after expiry is still a timeout. Expiry abandons
the local collector (``stop_command``); the remote process may go on.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from typing import Any, overload

from . import reasons
from .errors import DeadlineExpired
from .frames import Error, Exit, Stderr, Stdout
from .types import Command, ExecResult

__all__ = ["Deadline", "collect_exec"]


class Deadline:
    """A single deadline ``timeout`` seconds from now; ``None`` never expires.

    Every bound derived from it goes through :meth:`clamp`, and every expiry
    raises :meth:`error`: exec's ``DeadlineExpired(("exec_timeout", timeout))``,
    or, for a deadline built with a ``reason`` (a bounded operation's
    :func:`~managoat_sandbox.reasons.timed_out`), ``DeadlineExpired(reason)``.
    """

    def __init__(
        self,
        timeout: float | None,
        *,
        reason: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.timeout = timeout
        self.reason = reason
        self._clock = clock
        self._expires = None if timeout is None else clock() + max(timeout, 0.0)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no deadline."""
        if self._expires is None:
            return None
        return max(self._expires - self._clock(), 0.0)

    def expired(self) -> bool:
        """Whether no time is left (never, for no deadline)."""
        return self.remaining() == 0

    def error(self) -> DeadlineExpired:
        """The error an expired deadline raises: ``DeadlineExpired(reason)`` when built with
        a ``reason``, else exec's ``DeadlineExpired(("exec_timeout", timeout))``."""
        if self.reason is not None:
            return DeadlineExpired(self.reason)
        return DeadlineExpired((reasons.EXEC_TIMEOUT, self.timeout))

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
        remaining = self.remaining()
        if remaining == 0:
            raise self.error()
        if remaining is None:
            return limit
        return remaining if limit is None else min(limit, remaining)


def collect_exec(
    start: Callable[[queue.SimpleQueue[Any]], Command],
    stop: Callable[[Command], None],
    *,
    deadline: Deadline,
    stderr_to_stdout: bool = False,
) -> ExecResult:
    """Run ``start(owner)`` and collect its frames into an :class:`ExecResult`.

    ``start`` spawns the command with the given queue as owner; ``stop``
    abandons it (called on every way out). Stdout is collected as the output;
    stderr joins it in arrival order when ``stderr_to_stdout``, else it is
    collected apart as the result's ``stderr``; an ``Error`` frame is raised as its
    reason (so a close without exit is ``Unavailable("closed_before_exit")``,
    partial output discarded).
    """
    deadline.check()
    frames: queue.SimpleQueue[Any] = queue.SimpleQueue()
    command = start(frames)
    try:
        output = bytearray()
        errors = bytearray()
        while True:
            try:
                frame = frames.get(timeout=deadline.clamp())
            except queue.Empty:
                raise deadline.error() from None
            if isinstance(frame, Stdout) or (stderr_to_stdout and isinstance(frame, Stderr)):
                output += frame.data
            elif isinstance(frame, Stderr):
                errors += frame.data
            elif isinstance(frame, Exit):
                deadline.check()
                return ExecResult(bytes(output), frame.code, bytes(errors))
            elif isinstance(frame, Error):
                raise frame.reason
    finally:
        stop(command)
