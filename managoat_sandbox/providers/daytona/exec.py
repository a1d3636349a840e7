"""``exec`` on Daytona: kept toolbox sessions and the synchronous session exec.

Each exec runs our shim (:mod:`.shim`) in a toolbox session with one
synchronous ``POST /process/session/{id}/exec`` (docs/protocols/daytona.md#sessions): the daemon
answers once the command has ended, with the command's journal — the shim's
frames, stdout and stderr apart and byte-exact — and its exit code. On a warm
sandbox that is the only toolbox request of an exec.

Sessions are kept per sandbox for reuse (:class:`ExecPool`). A session's
shell runs one command at a time, so an exec takes an idle session (or
creates one) and gives it back afterwards: concurrent execs use several, and
at most ``limit`` idle ones are kept (the rest are deleted). The shim runs
the command in a child shell, so nothing a command does (``cd``, ``export``,
``exit``) changes the session.

A session that cannot run commands any more never goes back to the pool.
When the daemon refuses an exec because of its session
(:func:`.errors.exec_refused`: the session is unknown — the daemon restarted,
which empties the pool —, its shell has exited, or the command could not be
written to it) nothing ran, and the exec runs once more in a new session. A
shell that died while running the command ends the exec with
``Unavailable("closed_before_exit")``. Any other failure deletes the session
and is raised; the command is never run twice.

The answer must begin within ``window`` seconds. When it does not (a command
running longer; an answer lost to a broken connection), the command is
looked up in its session — the one it ran there that this exec did not know
— and followed over its log instead (:class:`.stream.LogFollower`), to its real
exit. The exec deadline holds throughout: once it has passed, the exec is
abandoned and its session deleted, which kills what the command left running
(the deletion is not waited for beyond a second).

Output is held once and at most ``max_bytes`` of it
(:func:`managoat_sandbox._collect.collect_frames`; past it, ``Truncated``). The
answer carries each output byte a few times over (base64 in the journal, and
the channels again), so an answer longer than :data:`ANSWER_FACTOR` times
``max_bytes`` is abandoned as it arrives and the command followed over its
log instead, where the limit applies to the output as it is decoded (and
the session is deleted when it is passed, killing what still runs there).
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable

import attrs

from ..._collect import ExecSink, collect_exec, collect_frames
from ..._deadline import Deadline
from ..._streaming import Stream, new_ref
from ...errors import Invalid, NotFound, SandboxError, Unavailable
from ...frames import Exit, Frame, Stderr, Stdout
from ...reasons import Reason, no_such_dir
from ...types import Command, ExecResult
from .decoder import STDERR, JournalDecoder
from .errors import exec_refused, is_status, not_started, session_ended
from .settings import PROVIDER
from .shim import SWEEP_EVERY, echoed_size
from .stream import FollowPolicy, LogFollower
from .toolbox import RECORD_LIMIT, ExecAnswer, Toolbox, listed_command_id

__all__ = [
    "ANSWER_FACTOR",
    "ECHO_BUDGET",
    "EXEC_PREFIX",
    "ExecPool",
    "ExecSession",
    "NotDispatched",
    "run_exec",
]

log = logging.getLogger("managoat_sandbox.daytona")

#: The id prefix of exec sessions (never listed by ``list_sessions``).
EXEC_PREFIX = "mgx-"
#: The most bytes of command text an exec session's record may echo and the session
#: still be kept: with one more command (at most :data:`.shim.COMMAND_LIMIT`), the
#: record stays well under :data:`.toolbox.RECORD_LIMIT`.
ECHO_BUDGET = 512 * 1024
#: How many times ``max_bytes`` a synchronous answer may take before it is abandoned for
#: the command's log: an answer carries each output byte about 8/3 times (4/3 for base64,
#: once in the journal and once in its channels).
ANSWER_FACTOR = 4
#: How long deleting an abandoned exec's session is waited for.
_ABANDON_WAIT = 1.0
#: How often a session is asked for the command an exec started there.
_LOOKUP_PAUSE = 0.05
_STOP_JOIN = 1.0


@attrs.define(eq=False)
class ExecSession:
    """A toolbox session that runs execs, and the ids of the commands it ran."""

    id: str
    ran: set[str] = attrs.field(factory=set)
    #: The bytes of command text the session's record echoes (see :data:`ECHO_BUDGET`).
    echoed: int = 0
    #: The execs sent to the session (every :data:`.shim.SWEEP_EVERY`-th sweeps it).
    sent: int = 0

    def next_sweeps(self) -> bool:
        """Count one more exec; whether it is the one to sweep the capture files."""
        self.sent += 1
        return self.sent % SWEEP_EVERY == 0


class ExecPool:
    """The idle exec sessions of one sandbox (``toolbox``), kept for reuse; thread-safe."""

    def __init__(self, toolbox: Toolbox, name: str, *, limit: int) -> None:
        self.toolbox = toolbox
        self.name = name
        self.limit = limit
        self._idle: list[ExecSession] = []
        self._lock = threading.Lock()

    def acquire(self, *, new: bool = False) -> ExecSession:
        """An idle session, else (or with ``new``) a new one."""
        with self._lock:
            if self._idle and not new:
                return self._idle.pop()
        session = ExecSession(EXEC_PREFIX + secrets.token_hex(12))
        try:
            self.toolbox.create_session(session.id)
        except Invalid as error:
            if not is_status(error, 409):
                raise
        return session

    def release(self, session: ExecSession) -> None:
        """Give a session that ran its command to the end back (or delete it: the pool
        is full, or its record echoes more than :data:`ECHO_BUDGET` bytes of commands)."""
        with self._lock:
            if len(self._idle) < self.limit and session.echoed <= ECHO_BUDGET:
                self._idle.append(session)
                return
        self.drop(session)

    def drop(self, session: ExecSession, *, wait: float | None = None) -> None:
        """Delete a session (killing what runs in it); failures are only logged."""
        try:
            self.toolbox.delete_session(session.id, read_timeout=wait)
        except SandboxError as error:
            log.debug("daytona: deleting exec session %s failed: %r", session.id, error)

    def flush(self) -> None:
        """Forget every idle session (the daemon no longer knows them)."""
        with self._lock:
            self._idle.clear()


@attrs.frozen
class _Job:
    """One exec: what to run, until when, and how to follow it should that be needed."""

    script: Callable[[str, bool], str]
    deadline: Deadline
    window: float
    policy: FollowPolicy
    sandbox_gone: Callable[[], bool]
    stderr_to_stdout: bool
    cwd: str | None
    max_bytes: int | None


class NotDispatched(Exception):
    """No command was run: the session could not be had, or the toolbox turned the exec
    away before any command ran (``error`` says why). Retrying elsewhere is safe."""

    def __init__(self, error: SandboxError) -> None:
        super().__init__(error)
        self.error = error


def run_exec(
    pool: ExecPool,
    script: Callable[[str, bool], str],
    *,
    deadline: Deadline,
    window: float,
    policy: FollowPolicy,
    sandbox_gone: Callable[[], bool],
    stderr_to_stdout: bool,
    cwd: str | None = None,
    max_bytes: int | None = None,
) -> ExecResult:
    """Run the shim ``script(session_id, sweep)`` in a session of ``pool`` to its exit
    (see the module docstring; ``sweep``: see :func:`.shim.exec_script`).
    :class:`NotDispatched` when it could not be started: no session, a sandbox the
    toolbox says is not started, or two sessions in a row refused it.
    ``Invalid(("dir", ...))`` when the shim could not enter ``cwd``.
    ``Truncated(("max_bytes", n))`` for output past ``max_bytes`` (both streams)."""
    job = _Job(script, deadline, window, policy, sandbox_gone, stderr_to_stdout, cwd, max_bytes)
    for attempt in (1, 2):
        deadline.check()
        try:
            session = pool.acquire(new=attempt > 1)
        except SandboxError as error:
            raise NotDispatched(error) from None
        try:
            answer = _exec_sync(pool.toolbox, session, job)
        except SandboxError as error:
            if not_started(error):
                pool.flush()
                raise NotDispatched(error) from None
            if exec_refused(error):
                if isinstance(error, NotFound):
                    pool.flush()
                else:
                    pool.drop(session)
                if attempt == 1:
                    continue
                raise NotDispatched(Unavailable(error.detail)) from None
            if _lost_answer(error) and deadline.remaining() != 0:
                return _follow(pool, session, None, job)
            pool.drop(session, wait=_ABANDON_WAIT)
            if deadline.remaining() == 0:
                raise deadline.error() from None
            if session_ended(error):
                raise Unavailable(Reason.CLOSED_BEFORE_EXIT) from None
            raise
        return _result(pool, session, answer, job)
    raise AssertionError("unreachable")


def _answer_limit(max_bytes: int | None) -> int | None:
    """The largest synchronous answer read for an exec holding at most ``max_bytes``."""
    return None if max_bytes is None else ANSWER_FACTOR * max_bytes + RECORD_LIMIT


def _lost_answer(error: SandboxError) -> bool:
    """A transport failure or timeout (the command may run on, its answer lost), or an
    answer too large to hold for the exec's ``max_bytes`` (:func:`_answer_limit`)."""
    return isinstance(error, Unavailable) and error.reason in (
        Reason.TIMEOUT,
        Reason.TRANSPORT,
        Reason.RESPONSE_TOO_LARGE,
    )


def _exec_sync(toolbox: Toolbox, session: ExecSession, job: _Job) -> ExecAnswer:
    deadline = job.deadline

    def check() -> float:
        remaining = deadline.remaining()
        if remaining == 0:
            raise deadline.error()
        return job.window if remaining is None else min(remaining, job.window)

    script = job.script(session.id, session.next_sweeps())
    session.echoed += echoed_size(script)
    return toolbox.exec_sync(
        session.id, script, wait=check(), check=check, limit=_answer_limit(job.max_bytes)
    )


def _result(pool: ExecPool, session: ExecSession, answer: ExecAnswer, job: _Job) -> ExecResult:
    """The result of a synchronous answer. The daemon answers once the command's journal
    is final, so one that is not complete lost output: closed before exit."""
    decoder = JournalDecoder(framed=True)
    if answer.raw is not None:
        events = decoder.read().feed(answer.raw)
    else:
        events = decoder.split_read(*(answer.split or (b"", b"")))
    if decoder.no_dir:
        pool.release(session)
        raise Invalid(Reason.DIR, problem=no_such_dir(str(job.cwd)))
    code = decoder.code
    if not decoder.complete or code is None:
        pool.drop(session)
        raise Unavailable(Reason.CLOSED_BEFORE_EXIT)
    if answer.command_id is not None:
        session.ran.add(answer.command_id)
    pool.release(session)
    job.deadline.check()
    frames: list[Frame] = [
        Stderr(None, data) if kind == STDERR else Stdout(None, data) for kind, data in events
    ]
    frames.append(Exit(None, code))
    return collect_frames(
        frames,
        deadline=job.deadline,
        stderr_to_stdout=job.stderr_to_stdout,
        max_bytes=job.max_bytes,
    )


def _follow(pool: ExecPool, session: ExecSession, command_id: str | None, job: _Job) -> ExecResult:
    """Follow the exec's command over its log (found in its session if not known)."""
    toolbox = pool.toolbox
    try:
        found = command_id or _find(toolbox, session, job)
        follower = LogFollower(
            toolbox, session.id, found, job.policy, sandbox_gone=job.sandbox_gone
        )

        def start(owner: ExecSink) -> Command:
            stream = Stream(new_ref("daytona"), owner, label="daytona")
            stream.start(follower, on_stop=follower.abort)
            return Command(PROVIDER, stream.ref, private=stream)

        def stop(command: Command) -> None:
            stream: Stream = command.private
            stream.stop()
            stream.join(_STOP_JOIN)

        result = collect_exec(
            start,
            stop,
            deadline=job.deadline,
            stderr_to_stdout=job.stderr_to_stdout,
            max_bytes=job.max_bytes,
        )
    except BaseException:
        pool.drop(session, wait=_ABANDON_WAIT)
        raise
    session.ran.add(found)
    pool.release(session)
    return result


def _find(toolbox: Toolbox, session: ExecSession, job: _Job) -> str:
    """The id of the command this exec started in ``session``: the one the session ran
    that it did not know of. Looked for until ``window`` seconds (or the deadline)
    have passed: then the command never reached the daemon (closed before exit)."""
    window = Deadline(job.window)
    while True:
        commands = toolbox.session(session.id).get("commands")
        for entry in commands if isinstance(commands, list) else ():
            found = listed_command_id(entry)
            if found is not None and found not in session.ran:
                return found
        remaining = job.deadline.remaining()
        if remaining == 0:
            raise job.deadline.error()
        if window.expired():
            raise Unavailable(Reason.CLOSED_BEFORE_EXIT)
        pause = _LOOKUP_PAUSE if remaining is None else min(_LOOKUP_PAUSE, remaining)
        threading.Event().wait(pause)
