"""The supervisor program: ``python -m managoat_sandbox._engine.supervisor SESSION_DIR``.

Normally launched by :func:`.control.start`, which passes the already locked
session lock with ``--lock-fd`` and makes ``supervisor.log`` its stderr (where
a failure's traceback goes); run by hand it takes the lock itself. The
launched process forks once and exits at once (its parent reaps it); the
forked supervisor then, with the session directory as working directory and
only relative paths (so renaming the directory does not disturb it):

1. reads the spec and the child's environment (deleting ``launch.json``);
2. opens the child's stdio (pipes, or a pseudo-terminal) and, with stdin
   enabled, the stdin socket;
3. starts the child in a new session/process group and writes ``ready.json``
   (a failure to execute is journaled on stderr and recorded as exit 127 for
   a missing program, 126 otherwise);
4. journals output until the child has exited and its pipes reached EOF, or
   ``DRAIN_TIMEOUT`` seconds after the exit if descendants keep them open;
5. writes ``exit.json``, then reaps the child (so its pid, which is also its
   process group id, cannot be reused while the exit is unrecorded), closes
   the stdin socket and exits, releasing the lock.

SIGHUP and SIGINT are ignored; SIGTERM is forwarded to the child's group.
If the supervisor is killed outright, the child keeps running in its group and
readers report the session Lost.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import os
import pty
import selectors
import signal
import struct
import subprocess
import sys
import termios
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from .errors import EngineError
from .journal import BLOCK, STDERR, STDOUT, JournalWriter
from .session import (
    JOURNAL,
    LAUNCH,
    LOCK,
    READY,
    Exited,
    ProcessInfo,
    SessionSpec,
    read_json,
    read_spec,
    write_exit,
    write_ready,
)
from .stdin_server import StdinServer

DRAIN_TIMEOUT = 0.3
_IDLE_TIMEOUT = 1.0
_TTY_SIZE = struct.pack("HHHH", 24, 80, 0, 0)


@dataclass
class _Stdio:
    child_fds: tuple[int, int, int]
    outputs: dict[int, int]
    stdin_target: int | None

    def close_child_fds(self) -> None:
        for fd in set(self.child_fds):
            os.close(fd)


def _open_stdio(spec: SessionSpec) -> _Stdio:
    if spec.tty:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, _TTY_SIZE)
        return _Stdio(
            (slave, slave, slave), {master: STDOUT}, os.dup(master) if spec.stdin else None
        )
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    if spec.stdin:
        in_r, in_w = os.pipe()
        return _Stdio((in_r, out_w, err_w), {out_r: STDOUT, err_r: STDERR}, in_w)
    devnull = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    return _Stdio((devnull, out_w, err_w), {out_r: STDOUT, err_r: STDERR}, None)


def _take_controlling_tty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _read_env(session_dir: Path) -> dict[str, str]:
    record = read_json(session_dir / LAUNCH)
    env = None if record is None else record.get("env")
    if not isinstance(env, dict):
        raise EngineError(f"missing or malformed {LAUNCH}")
    os.unlink(session_dir / LAUNCH)
    return {str(key): str(value) for key, value in env.items()}


def _poll_exit(pid: int) -> Exited | None:
    """The child's exit if it has exited, leaving it unreaped (WNOWAIT)."""
    result = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    if result is None:
        return None
    if result.si_code == os.CLD_EXITED:
        return Exited(result.si_status)
    return Exited(128 + result.si_status, result.si_status)


class Supervisor:
    """One supervisor run for one session directory (the working directory)."""

    def __init__(self, session_dir: Path) -> None:
        self._dir = session_dir
        self._sel = selectors.DefaultSelector()
        self._outputs: dict[int, int] = {}
        self._journal = JournalWriter(session_dir / JOURNAL)
        self._server: StdinServer | None = None
        self._pid: int | None = None
        self._exit: Exited | None = None

    def run(self) -> None:
        """Start the child, journal it until it has ended, record the exit."""
        spec = read_spec(self._dir)
        if (self._dir / READY).exists():
            raise EngineError("this session was already started")
        env = _read_env(self._dir)
        self._install_signals()
        stdio = _open_stdio(spec)
        if stdio.stdin_target is not None:
            self._server = StdinServer(self._sel, stdio.stdin_target, tty=spec.tty)
        try:
            # preexec_fn is safe here: the supervisor is single-threaded.
            proc = subprocess.Popen(
                spec.argv,
                stdin=stdio.child_fds[0],
                stdout=stdio.child_fds[1],
                stderr=stdio.child_fds[2],
                env=env,
                cwd=spec.cwd,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_take_controlling_tty if spec.tty else None,  # noqa: PLW1509
            )
        except (OSError, subprocess.SubprocessError) as exc:
            stdio.close_child_fds()
            for fd in stdio.outputs:
                os.close(fd)
            write_ready(self._dir, ProcessInfo(os.getpid(), None, None))
            message = f"managoat_sandbox: cannot execute {spec.argv[0]!r}: {exc}\n"
            self._journal.write(STDOUT if spec.tty else STDERR, message.encode())
            self._finish(Exited(127 if isinstance(exc, FileNotFoundError) else 126))
            return
        stdio.close_child_fds()
        self._pid = proc.pid
        for fd, stream in stdio.outputs.items():
            os.set_blocking(fd, False)
            self._sel.register(fd, selectors.EVENT_READ, functools.partial(self._read, fd, stream))
            self._outputs[fd] = stream
        write_ready(self._dir, ProcessInfo(os.getpid(), proc.pid, proc.pid))
        exited = self._pump(proc.pid)
        for fd in stdio.outputs:
            if fd in self._outputs:
                self._stop_reading(fd)
            os.close(fd)
        self._finish(exited)
        _, wait_status = os.waitpid(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(wait_status)

    def _pump(self, pid: int) -> Exited:
        drain_deadline = 0.0
        while True:
            if self._exit is None:
                self._exit = _poll_exit(pid)
                if self._exit is not None:
                    drain_deadline = time.monotonic() + DRAIN_TIMEOUT
                    if self._server is not None:
                        self._server.child_exited()
            timeout = _IDLE_TIMEOUT
            if self._exit is not None:
                timeout = drain_deadline - time.monotonic()
                if not self._outputs or timeout <= 0:
                    return self._exit
            if self._server is not None:
                self._server.update()
            for key, _ in self._sel.select(timeout):
                key.data()

    def _read(self, fd: int, stream: int) -> None:
        try:
            data = os.read(fd, BLOCK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._journal.write(stream, data)
        else:
            self._stop_reading(fd)

    def _stop_reading(self, fd: int) -> None:
        # The fd stays open until the child has exited: closing a pty master
        # hangs the terminal up, which would SIGHUP a child still exiting.
        self._sel.unregister(fd)
        del self._outputs[fd]

    def _finish(self, exited: Exited) -> None:
        self._exit = exited
        write_exit(self._dir, exited)
        if self._server is not None:
            self._server.child_exited()
            self._server.close()
        self._journal.close()

    def _install_signals(self) -> None:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        self._sel.register(
            wake_r, selectors.EVENT_READ, functools.partial(self._drain_wakeups, wake_r)
        )
        signal.signal(signal.SIGCHLD, _ignore)
        signal.signal(signal.SIGHUP, _ignore)
        signal.signal(signal.SIGINT, _ignore)
        signal.signal(signal.SIGTERM, self._forward_term)

    @staticmethod
    def _drain_wakeups(fd: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(fd, 256):
                pass

    def _forward_term(self, signum: int, frame: FrameType | None) -> None:
        if self._pid is not None and self._exit is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._pid, signal.SIGTERM)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A handler that does nothing: unlike SIG_IGN it is not inherited across exec."""


def _lock(session_dir: Path) -> int | None:
    fd = os.open(session_dir / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the launcher's exit status (the supervisor forks away)."""
    parser = argparse.ArgumentParser(
        prog="python -m managoat_sandbox._engine.supervisor",
        description="Supervise the command described by SESSION_DIR/spec.json.",
    )
    parser.add_argument("session_dir", type=Path)
    parser.add_argument("--lock-fd", type=int, help="descriptor of the already locked lock")
    args = parser.parse_args(argv)
    session_dir: Path = args.session_dir.absolute()
    lock_fd = _lock(session_dir) if args.lock_fd is None else args.lock_fd
    if lock_fd is None:
        print(f"{session_dir} is already supervised", file=sys.stderr)
        return 1
    os.set_inheritable(lock_fd, False)
    if os.fork() != 0:
        os._exit(0)
    try:
        os.chdir(session_dir)
        # Relative paths from here on: the session survives a rename of its directory.
        Supervisor(Path(".")).run()
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
