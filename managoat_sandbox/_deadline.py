"""One monotonic deadline (exec's, or a bounded operation's) and the exec collector.

``exec`` over a streaming adapter is: check the deadline, spawn with the
collector as owner, then wait for the command's end while consulting the
deadline *before every wait* — output never extends it, and a successful exit
that arrives after expiry is still a timeout. Expiry abandons the local
collector (``stop_command``); the remote process may go on.

Output goes straight into an :class:`ExecOutput` as it is delivered (no frame
waits in a queue): each stream's bytes are written once into a buffer that
becomes the result without a copy, and past the exec's output limit
(``max_bytes``, stdout and stderr together; :data:`EXEC_MAX_BYTES` unless the
caller says otherwise) the exec ends with ``Truncated(("max_bytes", n))`` and
its command is stopped.
"""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from typing import overload

from . import reasons
from ._args import optional_seconds
from .errors import DeadlineExpired, Truncated
from .files import truncated
from .frames import Error, Exit, Frame, Stderr
from .types import Command, ExecResult

__all__ = ["EXEC_MAX_BYTES", "Deadline", "ExecOutput", "ExecSink", "collect_exec"]

#: The most output ``exec`` holds when its caller sets no ``max_bytes``: stdout and
#: stderr together, 64 MiB.
EXEC_MAX_BYTES = 64 * 1024 * 1024


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
        reason: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.timeout = timeout
        self.reason = reason
        self._clock = clock
        seconds = optional_seconds(timeout)
        self._expires = None if seconds is None else clock() + seconds

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


class ExecOutput:
    """What an exec holds of its command's output, each byte once.

    Stdout (and stderr too, with ``stderr_to_stdout``, in arrival order) is
    written into one buffer, stderr into another; :meth:`result` hands both
    buffers over as the result's ``bytes`` without copying them. More than
    ``max_bytes`` bytes in total, both streams counted (``None``: no limit),
    is ``Truncated(("max_bytes", n))``, raised by the :meth:`add` that passes
    the limit, whose bytes are not kept.
    """

    def __init__(self, max_bytes: int | None = None, *, stderr_to_stdout: bool = False) -> None:
        self.max_bytes = max_bytes
        self.stderr_to_stdout = stderr_to_stdout
        #: The output bytes seen so far, both streams.
        self.size = 0
        self._output = io.BytesIO()
        self._errors = io.BytesIO()

    def add(self, data: bytes | memoryview, *, stderr: bool = False) -> None:
        """Keep ``data`` (stdout, or stderr with ``stderr``); ``Truncated`` past the limit."""
        self.size += len(data)
        if self.max_bytes is not None and self.size > self.max_bytes:
            raise truncated(self.max_bytes)
        (self._errors if stderr and not self.stderr_to_stdout else self._output).write(data)

    def result(self, code: int) -> ExecResult:
        """The result with exit ``code``; the buffers become its bytes (call it once)."""
        return ExecResult(self._output.getvalue(), code, self._errors.getvalue())


class ExecSink:
    """The owner :func:`collect_exec` gives a command: output into an :class:`ExecOutput`
    as each frame is delivered, and the terminal frame kept for the collector.

    It is queue-like (``put``) but no ``queue.Queue``, so a :class:`~._streaming.Stream`
    hands it each frame directly. The ``put`` whose output passes the limit raises
    the ``Truncated`` to the delivering pump (which ends the command's delivery with
    it) and wakes the collector; output after that is dropped.
    """

    def __init__(self, output: ExecOutput) -> None:
        self.output = output
        #: The command's terminal frame, once delivered.
        self.terminal: Exit | Error | None = None
        #: The ``Truncated`` the output limit raised, if it was passed.
        self.overflow: Truncated | None = None
        self._done = threading.Event()

    def put(self, frame: Frame, block: bool = True, timeout: float | None = None) -> None:
        """Take one frame (``block``/``timeout``: as a queue's; it never waits)."""
        if isinstance(frame, (Exit, Error)):
            if self.terminal is None:
                self.terminal = frame
                self._done.set()
            return
        if self.overflow is not None:
            return
        try:
            self.output.add(frame.data, stderr=isinstance(frame, Stderr))
        except Truncated as error:
            self.overflow = error
            self._done.set()
            raise

    def wait(self, deadline: Deadline) -> None:
        """Wait for the terminal frame or the overflow, never past ``deadline``."""
        while not self._done.wait(deadline.clamp()):
            pass


def collect_exec(
    start: Callable[[ExecSink], Command],
    stop: Callable[[Command], None],
    *,
    deadline: Deadline,
    stderr_to_stdout: bool = False,
    max_bytes: int | None = None,
    kill: Callable[[Command], None] | None = None,
) -> ExecResult:
    """Run ``start(owner)`` and collect its frames into an :class:`ExecResult`.

    ``start`` spawns the command with the given :class:`ExecSink` as owner;
    ``stop`` abandons it (called on every way out). Stdout is collected as the
    output; stderr joins it in arrival order when ``stderr_to_stdout``, else it
    is collected apart as the result's ``stderr``; an ``Error`` frame is raised
    as its reason (so a close without exit is
    ``Unavailable("closed_before_exit")``, partial output discarded). Output
    beyond ``max_bytes`` (both streams; ``None``: no limit) raises
    ``Truncated(("max_bytes", n))`` once ``kill`` (given: how the adapter
    stops the remote command; never raises) has run, before ``stop``.
    """
    deadline.check()
    sink = ExecSink(ExecOutput(max_bytes, stderr_to_stdout=stderr_to_stdout))
    command = start(sink)
    try:
        sink.wait(deadline)
        if sink.overflow is not None:
            if kill is not None:
                kill(command)
            raise sink.overflow
        terminal = sink.terminal
        if isinstance(terminal, Error):
            raise terminal.reason
        assert isinstance(terminal, Exit)
        deadline.check()
        return sink.output.result(terminal.code)
    finally:
        stop(command)
