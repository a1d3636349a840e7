"""The shared process engine: run commands as detached, supervised, journaled processes.

Self-contained (standard library only, nothing else from ``managoat_sandbox``);
Linux is the target (``/proc`` is used for long socket paths; macOS is untested).

Contract
--------
* :func:`start` creates a *session directory* and runs ``argv`` under a
  supervisor process that outlives the caller (it is reparented away at once,
  so no zombie is left in the caller). It returns once the child runs or its
  failure to execute has been recorded as exit 127 (missing program) or 126.
* The child runs in its own session and process group. Its stdout and stderr
  are journaled, in the order the supervisor reads them, into one append-only
  ``journal``; with ``tty=True`` it runs on a pseudo-terminal and everything is
  stdout. Output written to both streams within the same instant (before the
  supervisor wakes up) cannot be ordered across the two pipes and may be
  journaled stream by stream; output separated by a round trip is in order.
* Any process can :func:`follow` a session from byte zero, live, to exactly one
  terminal event: :class:`Exited` (real exit code; 128 + N if killed by signal
  N) once the exit record exists and the journal was fully read, or
  :class:`Lost` when the supervisor died without recording an exit (the code
  is never guessed). Liveness is an ``flock`` on ``lock``, immune to PID reuse.
* With ``stdin=True`` any process can write the child's stdin
  (:func:`write_stdin`, :class:`StdinWriter`) and send end of input
  (:func:`close_stdin`, idempotent, a no-op once the process has ended).
* :func:`signal_group`, :func:`suspend`, :func:`resume` and :func:`terminate`
  signal the child's process group while its exit is unrecorded.
* When the child exits the supervisor drains its pipes (bounded, in case
  descendants hold them), records the exit, reaps the child, removes its
  socket and exits. Descendants that outlive the child are not killed. A
  supervisor killed outright leaves the child running in its group.

Errors are :class:`EngineError`, :class:`ProcessExited` and :class:`StdinNotOpen`;
functions given a directory that is not a session raise FileNotFoundError.
The file layout is described in :mod:`.session`.
"""

from .control import resume, signal_group, start, suspend, terminate, wait_exit
from .errors import EngineError, ProcessExited, StdinNotOpen
from .follow import Event, follow, read_all
from .journal import STDERR, STDOUT, JournalReader, Output
from .session import (
    Exited,
    Lost,
    ProcessInfo,
    Running,
    SessionSpec,
    Status,
    last_activity,
    read_process,
    read_spec,
    status,
    supervisor_alive,
)
from .stdin import StdinWriter, close_stdin, write_stdin

__all__ = [
    "STDERR",
    "STDOUT",
    "EngineError",
    "Event",
    "Exited",
    "JournalReader",
    "Lost",
    "Output",
    "ProcessExited",
    "ProcessInfo",
    "Running",
    "SessionSpec",
    "Status",
    "StdinNotOpen",
    "StdinWriter",
    "close_stdin",
    "follow",
    "last_activity",
    "read_all",
    "read_process",
    "read_spec",
    "resume",
    "signal_group",
    "start",
    "status",
    "supervisor_alive",
    "suspend",
    "terminate",
    "wait_exit",
    "write_stdin",
]
