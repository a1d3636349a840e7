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
while one of its subscribers keeps up (see :meth:`.agent_output.Pump.pace`);
when none does, the agent stops reading them and the command blocks on its
next write. What waits is then in the command's pipes and, for a detachable
session, in its journal on the sandbox's disk (at most
:data:`.agent_output.JOURNAL_LEAD` bytes ahead of the closest subscriber
while one is connected; without subscribers a session runs free, its journal
bounded by the sandbox's ``file_size``) — not in the agent's memory, nor in
its subscribers'. A subscriber that does not read holds up only the command
it follows.

This module holds the agent's start (:func:`main`) and its event loop
(:class:`Agent`); the rest of it is, by job:

* :mod:`.agent_connection` — one client connection, and what it follows;
* :mod:`.agent_requests` — each request checked and put in force;
* :mod:`.agent_processes` — the processes: started, reaped, ended, recorded;
* :mod:`.agent_output` and :mod:`.agent_stdin` — their output and their stdin;
* :mod:`.agent_bridge` — the proxy port and the channel to the keeper;
* :mod:`.agent_process` — one command's child process, pipes and journal.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time

from .agent_bridge import Bridge
from .agent_connection import Connection, Process
from .agent_process import EXIT, SESSIONS, write_record
from .agent_processes import Processes
from .agent_requests import Requests
from .options import SOCKET, parse
from .process_tree import signal_sandbox, start_time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any

LOCK = "agent.lock"
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


def _ignore(signum: int, frame: object) -> None:
    """A handler that does nothing: unlike SIG_IGN it is reset to default by exec."""


class Agent:
    """The agent's state and its single-threaded event loop: it accepts and drops
    connections, reaps children, ends processes and watches its state directory;
    requests go to :class:`.agent_requests.Requests`, processes to
    :class:`.agent_processes.Processes`."""

    def __init__(
        self,
        state_fd: int,
        listener: socket.socket,
        egress: socket.socket | None,
        config: dict[str, Any],
    ) -> None:
        self.state = state_fd
        self.namespace = bool(config.get("namespace"))
        self.sel: selectors.BaseSelector = selectors.DefaultSelector()
        self.processes = Processes(state_fd, self.sel, nofile_soft=config.get("child_open_files"))
        self.connections: set[Connection] = set()
        self.exiting = False
        self.listener = listener
        listener.setblocking(False)
        self.sel.register(listener, selectors.EVENT_READ, self._accept)
        self.bridge: Bridge | None = None
        if egress is not None:
            self.bridge = Bridge.bind(self.sel, egress, open_=bool(config.get("egress", True)))
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self.sel.register(self._wake_r, selectors.EVENT_READ, self._on_wakeup)
        signal.signal(signal.SIGCHLD, _ignore)
        self.requests = Requests(
            self.processes, self.bridge, namespace=self.namespace, shutdown=self.shut_down
        )

    # -- the loop ------------------------------------------------------------------

    def run(self) -> None:
        """Serve until shut down or until the state directory is deleted."""
        next_check = time.monotonic() + _IDLE
        while not self.exiting:
            for key, mask in self.sel.select(max(next_check - time.monotonic(), 0.0)):
                callback: Callable[[int], None] = key.data
                callback(mask)
            now = time.monotonic()
            self.processes.end_finished()
            if now >= next_check:
                next_check = now + _IDLE
                if os.fstat(self.state).st_nlink == 0:
                    self.shut_down()
        self._flush_all()
        signal_sandbox(signal.SIGKILL, namespace=self.namespace)

    def shut_down(self) -> None:
        """End the loop once the current round of events is handled."""
        self.exiting = True

    def _flush_all(self) -> None:
        deadline = time.monotonic() + 1.0
        for conn in list(self.connections):
            with contextlib.suppress(OSError):
                conn.sock.setblocking(True)
                conn.sock.settimeout(max(deadline - time.monotonic(), 0.01))
                conn.sock.sendall(conn.out)

    def _on_wakeup(self, mask: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass
        self.processes.reap()

    # -- connections ---------------------------------------------------------------

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
                process.signal_group(signal.SIGKILL)

    def handle(
        self, conn: Connection, header: dict[str, Any], data: bytes
    ) -> dict[str, Any] | None:
        """Answer one request (:meth:`.agent_requests.Requests.handle`)."""
        return self.requests.handle(conn, header, data)

    def pace(self, process: Process) -> None:
        """Pace the reading of ``process``'s output (:meth:`.agent_output.Pump.pace`)."""
        self.processes.output.pace(process)

    def unsubscribe(self, conn: Connection, process: Process) -> None:
        """``conn`` no longer follows ``process``
        (:meth:`.agent_processes.Processes.unsubscribe`)."""
        self.processes.unsubscribe(conn, process)


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
    # Everything the agent writes goes through descriptors (os.write): nothing is left
    # for the interpreter's teardown to flush, and the caller waits for this exit.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
