"""The on-disk layout of a session directory and the records kept in it.

A session directory holds one supervised command. Every file below is written
by exactly one party and, except the journal, replaced atomically (written to
``NAME.tmp`` and renamed), so readers in any process see either nothing or a
complete record:

``lock``
    Created and ``flock``-ed (exclusive) by :func:`~._engine.control.start`
    before anything else; the lock is handed over to the supervisor, which holds
    it for its whole life. A free lock means no supervisor.
``spec.json``
    What was asked for: argv, cwd, tty and stdin flags, creation time (UTC).
    Written by ``start``; its presence is what makes a directory a session.
``launch.json``
    The child's environment, written by ``start`` (mode 0600) and deleted by
    the supervisor as soon as it has read it.
``journal``
    The output records (see :mod:`.journal`); append-only.
``ready.json``
    Written by the supervisor once the child was started (or failed to start):
    the supervisor's pid and the child's pid and process group id.
``exit.json``
    ``{"code": int, "signal": int | null}``, written (and fsync-ed) after the
    last output record; its presence means the process has ended.
``stdin.sock``
    The supervisor's stdin socket, present while it runs with stdin enabled.
``supervisor.log``
    The supervisor's stderr: empty unless the supervisor itself failed.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeAlias, TypeVar

from .errors import EngineError

SPEC = "spec.json"
LAUNCH = "launch.json"
LOCK = "lock"
JOURNAL = "journal"
READY = "ready.json"
EXIT = "exit.json"
STDIN_SOCK = "stdin.sock"
LOG = "supervisor.log"

_T = TypeVar("_T")


@dataclass(frozen=True)
class SessionSpec:
    """What a session was started with (the content of ``spec.json``)."""

    argv: tuple[str, ...]
    cwd: Path
    tty: bool
    stdin: bool
    created_at: datetime


@dataclass(frozen=True)
class ProcessInfo:
    """The processes of a session; ``pid`` and ``pgid`` are None if exec failed."""

    supervisor_pid: int
    pid: int | None
    pgid: int | None


@dataclass(frozen=True)
class Running:
    """The supervisor is alive and no exit has been recorded yet."""


@dataclass(frozen=True)
class Exited:
    """The recorded end of the process.

    ``code`` is the exit status, or 128 + N for a process killed by signal N
    (then ``signal`` is N), or 127/126 when the program could not be executed.
    """

    code: int
    signal: int | None = None


@dataclass(frozen=True)
class Lost:
    """The supervisor is gone without recording an exit: the real outcome is unknown."""


Status: TypeAlias = Running | Exited | Lost


def write_json_atomic(path: Path, record: object, *, fsync: bool = False) -> None:
    """Replace ``path`` with ``record`` as JSON so that readers never see a partial file."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, json.dumps(record).encode())
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, object] | None:
    """The JSON object stored at ``path``, or None if the file does not exist."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise EngineError(f"malformed record {path}: {exc}") from exc
    if not isinstance(record, dict):
        raise EngineError(f"malformed record {path}: not an object")
    return record


def _field(record: dict[str, object], key: str, kind: type[_T], path: Path) -> _T:
    value = record.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise EngineError(f"malformed record {path}: bad {key!r}")
    return value


def _optional_int(record: dict[str, object], key: str, path: Path) -> int | None:
    return None if record.get(key) is None else _field(record, key, int, path)


def require_session(session_dir: Path) -> None:
    """Raise FileNotFoundError unless ``session_dir`` is a (fully created) session."""
    if not (session_dir / SPEC).is_file():
        raise FileNotFoundError(errno.ENOENT, "not an engine session", str(session_dir))


def write_spec(session_dir: Path, spec: SessionSpec) -> None:
    """Record ``spec`` as the session's ``spec.json``."""
    write_json_atomic(
        session_dir / SPEC,
        {
            "argv": list(spec.argv),
            "cwd": str(spec.cwd),
            "tty": spec.tty,
            "stdin": spec.stdin,
            "created_at": spec.created_at.isoformat(),
        },
    )


def read_spec(session_dir: Path) -> SessionSpec:
    """The session's spec; FileNotFoundError if ``session_dir`` is not a session."""
    path = session_dir / SPEC
    record = read_json(path)
    if record is None:
        raise FileNotFoundError(errno.ENOENT, "not an engine session", str(session_dir))
    argv = _field(record, "argv", list, path)
    if not argv or not all(isinstance(arg, str) for arg in argv):
        raise EngineError(f"malformed record {path}: bad 'argv'")
    return SessionSpec(
        argv=tuple(argv),
        cwd=Path(_field(record, "cwd", str, path)),
        tty=_field(record, "tty", bool, path),
        stdin=_field(record, "stdin", bool, path),
        created_at=datetime.fromisoformat(_field(record, "created_at", str, path)),
    )


def write_ready(session_dir: Path, info: ProcessInfo) -> None:
    """Record the session's processes (``ready.json``): the supervisor's ready signal."""
    write_json_atomic(
        session_dir / READY,
        {"supervisor_pid": info.supervisor_pid, "pid": info.pid, "pgid": info.pgid},
    )


def read_process(session_dir: Path) -> ProcessInfo | None:
    """The session's processes, or None if the supervisor has not reported ready."""
    path = session_dir / READY
    record = read_json(path)
    if record is None:
        return None
    return ProcessInfo(
        supervisor_pid=_field(record, "supervisor_pid", int, path),
        pid=_optional_int(record, "pid", path),
        pgid=_optional_int(record, "pgid", path),
    )


def write_exit(session_dir: Path, exited: Exited) -> None:
    """Record the end of the process durably (``exit.json``)."""
    write_json_atomic(
        session_dir / EXIT, {"code": exited.code, "signal": exited.signal}, fsync=True
    )


def read_exit(session_dir: Path) -> Exited | None:
    """The recorded exit, or None if none is recorded (yet)."""
    path = session_dir / EXIT
    record = read_json(path)
    if record is None:
        return None
    return Exited(
        code=_field(record, "code", int, path), signal=_optional_int(record, "signal", path)
    )


def supervisor_alive(session_dir: Path) -> bool:
    """Whether a supervisor holds the session's lock.

    A non-blocking shared-lock probe: immune to PID reuse and usable from any
    process. False for a directory that has no lock file.
    """
    try:
        fd = os.open(session_dir / LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def terminal_state(session_dir: Path) -> Exited | Lost | None:
    """The recorded exit, Lost if the supervisor died without one, None while running.

    The exit record is checked again after the lock is seen free, so a
    supervisor that recorded the exit and then quit is never reported Lost.
    """
    exited = read_exit(session_dir)
    if exited is not None:
        return exited
    if supervisor_alive(session_dir):
        return None
    exited = read_exit(session_dir)
    return exited if exited is not None else Lost()


def status(session_dir: Path) -> Status:
    """Running, Exited(code) or Lost; FileNotFoundError if not a session."""
    require_session(session_dir)
    state = terminal_state(session_dir)
    return Running() if state is None else state


def last_activity(session_dir: Path) -> datetime:
    """When the session last produced output or ended (UTC), from file mtimes."""
    require_session(session_dir)
    times = [(session_dir / JOURNAL).stat().st_mtime]
    with contextlib.suppress(FileNotFoundError):
        times.append((session_dir / EXIT).stat().st_mtime)
    return datetime.fromtimestamp(max(times), tz=timezone.utc)
