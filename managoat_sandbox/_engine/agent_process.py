"""One command run by the agent: its child process, output pipes, journal and end.

A :class:`Process` is owned by the agent's loop (:mod:`.agent`). It is
*journaled* (a detachable session: every output frame is appended to the
session's ``journal`` before anyone sees it, and the end is recorded in
``exit.json``) or *ephemeral* (an ``exec``: output goes only to the one
connection that started it, and nothing touches the disk).

The end of a process is decided once: after its exit status was reaped and
its output pipes reached end of file — every writer closed, the main process's
descendants included, as with :mod:`subprocess`. A descendant that keeps the
pipes open keeps the process running; only the caller's deadline (which
signals the process group) ends the wait. The one exception is an ephemeral
process nobody follows any more (its caller gave up): it ends once reaped, as
nobody can read what its descendants write. The end is the real exit of the
main process (``{"code", "signal"}``, 128 + N for a signal) or, when output
could not be journaled, ``{"lost": reason}``; it is never guessed.

With ``merge`` the command's stdout and stderr are one pipe (as with ``2>&1``),
read as ``OUT``: the bytes come in the order the command wrote them.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import struct
import subprocess
import time

from . import wire
from .stdin_feed import StdinFeed

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from typing import Any, Generic, TypeVar

    #: Whoever the agent lets follow a process or wait to write its stdin (its connections).
    Client = TypeVar("Client")

    class _Holding(Generic[Client]):
        """What holds clients of type ``Client``, for type checkers."""

else:

    class _Holding:
        """The same at run time, where ``typing`` is not loaded: ``Process[C]`` is
        ``Process`` itself."""

        def __class_getitem__(cls, item: object) -> type:
            return cls


SESSIONS = "sessions"
SPEC = "spec.json"
JOURNAL = "journal"
EXIT = "exit.json"


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (short writes completed)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_record(state_fd: int, path: str, record: dict[str, Any]) -> None:
    """Replace ``path`` (relative to ``state_fd``) atomically with ``record`` as JSON."""
    tmp = path + ".tmp"
    fd = os.open(
        tmp,
        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
        dir_fd=state_fd,
    )
    try:
        write_all(fd, json.dumps(record).encode())
    finally:
        os.close(fd)
    os.replace(tmp, path, src_dir_fd=state_fd, dst_dir_fd=state_fd)


def _terminal_control() -> Callable[[], None]:
    """What a child run on a terminal does between fork and exec: take its standard
    input as its controlling terminal. (``termios`` is loaded only for terminals.)"""
    import termios  # noqa: PLC0415 - most commands never have a terminal

    request = termios.TIOCSCTTY

    def take() -> None:
        fcntl.ioctl(0, request, 0)

    return take


def set_window(fd: int, rows: int, cols: int) -> None:
    """Set a terminal's size."""
    import termios  # noqa: PLC0415 - most commands never have a terminal

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Process(_Holding["Client"]):
    """A command's child process and everything the agent keeps about it.

    Its subscribers and stdin waiters are the agent's clients; the process
    only holds them, in order, for the agent to drive.
    """

    def __init__(
        self, sid: str, *, journal_fd: int | None, stdin: bool, tty: bool, merge: bool = False
    ) -> None:
        self.sid = sid
        self.journal_fd = journal_fd
        self.stdin_requested = stdin
        self.tty = tty
        self.merge = merge
        self.pid: int | None = None
        self.popen: subprocess.Popen[bytes] | None = None
        self.outputs: dict[int, int] = {}
        self.spent: list[int] = []
        self.master: int | None = None
        self.stdin: StdinFeed | None = None
        self.stdin_waiters: list[Client] = []
        self.size = 0
        self.paused = False
        self.status: int | None = None
        self.broken: str | None = None
        self.end: dict[str, Any] | None = None
        self.subscribers: list[Client] = []

    @property
    def journaled(self) -> bool:
        """Whether the process is a detachable session with a journal on disk."""
        return self.journal_fd is not None

    # -- start ------------------------------------------------------------------

    def start(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str,
        *,
        rows: int,
        cols: int,
        nofile_soft: int | None,
    ) -> OSError | None:
        """Start the child in its own session; the OSError if it could not be executed.

        ``nofile_soft`` is the child's soft limit on open files (see
        :func:`_popen`).
        """
        child: list[int] = []
        preexec = None
        if self.tty:
            master, slave = os.openpty()
            set_window(slave, rows, cols)
            child.append(slave)
            stdio: tuple[Any, Any, Any] = (slave, slave, slave)
            self.outputs = {master: wire.OUT}
            self.master = master
            if self.stdin_requested:
                self.stdin = StdinFeed(os.dup(master), tty=True)
            preexec = _terminal_control()
        elif self.merge:
            out_r, out_w = os.pipe()
            child.append(out_w)
            stdin_source = self._stdin_pipe(child)
            stdio = (stdin_source, out_w, out_w)
            self.outputs = {out_r: wire.OUT}
        else:
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            child += [out_w, err_w]
            stdin_source = self._stdin_pipe(child)
            stdio = (stdin_source, out_w, err_w)
            self.outputs = {out_r: wire.OUT, err_r: wire.ERR}
        try:
            self.popen = _popen(argv, stdio, env, cwd, preexec=preexec, nofile_soft=nofile_soft)
        except (OSError, subprocess.SubprocessError) as exc:
            for fd in child:
                os.close(fd)
            self._close_outputs()
            if self.stdin is not None:
                self.stdin.release()
                self.stdin = None
            return exc if isinstance(exc, OSError) else OSError(str(exc))
        for fd in child:
            os.close(fd)
        self.pid = self.popen.pid
        for fd in self.outputs:
            os.set_blocking(fd, False)
        return None

    def _stdin_pipe(self, child: list[int]) -> Any:
        """The child's stdin: a pipe fed through :class:`StdinFeed` when requested (its
        read end added to ``child``, closed here once the child has it), else /dev/null."""
        if not self.stdin_requested:
            return subprocess.DEVNULL
        in_r, in_w = os.pipe()
        child.append(in_r)
        self.stdin = StdinFeed(in_w, tty=False)
        return in_r

    # -- output and end ---------------------------------------------------------

    def record(self, stream: int, data: bytes) -> bytes:
        """Journal one output frame (if journaled) and count it; the frame.

        OSError if the journal cannot take it (disk full, file size limit).
        """
        frame = wire.frame(stream, data)
        if self.journal_fd is not None:
            write_all(self.journal_fd, frame)
        self.size += len(frame)
        return frame

    def stop_reading(self, fd: int) -> None:
        """Forget an output descriptor (its pipe reached end of file).

        The descriptor stays open until the end: closing a terminal's master
        hangs the terminal up, which would signal a child that is still exiting.
        """
        self.outputs.pop(fd, None)
        self.spent.append(fd)

    def reaped(self, status: int) -> None:
        """The child's wait status arrived; its output still drains until end of file."""
        self.status = status
        if self.popen is not None:
            self.popen.returncode = os.waitstatus_to_exitcode(status)

    def ready_to_end(self) -> bool:
        """Whether the end can be decided: reaped, and every output pipe at end of file
        (every writer closed) — or, for an ephemeral process, nobody left to read it."""
        if self.end is not None or self.status is None:
            return False
        return not self.outputs or (not self.journaled and not self.subscribers)

    def decide_end(self) -> dict[str, Any]:
        """The end record: the real exit, or ``lost`` for a broken journal."""
        if self.broken is not None:
            return {"lost": self.broken}
        assert self.status is not None
        code = os.waitstatus_to_exitcode(self.status)
        if code < 0:
            return {"code": 128 - code, "signal": -code}
        return {"code": code, "signal": None}

    def signal_group(self, sig: int) -> bool:
        """Send ``sig`` to the process's group, unless it never started or has ended;
        whether it was sent."""
        if self.pid is None or self.end is not None:
            return False
        try:
            os.killpg(self.pid, sig)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _close_outputs(self) -> None:
        for fd in [*self.outputs, *self.spent]:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.outputs = {}
        self.spent = []
        self.master = None

    def close(self) -> None:
        """Release every descriptor but the journal (lagging subscribers still read it)."""
        self._close_outputs()
        if self.stdin is not None:
            self.stdin.release()

    def close_journal(self) -> None:
        """Close the journal once nobody reads it any more."""
        if self.journal_fd is not None:
            os.close(self.journal_fd)
            self.journal_fd = None


def _popen(
    argv: list[str],
    stdio: tuple[Any, Any, Any],
    env: dict[str, str],
    cwd: str,
    *,
    preexec: Callable[[], None] | None,
    nofile_soft: int | None,
) -> subprocess.Popen[bytes]:
    """Fork and execute ``argv`` in a new session, its open-files soft limit ``nofile_soft``.

    The fast way lowers the agent's own soft limit just around the fork (the
    agent is single-threaded, so nothing else runs meanwhile), which keeps the
    fork a ``vfork``. While the agent holds more descriptors than the child may
    (hundreds of live commands), the fork's own bookkeeping pipe cannot be made
    under the lowered limit (EMFILE): then the limit is set in the child before
    it executes, a plain fork, about a millisecond slower.
    """

    def spawn(pre: Callable[[], None] | None) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            argv,
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            env=env,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
            preexec_fn=pre,  # noqa: PLW1509 - the agent is single-threaded
        )

    try:
        with _soft_nofile(nofile_soft):
            return spawn(preexec)
    except OSError as error:
        if nofile_soft is None or error.errno != errno.EMFILE:
            raise
    soft = nofile_soft

    def limited() -> None:
        if preexec is not None:
            preexec()
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard), hard))

    return spawn(limited)


@contextlib.contextmanager
def _soft_nofile(soft: int | None) -> Iterator[None]:
    """Lower this process's soft open-files limit for the duration of a fork."""
    if soft is None:
        yield
        return
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, saved[1]), saved[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def session_spec(argv: list[str], cwd: str, *, tty: bool, stdin: bool) -> dict[str, Any]:
    """The ``spec.json`` record of a journaled session."""
    return {
        "argv": argv,
        "cwd": cwd,
        "tty": tty,
        "stdin": stdin,
        "created_at": _utc_now(),
    }


def _utc_now() -> str:
    """Now, in UTC, in ISO 8601 with microseconds (what ``datetime.fromisoformat`` reads),
    without loading ``datetime`` into the agent."""
    now = time.time_ns() // 1000
    seconds, micros = divmod(now, 1_000_000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{micros:06d}+00:00"
