"""One monotonic exec deadline and the exec collector built on it.

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
from typing import Any

from . import reasons
from .errors import DeadlineExpired, Unavailable
from .frames import Error, Exit, Stderr, Stdout
from .types import Command, ExecResult

__all__ = ["Deadline", "collect_exec"]


class Deadline:
    """A single deadline ``timeout`` seconds from now; ``None`` never expires."""

    def __init__(self, timeout: float | None, *, clock: Callable[[], float] = time.monotonic):
        self.timeout = timeout
        self._clock = clock
        self._expires = None if timeout is None else clock() + max(timeout, 0.0)

    def remaining(self) -> float | None:
        """Seconds left (never negative), or ``None`` for no deadline."""
        if self._expires is None:
            return None
        return max(self._expires - self._clock(), 0.0)

    def error(self) -> Unavailable:
        """The error an expired deadline raises: ``Unavailable(("exec_timeout", timeout))``."""
        return DeadlineExpired((reasons.EXEC_TIMEOUT, self.timeout))

    def check(self) -> None:
        """Raise :meth:`error` if no time is left."""
        if self.remaining() == 0:
            raise self.error()


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
            remaining = deadline.remaining()
            if remaining == 0:
                raise deadline.error()
            try:
                frame = frames.get(timeout=remaining)
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
