"""The sandbox agent: one long-lived process per sandbox that runs its commands.

Started by :mod:`.launch` — inside the sandbox's namespaces as their process 1
when the sandbox is isolated, as a plain child subreaper otherwise — and run
with the standard library only (``python -I -S``), from descriptors it
inherits and never from a path a command could reach:

* ``--state FD``: the sandbox's state directory (session journals and exit
  records), which is not mounted inside the sandbox;
* ``--socket PATH`` (optional): where to bind the control socket, which the
  agent does itself in the state directory (so only the library reaches it);
* ``--ready FD``: a pipe the agent writes ``R`` to once it serves;
* ``--egress FD`` (optional): a socket to the host-side egress proxy, to
  which the agent hands each connection a command makes to the proxy port
  and notices of policy changes, which the keeper confirms (see :mod:`.keeper`).

The agent makes itself non-dumpable (no command can read its memory or
descriptors through ``/proc``, nor ptrace it), takes the exclusive lock
``agent.lock`` for its whole life (a free lock means no agent), applies the
sandbox's resource limits to itself so that every command inherits them, and
serves requests (:mod:`.wire`) until told to shut down or until its state
directory is deleted. It forks commands in their own sessions, journals
output, records exits, keeps finished sessions within the bound the library
last sent (:mod:`.retention`), and pushes output to subscribers as it arrives.
Every descriptor it reads from a command is non-blocking; nothing a command
does can make it wait.

Output is back-pressured, never hoarded: a command's pipes are read only
while one of its subscribers keeps up (see :meth:`Agent.pace`); when none
does, the agent stops reading them and the command blocks on its next write.
What waits is then in the command's pipes and, for a detachable session, in
its journal on the sandbox's disk (at most :data:`JOURNAL_LEAD` bytes ahead
of the closest subscriber while one is connected; without subscribers a
session runs free, its journal bounded by the sandbox's ``file_size``) — not
in the agent's memory, nor in its subscribers'. A subscriber that does not
read holds up only the command it follows.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import re
import resource
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from . import wire
from .agent_process import (
    EXIT,
    JOURNAL,
    SESSIONS,
    SPEC,
    session_spec,
    set_window,
    write_record,
)
from .agent_process import Process as ProcessOf
from .errors import EngineError
from .options import EGRESS_PORT, SOCKET, parse
from .retention import Retention
from .stdin_feed import FULL
from .stdin_feed import LIMIT as STDIN_LIMIT
from .tree import signal_sandbox, start_time

LOCK = "agent.lock"
_KEEPER_GONE = "the sandbox's egress proxy (its keeper) is not running"
SESSION_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}\Z")
#: In-memory backlog per subscriber before it is served from the journal instead
#: (or, for an ephemeral process, before its pipes stop being read).
BACKLOG = 256 * 1024
#: How far a detachable session's journal may run ahead of the closest of its
#: subscribers before its pipes stop being read (:meth:`Agent.pace`).
JOURNAL_LEAD = 4 * BACKLOG
_READ = 64 * 1024
_IDLE = 1.0
_PR_SET_DUMPABLE = 4
_PR_SET_CHILD_SUBREAPER = 36
_PR_CAPBSET_DROP = 24
_LIMITS = {
    "processes": resource.RLIMIT_NPROC,
    "memory": resource.RLIMIT_AS,
    "open_files": resource.RLIMIT_NOFILE,
    "file_size": resource.RLIMIT_FSIZE,
}


class Refused(Exception):
    """A request the agent answers with an error: ``code`` names it for the client."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _ignore(signum: int, frame: object) -> None:
    """A handler that does nothing: unlike SIG_IGN it is reset to default by exec."""


class Connection:
    """One client connection: requests in, replies and subscribed output out."""

    def __init__(self, agent: Agent, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.agent = agent
        self.sock = sock
        self.parser = wire.Parser(kinds=frozenset((wire.REQUEST,)))
        self.out = bytearray()
        self.sub: Process | None = None
        self.offset = 0
        self.waiting: tuple[Process, bytes] | None = None
        self.closed = False
        self._mask = selectors.EVENT_READ

    # -- input -----------------------------------------------------------------

    def on_event(self, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            self._receive()
        if not self.closed and mask & selectors.EVENT_WRITE:
            self.flush()

    def _receive(self) -> None:
        try:
            data = self.sock.recv(_READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.agent.drop(self)
            return
        self.parser.feed(data)
        self.process()

    def process(self) -> None:
        """Handle buffered requests while the connection is neither subscribed nor waiting."""
        while not self.closed and self.sub is None and self.waiting is None:
            try:
                item = self.parser.next()
            except EngineError:
                self.agent.drop(self)
                return
            if item is None:
                break
            try:
                header, data = wire.parse_message(item[1])
                reply = self.agent.handle(self, header, data)
            except Refused as refusal:
                reply = {"error": refusal.code, "message": str(refusal)}
            except EngineError as exc:
                reply = {"error": "bad_request", "message": str(exc)}
            except (ValueError, TypeError) as exc:
                # A field of an unusable value: refused, never the end of the agent
                # (and of every session it serves).
                reply = {"error": "bad_request", "message": f"malformed request: {exc}"}
            if reply is not None:
                self.send_reply(reply)
        self.flush()

    # -- output ----------------------------------------------------------------

    def send_reply(self, reply: dict[str, Any]) -> None:
        self.out += wire.message(wire.REPLY, reply)

    def subscribe(self, process: Process, offset: int) -> None:
        """Follow ``process`` from journal ``offset`` to its end frame."""
        self.sub = process
        self.offset = offset
        process.subscribers.append(self)

    def offer(self, process: Process, frame: bytes, at: int) -> None:
        """New output frame ``frame`` written at journal offset ``at``.

        Caught-up subscribers take it from memory; one that lags behind by more
        than :data:`BACKLOG` catches up from the journal later. An ephemeral
        process has no journal, so its subscriber always takes it (and the
        process stops being read while the backlog is full: :meth:`Agent.pace`).
        """
        if not process.journaled:
            self.out += frame
        elif self.offset == at and len(self.out) < BACKLOG:
            self.out += frame
            self.offset = at + len(frame)

    def flush(self) -> None:
        """Send what the socket takes now, refilling from the journal and ending the
        subscription once the process has ended and everything was sent."""
        while not self.closed:
            if self.out:
                try:
                    sent = self.sock.send(self.out)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self.agent.drop(self)
                    return
                del self.out[:sent]
                if self.out:
                    break
            if not self._refill():
                break
        if self.closed:
            return
        self._watch()
        if self.sub is not None:
            self.agent.pace(self.sub)
        if self.sub is None and self.waiting is None and self.parser.has_frame():
            self.process()

    def behind(self, process: Process) -> int:
        """How far this subscriber trails ``process`` (which it follows): the bytes
        waiting in its buffer for an ephemeral process, the bytes journaled that it
        has not taken yet for a session."""
        if process.journaled:
            return process.size - self.offset
        return len(self.out)

    def _refill(self) -> bool:
        process = self.sub
        if process is None:
            return False
        if process.journal_fd is not None and self.offset < process.size:
            chunk = os.pread(
                process.journal_fd, min(BACKLOG, process.size - self.offset), self.offset
            )
            if chunk:
                self.out += chunk
                self.offset += len(chunk)
                return True
        if process.end is not None and (not process.journaled or self.offset >= process.size):
            self.out += wire.frame(wire.END, json.dumps(process.end).encode())
            self.sub = None
            self.agent.unsubscribe(self, process)
            return True
        return False

    def _watch(self) -> None:
        if self.closed:
            return
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0)
        if mask != self._mask:
            self.agent.sel.modify(self.sock, mask, self.on_event)
            self._mask = mask


#: A process whose clients are this agent's connections.
Process = ProcessOf[Connection]


class Agent:
    """The agent's state and its single-threaded event loop."""

    def __init__(
        self,
        state_fd: int,
        listener: socket.socket,
        egress: socket.socket | None,
        config: dict[str, Any],
    ) -> None:
        self.state = state_fd
        self.sel = selectors.DefaultSelector()
        self.namespace = bool(config.get("namespace"))
        self.nofile_soft: int | None = config.get("child_open_files")
        self.processes: dict[str, Process] = {}
        self.by_pid: dict[int, Process] = {}
        self.retention = Retention(state_fd)
        self.connections: set[Connection] = set()
        self.exiting = False
        self.listener = listener
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, self._accept)
        self.egress = egress
        self.bridge: Bridge | None = None
        if egress is not None:
            egress.setblocking(False)
            self.set_egress(bool(config.get("egress", True)))
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._on_wakeup)
        signal.signal(signal.SIGCHLD, _ignore)
        self._handlers: dict[
            str, Callable[[Connection, dict[str, Any], bytes], dict[str, Any] | None]
        ] = {
            "hello": self._hello,
            "spawn": self._spawn,
            "attach": self._attach,
            "stdin": self._stdin,
            "eof": self._eof,
            "signal": self._signal,
            "resize": self._resize,
            "suspend": self._suspend,
            "resume": self._resume,
            "kill_all": self._kill_all,
            "egress": self._egress,
            "shutdown": self._shutdown,
        }

    # -- the loop ------------------------------------------------------------------

    def run(self) -> None:
        """Serve until shut down or until the state directory is deleted."""
        next_check = time.monotonic() + _IDLE
        while not self.exiting:
            for key, mask in self.sel.select(max(next_check - time.monotonic(), 0.0)):
                callback: Callable[[int], None] = key.data
                callback(mask)
            now = time.monotonic()
            for process in list(self.processes.values()):
                if process.ready_to_end():
                    self._end(process)
            if now >= next_check:
                next_check = now + _IDLE
                if os.fstat(self.state).st_nlink == 0:
                    self.exiting = True
        self._flush_all()
        signal_sandbox(signal.SIGKILL, namespace=self.namespace)

    def _flush_all(self) -> None:
        deadline = time.monotonic() + 1.0
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.sock.setblocking(True)
                conn.sock.settimeout(max(deadline - time.monotonic(), 0.01))
                conn.sock.sendall(conn.out)

    def _accept(self, mask: int) -> None:
        try:
            sock, _ = self.listener.accept()
        except (BlockingIOError, ConnectionAbortedError):
            return
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):
                return
            raise
        conn = Connection(self, sock)
        self.connections.add(conn)
        self.sel.register(sock, selectors.EVENT_READ, conn.on_event)

    def drop(self, conn: Connection) -> None:
        """Close a connection; an ephemeral process it was running is killed."""
        if conn.closed:
            return
        conn.closed = True
        self.connections.discard(conn)
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(conn.sock)
        conn.sock.close()
        if conn.waiting is not None:
            with contextlib.suppress(ValueError):
                conn.waiting[0].stdin_waiters.remove(conn)
        process = conn.sub
        if process is not None:
            self.unsubscribe(conn, process)
            if not process.journaled and process.end is None:
                self._signal_group(process, signal.SIGKILL)

    def unsubscribe(self, conn: Connection, process: Process) -> None:
        with contextlib.suppress(ValueError):
            process.subscribers.remove(conn)
        if process.end is not None and not process.subscribers:
            self._forget(process)
        else:
            self.pace(process)

    def _on_wakeup(self, mask: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass
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
                self.pace(process)
                if process.stdin is not None:
                    process.stdin.process_exited()
                    self._sync_stdin(process)

    # -- processes -----------------------------------------------------------------

    def _watch_outputs(self, process: Process) -> None:
        for fd, stream in process.outputs.items():
            self.sel.register(
                fd,
                selectors.EVENT_READ,
                lambda mask, fd=fd, stream=stream: self._on_output(process, fd, stream),
            )

    def _on_output(self, process: Process, fd: int, stream: int) -> None:
        try:
            data = os.read(fd, _READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if not process.paused:
                self.sel.unregister(fd)
            process.stop_reading(fd)
            return
        self.emit(process, stream, data)

    def emit(self, process: Process, stream: int, data: bytes) -> None:
        """Record one output frame and hand it to every subscriber."""
        at = process.size
        try:
            frame = process.record(stream, data)
        except OSError as exc:
            self._journal_failed(process, exc)
            return
        for conn in list(process.subscribers):
            conn.offer(process, frame, at)
            conn.flush()
        self.pace(process)

    def pace(self, process: Process) -> None:
        """Read ``process``'s pipes only while one of its subscribers keeps up.

        Every subscriber trailing by its limit (:meth:`Connection.behind`:
        :data:`BACKLOG` buffered for an ephemeral process, :data:`JOURNAL_LEAD`
        journaled for a session) stops the reading, so the command blocks on
        write; reading resumes once one of them is back within half of it, or
        none is left. A session whose process has been reaped is always read:
        its end must not wait for a subscriber (``terminate_session`` waits for
        it), and what descendants that outlive it write goes to the journal,
        bounded by the sandbox's ``file_size``. Never waits for anyone: a slow
        subscriber holds up only the command it follows.
        """
        if process.end is not None:
            return
        limit = JOURNAL_LEAD if process.journaled else BACKLOG
        lags = [conn.behind(process) for conn in process.subscribers]
        free = process.journaled and process.status is not None
        if not process.paused:
            if lags and not free and min(lags) >= limit:
                for fd in process.outputs:
                    self.sel.unregister(fd)
                process.paused = True
        elif free or not lags or min(lags) < limit // 2:
            process.paused = False
            self._watch_outputs(process)

    def _journal_failed(self, process: Process, exc: OSError) -> None:
        """Output that cannot be journaled would be lost: end the process, say why."""
        process.broken = f"journal_failed: {errno.errorcode.get(exc.errno or 0, str(exc))}"
        for fd in list(process.outputs):
            if not process.paused:
                self.sel.unregister(fd)
            process.stop_reading(fd)
        self._signal_group(process, signal.SIGKILL)

    def _end(self, process: Process) -> None:
        for fd in list(process.outputs):
            if not process.paused:
                self.sel.unregister(fd)
            process.stop_reading(fd)
        if process.stdin is not None:
            process.stdin.process_exited()
            self._sync_stdin(process)
        for conn in list(process.stdin_waiters):
            conn.waiting = None
            conn.send_reply({"status": "exited"})
            conn.process()
        process.stdin_waiters.clear()
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

    def _forget(self, process: Process) -> None:
        if self.processes.get(process.sid) is process:
            del self.processes[process.sid]
        process.close_journal()

    def _signal_group(self, process: Process, sig: int) -> bool:
        if process.pid is None or process.end is not None:
            return False
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _sync_stdin(self, process: Process) -> None:
        feed = process.stdin
        if feed is None:
            return
        target = feed.target
        if target is None:
            return
        registered = self.sel.get_map().get(target) is not None
        if feed.wants_write() and not registered:
            self.sel.register(target, selectors.EVENT_WRITE, lambda mask: self._feed_stdin(process))
        elif not feed.wants_write() and registered:
            self.sel.unregister(target)
        if feed.done:
            if self.sel.get_map().get(target) is not None:
                self.sel.unregister(target)
            feed.release()

    def _feed_stdin(self, process: Process) -> None:
        feed = process.stdin
        if feed is None:
            return
        feed.feed()
        self._sync_stdin(process)
        while process.stdin_waiters and len(feed.pending) < STDIN_LIMIT:
            conn = process.stdin_waiters.pop(0)
            waiting, conn.waiting = conn.waiting, None
            if waiting is not None:
                reply = self._stdin_reply(conn, process, waiting[1])
                if reply:
                    conn.send_reply(reply)
            conn.process()

    # -- requests --------------------------------------------------------------------

    def handle(
        self, conn: Connection, header: dict[str, Any], data: bytes
    ) -> dict[str, Any] | None:
        """Answer one request; None when the answer comes later (or was already queued)."""
        op = header.get("op")
        handler = self._handlers.get(op) if isinstance(op, str) else None
        if handler is None:
            raise Refused("bad_request", f"unknown operation {op!r}")
        return handler(conn, header, data)

    def _hello(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        return {"pid": os.getpid(), "namespace": self.namespace}

    def _process(self, req: dict[str, Any]) -> Process:
        sid = req.get("id")
        process = self.processes.get(sid) if isinstance(sid, str) else None
        if process is None:
            raise Refused("unknown", f"no live process {sid!r}")
        return process

    def _spawn(self, conn: Connection, req: dict[str, Any], data: bytes) -> None:
        """Start a process: ``id``, ``argv``, ``env``, ``cwd``; optional ``tty``, ``stdin``,
        ``journal`` (a detachable session), ``follow``, ``rows``/``cols``, ``retain`` (with
        ``retain_bytes``: :mod:`.retention`), and ``merge`` (stdout and stderr one pipe,
        read as ``OUT`` in the order written; ignored with ``tty``, whose terminal is
        already one stream)."""
        sid = _field(req, "id", str)
        if SESSION_ID.match(sid) is None:
            raise Refused("bad_request", "bad process id")
        argv = _field(req, "argv", list)
        env = _field(req, "env", dict)
        cwd = _field(req, "cwd", str)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise Refused("bad_request", "argv must be a non-empty list of strings")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise Refused("bad_request", "env must map strings to strings")
        if any(not k or "=" in k or "\0" in k or "\0" in v for k, v in env.items()):
            raise Refused(
                "bad_env", "an env name must be non-empty without '=' or NUL, a value without NUL"
            )
        if any("\0" in arg for arg in argv):
            raise Refused("bad_argv", "no argument may contain NUL")
        tty = bool(req.get("tty"))
        stdin = bool(req.get("stdin"))
        journaled = bool(req.get("journal"))
        merge = bool(req.get("merge"))
        rows = int(req.get("rows") or 24)
        cols = int(req.get("cols") or 80)
        if sid in self.processes:
            raise Refused("exists", f"process {sid!r} exists")
        if journaled and "retain" in req:
            try:
                self.retention.set_bound(req["retain"], req.get("retain_bytes"))
            except ValueError as exc:
                raise Refused("bad_request", str(exc)) from None
        if not os.path.isdir(cwd):
            raise Refused("bad_cwd", f"{cwd!r} is not a directory")
        journal_fd = self._open_journal(sid, argv, cwd, tty=tty, stdin=stdin) if journaled else None
        process = Process(sid, journal_fd=journal_fd, stdin=stdin, tty=tty, merge=merge)
        failure = process.start(argv, env, cwd, rows=rows, cols=cols, nofile_soft=self.nofile_soft)
        self.processes[sid] = process
        conn.send_reply({"id": sid, "pid": process.pid})
        if req.get("follow") or not journaled:
            conn.subscribe(process, 0)
        if failure is not None:
            reason = failure.strerror or failure
            message = f"managoat_sandbox: cannot execute {argv[0]!r}: {reason}\n"
            self.emit(process, wire.OUT if tty else wire.ERR, message.encode())
            process.status = (127 if isinstance(failure, FileNotFoundError) else 126) << 8
            self._end(process)
            return None
        if journaled:
            with contextlib.suppress(OSError):
                spec = session_spec(argv, cwd, tty=tty, stdin=stdin)
                write_record(self.state, f"{SESSIONS}/{sid}/{SPEC}", {**spec, "pid": process.pid})
        assert process.pid is not None
        self.by_pid[process.pid] = process
        self._watch_outputs(process)
        self._sync_stdin(process)
        return None

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

    def _attach(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        sid = req.get("id")
        process = self.processes.get(sid) if isinstance(sid, str) else None
        if process is None or not process.journaled:
            return {"live": False}
        offset = process.size if req.get("from_end") else 0
        conn.send_reply({"live": True, "offset": offset})
        conn.subscribe(process, offset)
        return None

    def _stdin_reply(self, conn: Connection, process: Process, data: bytes) -> dict[str, Any]:
        feed = process.stdin
        if feed is None:
            return {"status": "not_open"}
        status = feed.offer(data)
        if status == FULL:
            conn.waiting = (process, data)
            process.stdin_waiters.append(conn)
            return {}
        self._sync_stdin(process)
        return {"status": status}

    def _stdin(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        reply = self._stdin_reply(conn, self._process(req), data)
        return reply or None

    def _eof(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        process = self._process(req)
        if process.stdin is None:
            return {"status": "not_open"}
        status = process.stdin.end_of_input()
        self._sync_stdin(process)
        return {"status": status}

    def _signal(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        process = self._process(req)
        sig = _field(req, "signal", int)
        if req.get("group", True):
            return {"sent": self._signal_group(process, sig)}
        if process.pid is None or process.status is not None:
            return {"sent": False}
        try:
            os.kill(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return {"sent": False}
        return {"sent": True}

    def _resize(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        process = self._process(req)
        if process.master is None:
            return {"ok": False}
        set_window(process.master, _field(req, "rows", int), _field(req, "cols", int))
        return {"ok": True}

    def _suspend(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGSTOP, namespace=self.namespace)
        return {"ok": True}

    def _resume(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGCONT, namespace=self.namespace)
        return {"ok": True}

    def _kill_all(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        signal_sandbox(signal.SIGKILL, namespace=self.namespace)
        return {"ok": True}

    def _egress(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any] | None:
        """Put a policy change in force: open the proxy port or close it (``open``), then
        have the keeper cut every connection the policy now in force does not permit.

        The reply waits for the keeper's confirmation (the caller's request deadline
        bounds that wait), so once it is ``ok`` no connection the policy forbids is
        left. ``egress_failed`` when the port cannot be opened, or when the change
        opens it and the keeper is gone; a change that closes the port succeeds
        without the keeper (with it gone, no connection is left to cut). The
        caller sends nothing more on ``conn`` before the reply.
        """
        open_ = bool(req.get("open"))
        self.set_egress(open_)
        bridge = self.bridge
        if self.egress is None or bridge is None:
            return {"ok": False}
        if bridge.gone:
            if open_:
                raise Refused("egress_failed", _KEEPER_GONE)
            return {"ok": True}
        bridge.waiters.append((conn, open_))
        bridge.unsent += 1
        self._write_keeper()
        return None

    def _shutdown(self, conn: Connection, req: dict[str, Any], data: bytes) -> dict[str, Any]:
        self.exiting = True
        return {"ok": True}

    # -- egress bridge ----------------------------------------------------------------

    def set_egress(self, open_: bool) -> None:
        """Listen on the proxy port inside the sandbox, or stop listening (deny all)
        while keeping the port bound (:class:`Bridge`).

        The first call, as the agent starts and before any command runs, binds the
        port and starts watching the channel to the keeper. Refused
        (``egress_failed``) when the port cannot be bound, listened on again or
        closed; the agent serves on either way.
        """
        if self.egress is None:
            return
        try:
            if self.bridge is None:
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                try:
                    sock.bind(("127.0.0.1", EGRESS_PORT))
                except OSError:
                    sock.close()
                    raise
                sock.setblocking(False)
                self.bridge = Bridge(sock)
                self.sel.register(self.egress, selectors.EVENT_READ, self._on_keeper)
            bridge = self.bridge
            if open_ and not bridge.listening:
                try:
                    bridge.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    bridge.sock.listen(64)
                except OSError:
                    with contextlib.suppress(OSError):
                        bridge.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
                    raise
                self.sel.register(bridge.sock, selectors.EVENT_READ, self._on_bridge)
                bridge.listening = True
            elif not open_ and bridge.listening:
                bridge.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
                bridge.sock.shutdown(socket.SHUT_RD)
                self.sel.unregister(bridge.sock)
                bridge.listening = False
        except OSError as exc:
            state = "opened" if open_ else "closed"
            raise Refused(
                "egress_failed", f"the proxy port cannot be {state}: {exc.strerror or exc}"
            ) from None

    def _on_bridge(self, mask: int) -> None:
        bridge = self.bridge
        assert bridge is not None and self.egress is not None
        try:
            client, _ = bridge.sock.accept()
        except OSError:
            return
        with client, contextlib.suppress(OSError):
            socket.send_fds(self.egress, [b"c"], [client.fileno()])

    def _on_keeper(self, mask: int) -> None:
        """The channel to the keeper: its confirmations (one ``a`` per policy notice),
        its end, and room for the notices not written yet."""
        bridge = self.bridge
        assert bridge is not None and self.egress is not None
        if mask & selectors.EVENT_WRITE:
            self._write_keeper()
        if not mask & selectors.EVENT_READ or bridge.gone:
            return
        try:
            data = self.egress.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._keeper_gone()
            return
        for _ in range(data.count(b"a")):
            if not bridge.waiters:
                break
            conn, _ = bridge.waiters.pop(0)
            if not conn.closed:
                conn.send_reply({"ok": True})
                conn.flush()

    def _write_keeper(self) -> None:
        """Write the policy notices not sent yet (``p``); the rest waits for room."""
        bridge = self.bridge
        assert bridge is not None and self.egress is not None
        while bridge.unsent and not bridge.gone:
            try:
                sent = self.egress.send(b"p" * bridge.unsent)
            except BlockingIOError:
                break
            except OSError:
                self._keeper_gone()
                return
            bridge.unsent -= sent
        if not bridge.gone:
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if bridge.unsent else 0)
            self.sel.modify(self.egress, mask, self._on_keeper)

    def _keeper_gone(self) -> None:
        """The keeper has exited, and every connection it relayed with it. A waiting
        change that closed the port is in force; one that opened it cannot be."""
        bridge = self.bridge
        assert bridge is not None and self.egress is not None
        bridge.gone = True
        bridge.unsent = 0
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.egress)
        while bridge.waiters:
            conn, opened = bridge.waiters.pop(0)
            if conn.closed:
                continue
            if opened:
                conn.send_reply({"error": "egress_failed", "message": _KEEPER_GONE})
            else:
                conn.send_reply({"ok": True})
            conn.flush()


class Bridge:
    """The proxy port inside the sandbox, and the agent's state of its channel to the keeper.

    ``sock`` is bound to ``127.0.0.1:3128`` as the agent starts and stays bound
    for the agent's whole life, so no command can ever bind the port, whatever
    the policy. While egress is open it listens, with ``SO_REUSEADDR`` (the
    ``TIME_WAIT`` of connections it accepted never keeps it from listening
    again; while it listens nothing else may bind the port). Under deny-all it
    is bound without listening and without ``SO_REUSEADDR`` — nothing can
    share the port, and a connection to it is refused. Reopening sets the
    option back and listens, two calls apart: a command that binds and
    listens in between makes that reopening fail (``egress_failed``), never
    the agent.

    ``waiters``: connections awaiting the keeper's confirmation of a policy
    change, in order, each with whether that change opened the port;
    ``unsent``: policy notices not written to the channel yet; ``gone``: the
    keeper has exited.
    """

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.listening = False
        self.waiters: list[tuple[Connection, bool]] = []
        self.unsent = 0
        self.gone = False


def _field(record: dict[str, Any], key: str, kind: type) -> Any:
    value = record.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise Refused("bad_request", f"bad {key!r}")
    return value


def _prctl(option: int, value: int) -> None:
    """``prctl(option, value)`` on Linux; elsewhere there is no such call (nothing to do)."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), f"prctl({option}) failed")


def _become(uid: int) -> None:
    """Drop from the namespace's root to the sandbox user ``uid`` (and group ``uid``) for
    good: every capability leaves the bounding set first, then ``setres[ug]id`` clears
    the rest, so neither the agent nor anything it forks can get them back.

    Only for a root caller's sandbox (``"user"`` in the configuration): bubblewrap
    leaves the uid switch to the agent there (see :mod:`.launch`). Verified, not assumed.
    """
    with open("/proc/sys/kernel/cap_last_cap") as source:
        last = int(source.read())
    for capability in range(last + 1):
        _prctl(_PR_CAPBSET_DROP, capability)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
        raise SystemExit("managoat_sandbox agent: could not become the sandbox user")


def _apply_limits(limits: dict[str, Any]) -> None:
    for name, limit in _LIMITS.items():
        value = limits.get(name)
        if isinstance(value, int) and value > 0:
            resource.setrlimit(limit, (value, value))


def _listen(state_fd: int, path: str | None) -> socket.socket:
    """The control socket, bound by the agent itself once it holds the lock: only the
    agent ever has it open, so a connection that succeeds reaches a live agent.

    ``path`` is the socket's host path (given when short enough); otherwise, as
    inside the sandbox where that path does not exist, it is reached through the
    state directory's descriptor.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(SOCKET, dir_fd=state_fd)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path or f"/proc/self/fd/{state_fd}/{SOCKET}")
    listener.listen(128)
    return listener


def _record_orphans(state_fd: int) -> None:
    """Record every session a previous agent left without an end as lost.

    A new agent runs none of them, so their outcome can never be known; with
    the record, "no end recorded" always means "running under the live agent".
    """
    sessions = os.open(
        SESSIONS, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=state_fd
    )
    try:
        names = os.listdir(sessions)
    finally:
        os.close(sessions)
    for sid in names:
        try:
            os.stat(f"{SESSIONS}/{sid}/{EXIT}", dir_fd=state_fd, follow_symlinks=False)
        except FileNotFoundError:
            with contextlib.suppress(OSError):
                write_record(state_fd, f"{SESSIONS}/{sid}/{EXIT}", {"lost": "agent_gone"})
        except OSError:
            continue


def _lock(state_fd: int) -> int:
    fd = os.open(
        LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=state_fd
    )
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit("managoat_sandbox agent: another agent serves this sandbox") from None
    return fd


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the agent process."""
    options = parse(
        sys.argv[1:] if argv is None else argv,
        required=("state", "ready"),
        optional=("socket", "egress", "config"),
    )
    state, ready = int(options["state"]), int(options["ready"])
    egress_fd = int(options["egress"]) if "egress" in options else None
    config = json.loads(options.get("config", "{}"))
    for fd in (state, ready, *([] if egress_fd is None else [egress_fd])):
        os.set_inheritable(fd, False)
    if isinstance(config.get("user"), int):
        _become(config["user"])
    _prctl(_PR_SET_DUMPABLE, 0)
    if not config.get("namespace"):
        _prctl(_PR_SET_CHILD_SUBREAPER, 1)
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        signal.signal(signum, _ignore)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _apply_limits(config.get("limits") or {})
    os.chdir("/")
    _lock(state)  # held, close-on-exec, for the agent's whole life
    with contextlib.suppress(FileExistsError):
        os.mkdir(SESSIONS, 0o700, dir_fd=state)
    _record_orphans(state)
    if not config.get("namespace"):
        write_record(state, "agent.json", {"pid": os.getpid(), "start": start_time(os.getpid())})
    listener = _listen(state, options.get("socket"))
    egress = None if egress_fd is None else socket.socket(fileno=egress_fd)
    agent = Agent(state, listener, egress, config)
    os.write(ready, b"R")
    os.close(ready)
    agent.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
