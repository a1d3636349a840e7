"""The exec collector: a command's output and its end folded into one :class:`ExecResult`.

An exec's output goes straight into an :class:`ExecOutput` as it is delivered (no
frame waits in a queue): each stream's bytes are written once into a buffer that
becomes the result without a copy, and past the exec's output limit (``max_bytes``,
stdout and stderr together; :data:`EXEC_MAX_BYTES` unless the caller says otherwise)
the exec ends with ``Truncated(("max_bytes", n))`` and its command is stopped.

The command's first terminal frame ends the exec: an ``Error`` is raised as its
reason (so a close without exit is ``Unavailable("closed_before_exit")``, partial
output discarded), and an ``Exit`` is the result only if the exec's
:class:`~._deadline.Deadline` has not expired by then — output never extends the
deadline, and a successful exit that arrives after expiry is still a timeout.

Three collectors keep these rules, by how the frames come:

* :func:`collect_exec`, for exec over a streaming adapter: check the deadline, spawn
  with an :class:`ExecSink` as owner (whose ``put`` takes each frame from the
  command's pump), then wait for the command's end while consulting the deadline
  *before every wait*. Expiry abandons the local collector (``stop_command``); the
  remote process may go on.
* :func:`collect_here`, for an exec whose command is read to its end in the calling
  thread (its pump bounds every wait by the deadline): the same sink, but no command
  to wait for or to stop once the read is over (E2B's exec).
* :func:`collect_frames`, for an exec whose caller produces the frames itself (an
  iterable that waits for each, never past the deadline): ``local``'s subscription
  to its private process, the Fake's script.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from ._deadline import Deadline
from .errors import Truncated, Unavailable
from .files import truncated
from .frames import Error, Exit, Frame, Stderr
from .reasons import Reason
from .types import Command, ExecResult

__all__ = [
    "EXEC_MAX_BYTES",
    "ExecOutput",
    "ExecSink",
    "collect_exec",
    "collect_frames",
    "collect_here",
]

T = TypeVar("T")

#: The most output ``exec`` holds when its caller sets no ``max_bytes``: stdout and
#: stderr together, 64 MiB.
EXEC_MAX_BYTES = 64 * 1024 * 1024


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


def _ended(terminal: Exit | Error, output: ExecOutput, deadline: Deadline) -> ExecResult:
    """The exec's outcome once its command delivered ``terminal``: an ``Error`` raises
    its reason; an ``Exit`` raises :meth:`Deadline.error` if ``deadline`` has expired
    (a success after expiry is still a timeout), else is ``output``'s result."""
    if isinstance(terminal, Error):
        raise terminal.reason
    deadline.check()
    return output.result(terminal.code)


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
        return _outcome(sink, command, kill, deadline)
    finally:
        stop(command)


def collect_here(
    run: Callable[[ExecSink], T],
    *,
    deadline: Deadline,
    stderr_to_stdout: bool = False,
    max_bytes: int | None = None,
    kill: Callable[[T], None] | None = None,
) -> ExecResult:
    """Run ``run(owner)`` and collect the frames it delivers to ``owner`` (an
    :class:`ExecSink`) into an :class:`ExecResult`.

    ``run`` reads the command to its end in the calling thread, never waiting past
    ``deadline``, and returns what ``kill`` takes; by the time it returns its command
    has delivered its terminal frame, or the output passed ``max_bytes``, and has let
    go of its transport, so there is nothing to wait for and nothing to stop.
    Checked first, the deadline; then the outcome is :func:`collect_exec`'s: output
    past ``max_bytes`` is ``Truncated(("max_bytes", n))``, raised once
    ``kill(ran)`` (given: how the adapter stops the remote command; never raises)
    has run; an ``Error`` frame is raised as its reason; an ``Exit`` is the result
    unless the deadline expired first. A ``run`` that delivered no terminal frame
    is ``Unavailable("closed_before_exit")``.
    """
    deadline.check()
    sink = ExecSink(ExecOutput(max_bytes, stderr_to_stdout=stderr_to_stdout))
    return _outcome(sink, run(sink), kill, deadline)


def _outcome(
    sink: ExecSink, command: T, kill: Callable[[T], None] | None, deadline: Deadline
) -> ExecResult:
    """What a collected exec comes to once ``sink`` has its terminal frame or overflowed:
    an overflow is raised once ``kill(command)`` (if given) has run; no terminal frame
    is ``Unavailable("closed_before_exit")``; else :func:`_ended`."""
    if sink.overflow is not None:
        if kill is not None:
            kill(command)
        raise sink.overflow
    if sink.terminal is None:
        raise Unavailable(Reason.CLOSED_BEFORE_EXIT)
    return _ended(sink.terminal, sink.output, deadline)


def collect_frames(
    frames: Iterable[Frame],
    *,
    deadline: Deadline,
    stderr_to_stdout: bool = False,
    max_bytes: int | None = None,
) -> ExecResult:
    """Fold an exec's ``frames``, read as they come, into its :class:`ExecResult`.

    Output is kept as :func:`collect_exec` keeps it (``stderr_to_stdout``,
    ``max_bytes``): the ``Stdout``/``Stderr`` frame that passes the limit raises
    ``Truncated(("max_bytes", n))`` here and nothing more is read, so the caller
    stops its command on the way out. The first terminal frame ends the exec as
    the module says (``Error``: its reason; ``Exit``: the result, or
    :meth:`Deadline.error` once ``deadline`` has expired); frames that end without
    one are ``Unavailable("closed_before_exit")``. The ``ref`` of each frame is not
    read.

    Waiting is the iterable's: it bounds each wait by ``deadline`` (raising its
    :meth:`~Deadline.error` when it expires), so output never extends it; this
    function never waits.
    """
    output = ExecOutput(max_bytes, stderr_to_stdout=stderr_to_stdout)
    for frame in frames:
        if isinstance(frame, (Exit, Error)):
            return _ended(frame, output, deadline)
        output.add(frame.data, stderr=isinstance(frame, Stderr))
    raise Unavailable(Reason.CLOSED_BEFORE_EXIT)
