"""Client side of the engine: start a supervised command, signal it, wait for it."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from .errors import EngineError
from .session import (
    JOURNAL,
    LAUNCH,
    LOCK,
    LOG,
    Exited,
    Lost,
    ProcessInfo,
    SessionSpec,
    read_process,
    require_session,
    supervisor_alive,
    terminal_state,
    write_json_atomic,
    write_spec,
)

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_POLL = 0.01


def _child_env(env: Mapping[str, str] | None, *, inherit_env: bool, tty: bool) -> dict[str, str]:
    merged = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "HOME": os.path.expanduser("~")}
    if inherit_env:
        merged.update(os.environ)
    if tty:
        merged.setdefault("TERM", "xterm-256color")
    merged.update(env or {})
    return merged


#: Runs the supervisor with the engine as a top-level package: the engine imports
#: nothing outside itself, so the interpreter starts isolated (-I) and without
#: site-packages (-S), and the package root (with its dependencies) is never
#: imported. That keeps the cost of every command's start-up low.
_BOOTSTRAP = (
    "import sys, runpy; sys.path.insert(0, sys.argv.pop(1)); "
    "runpy.run_module('_engine.supervisor', run_name='__main__', alter_sys=True)"
)
_ENGINE_PARENT = str(Path(__file__).resolve().parent.parent)


def _take_lock(path: Path, deadline: float) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise EngineError(f"could not lock {path}") from None
            time.sleep(_POLL)


def _failure(session_dir: Path, what: str) -> EngineError:
    try:
        log = (session_dir / LOG).read_text(errors="replace").strip()
    except FileNotFoundError:
        log = ""
    return EngineError(f"supervisor for {session_dir} {what}" + (f":\n{log}" if log else ""))


def start(
    session_dir: Path,
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: bool = False,
    tty: bool = False,
    inherit_env: bool = True,
    ready_timeout: float = 10.0,
) -> ProcessInfo:
    """Run ``argv`` under a detached supervisor journaling into ``session_dir``.

    ``session_dir`` is created (its parents too) and must not exist
    (FileExistsError). The child's environment is a minimal base (PATH, HOME,
    LANG; TERM with a tty), overlaid with this process's environment unless
    ``inherit_env`` is false, then with ``env``. ``cwd`` defaults to this
    process's working directory (NotADirectoryError if it is not a directory).
    With ``stdin`` the child's stdin is writable through :mod:`.stdin`,
    otherwise it is /dev/null (or an idle terminal with ``tty``). With ``tty``
    the child gets a pseudo-terminal (24x80) as its controlling terminal and
    stdin/stdout/stderr.

    Returns once the supervisor reports ready: the child runs, or it could not
    be executed and its exit (127 missing program, 126 otherwise) is recorded.
    EngineError (with the supervisor's log) if the supervisor fails or is not
    ready within ``ready_timeout`` seconds; the directory is left as it is then.
    The supervisor's stdin and stdout are /dev/null and its stderr is the
    session's ``supervisor.log``; it is reparented away at once (the short-lived
    launcher is reaped here), so no zombie stays behind in this process.
    """
    if not argv:
        raise ValueError("argv must not be empty")
    session_dir = Path(os.path.abspath(session_dir))
    workdir = Path(os.path.abspath(cwd if cwd is not None else os.getcwd()))
    if not workdir.is_dir():
        raise NotADirectoryError(f"cwd is not a directory: {workdir}")
    deadline = time.monotonic() + ready_timeout
    session_dir.parent.mkdir(parents=True, exist_ok=True)
    session_dir.mkdir(mode=0o700)
    lock_fd = _take_lock(session_dir / LOCK, deadline)
    try:
        os.close(os.open(session_dir / JOURNAL, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o600))
        write_json_atomic(
            session_dir / LAUNCH, {"env": _child_env(env, inherit_env=inherit_env, tty=tty)}
        )
        write_spec(
            session_dir,
            SessionSpec(
                argv=tuple(argv),
                cwd=workdir,
                tty=tty,
                stdin=stdin,
                created_at=datetime.now(timezone.utc),
            ),
        )
        with open(session_dir / LOG, "ab") as log:
            launcher = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    _BOOTSTRAP,
                    _ENGINE_PARENT,
                    str(session_dir),
                    "--lock-fd",
                    str(lock_fd),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                cwd=session_dir,
                start_new_session=True,
                close_fds=True,
                pass_fds=(lock_fd,),
            )
    finally:
        os.close(lock_fd)
    return _await_ready(session_dir, launcher, deadline)


def _await_ready(
    session_dir: Path, launcher: subprocess.Popen[bytes], deadline: float
) -> ProcessInfo:
    try:
        code = launcher.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait()
        raise _failure(session_dir, "launcher did not detach in time") from None
    if code != 0:
        raise _failure(session_dir, f"launcher failed with status {code}")
    while True:
        info = read_process(session_dir)
        if info is not None:
            return info
        if not supervisor_alive(session_dir):
            info = read_process(session_dir)
            if info is not None:
                return info
            raise _failure(session_dir, "died before reporting ready")
        if time.monotonic() >= deadline:
            raise _failure(session_dir, "did not report ready in time")
        time.sleep(_POLL)


def signal_group(session_dir: Path, sig: int) -> bool:
    """Send ``sig`` to the child's process group.

    False (nothing sent) if the process has ended, never started, its group is
    gone, or its supervisor is gone (the group id could no longer be trusted).
    The supervisor reaps the child only after recording its exit, so while the
    exit is unrecorded the group id cannot have been reused.
    """
    require_session(session_dir)
    info = read_process(session_dir)
    if info is None or info.pgid is None or terminal_state(session_dir) is not None:
        return False
    try:
        os.killpg(info.pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError as exc:
        raise EngineError(f"cannot signal process group {info.pgid}: {exc}") from exc
    return True


def suspend(session_dir: Path) -> bool:
    """Stop the child's process group (SIGSTOP); False if it is not running."""
    return signal_group(session_dir, signal.SIGSTOP)


def resume(session_dir: Path) -> bool:
    """Continue the child's process group (SIGCONT); False if it is not running."""
    return signal_group(session_dir, signal.SIGCONT)


def wait_exit(session_dir: Path, *, timeout: float) -> Exited | Lost | None:
    """Poll until the session has ended; its end, or None after ``timeout`` seconds."""
    require_session(session_dir)
    deadline = time.monotonic() + timeout
    while True:
        end = terminal_state(session_dir)
        if end is not None or time.monotonic() >= deadline:
            return end
        time.sleep(_POLL)


def terminate(session_dir: Path, *, timeout: float = 10.0, force: bool = False) -> int | None:
    """End the process and return its recorded exit code.

    Graceful: SIGTERM then SIGCONT (so a stopped group acts on it) to the group;
    ``force``: SIGKILL to the group. Then waits up to ``timeout`` seconds for the
    exit record. An already-ended process is not signalled and its code is
    returned. None if no exit was recorded in time or the session is Lost.
    """
    require_session(session_dir)
    end = terminal_state(session_dir)
    if end is None:
        if force:
            signal_group(session_dir, signal.SIGKILL)
        elif signal_group(session_dir, signal.SIGTERM):
            signal_group(session_dir, signal.SIGCONT)
        end = wait_exit(session_dir, timeout=timeout)
    return end.code if isinstance(end, Exited) else None
