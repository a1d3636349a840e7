"""The agent's processes (:mod:`.agent`): started, reaped, ended, recorded and forgotten.

:class:`Processes` holds every process the agent runs or still streams, by
id and (while it runs) by pid. A journaled session gets its directory in the
state directory's ``sessions/`` before it starts, its ``spec.json`` once it
has a pid and its ``exit.json`` when it ends; finished sessions are kept
within the retention bound (:mod:`.retention`). A process is forgotten once
it has ended and its last subscriber has left.
"""

from __future__ import annotations

import contextlib
import os
import selectors

from . import wire
from .agent_connection import Connection, Process, Refused
from .agent_output import Pump
from .agent_process import EXIT, JOURNAL, SESSIONS, SPEC, session_spec, write_record
from .agent_stdin import StdinPump
from .retention import Retention

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class Processes:
    """The processes of the agent with state directory ``state_fd`` and selector ``sel``.

    ``nofile_soft`` is every command's soft limit on open files (None: the
    agent's own).
    """

    def __init__(
        self, state_fd: int, sel: selectors.BaseSelector, *, nofile_soft: int | None
    ) -> None:
        self.state = state_fd
        self.nofile_soft = nofile_soft
        self.by_sid: dict[str, Process] = {}
        self.by_pid: dict[int, Process] = {}
        self.retention = Retention(state_fd)
        self.output = Pump(sel)
        self.stdin = StdinPump(sel)

    def live(self, req: dict[str, Any]) -> Process:
        """The process named by the request's ``id``; Refused (``unknown``) if none."""
        sid = req.get("id")
        process = self.by_sid.get(sid) if isinstance(sid, str) else None
        if process is None:
            raise Refused("unknown", f"no live process {sid!r}")
        return process

    # -- start -----------------------------------------------------------------------

    def start(
        self,
        conn: Connection,
        sid: str,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        *,
        tty: bool,
        stdin: bool,
        journaled: bool,
        merge: bool,
        rows: int,
        cols: int,
        follow: bool,
    ) -> None:
        """Start process ``sid`` (whose id is free, ``cwd`` a directory) for ``conn``,
        which is sent the reply (``id``, ``pid``) and, with ``follow``, follows it.

        A command that cannot be executed still becomes a process: its output
        says why, and it ends at once with status 127 (not found) or 126.
        """
        journal_fd = self._open_journal(sid, argv, cwd, tty=tty, stdin=stdin) if journaled else None
        process = Process(sid, journal_fd=journal_fd, stdin=stdin, tty=tty, merge=merge)
        failure = process.start(argv, env, cwd, rows=rows, cols=cols, nofile_soft=self.nofile_soft)
        self.by_sid[sid] = process
        conn.send_reply({"id": sid, "pid": process.pid})
        if follow:
            conn.subscribe(process, 0)
        if failure is not None:
            reason = failure.strerror or failure
            message = f"managoat_sandbox: cannot execute {argv[0]!r}: {reason}\n"
            self.output.emit(process, wire.OUT if tty else wire.ERR, message.encode())
            process.status = (127 if isinstance(failure, FileNotFoundError) else 126) << 8
            self.end(process)
            return
        assert process.pid is not None
        self.by_pid[process.pid] = process
        self.output.watch(process)
        self.stdin.sync(process)

    def _open_journal(self, sid: str, argv: list[str], cwd: str, *, tty: bool, stdin: bool) -> int:
        try:
            os.mkdir(f"{SESSIONS}/{sid}", 0o700, dir_fd=self.state)
        except FileExistsError:
            raise Refused("exists", f"session {sid!r} exists") from None
        except OSError as exc:
            raise Refused("failed", f"cannot record the session: {exc.strerror}") from None
        write_record(
            self.state, f"{SESSIONS}/{sid}/{SPEC}", session_spec(argv, cwd, tty=tty, stdin=stdin)
        )
        return os.open(
            f"{SESSIONS}/{sid}/{JOURNAL}",
            os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=self.state,
        )

    # -- end -------------------------------------------------------------------------

    def reap(self) -> None:
        """Reap every child that has exited; a process's output still drains after."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            process = self.by_pid.pop(pid, None)
            if process is not None:
                process.reaped(status)
                self.output.pace(process)
                self.stdin.exited(process)

    def end_finished(self) -> None:
        """End every process whose end can now be decided
        (:meth:`.agent_process.Process.ready_to_end`)."""
        for process in list(self.by_sid.values()):
            if process.ready_to_end():
                self.end(process)

    def end(self, process: Process) -> None:
        """Decide and record ``process``'s end, and send it to its subscribers."""
        self.output.stop(process)
        self.stdin.ended(process)
        process.close()
        end = process.decide_end()
        if process.journaled:
            with contextlib.suppress(OSError):
                write_record(self.state, f"{SESSIONS}/{process.sid}/{EXIT}", end)
            # Before any subscriber hears of the end (see .retention).
            self.retention.finished(process.sid)
        process.end = end
        if not process.subscribers:
            self._forget(process)
        for conn in list(process.subscribers):
            conn.flush()

    def unsubscribe(self, conn: Connection, process: Process) -> None:
        """``conn`` no longer follows ``process``: an ended process nobody follows any
        more is forgotten, a running one is paced without it."""
        with contextlib.suppress(ValueError):
            process.subscribers.remove(conn)
        if process.end is not None and not process.subscribers:
            self._forget(process)
        else:
            self.output.pace(process)

    def _forget(self, process: Process) -> None:
        if self.by_sid.get(process.sid) is process:
            del self.by_sid[process.sid]
        process.close_journal()
