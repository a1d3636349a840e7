"""Reading what the agent records in a sandbox's state directory, safely.

Layout of ``<state>/`` (never mounted inside an isolated sandbox)::

    box.json                 the box's settings (written by the library)
    agent.sock               the agent's control socket
    agent.lock               flock-ed by the agent for its whole life
    agent.json               {"pid", "start"}: the agent's host pid and start time
    agent.log                the agent's (and bubblewrap's) stderr
    launch.lock              serialises agent starts across processes
    policy.json              the egress policy the proxy enforces
    etc/                     generated passwd, group, hosts, hostname
    sessions/<id>/spec.json  what a journaled session runs
    sessions/<id>/journal    its output frames (:mod:`.wire`)
    sessions/<id>/exit.json  its end, once decided

Without isolation a command can reach these files, so every read here opens
with ``O_NOFOLLOW | O_NONBLOCK`` (a planted symlink or FIFO is refused, never
followed or waited on), accepts regular files only, and reads records up to a
bound.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from .errors import EngineError

SESSIONS = "sessions"
LOCK = "agent.lock"
RECORD_LIMIT = 1024 * 1024
_CHUNK = 256 * 1024
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def open_regular(path: Path) -> int:
    """A read descriptor for the regular file ``path``; symlinks, FIFOs and devices refused.

    FileNotFoundError if it does not exist; EngineError for anything but a
    regular file.
    """
    try:
        fd = os.open(path, _FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise EngineError(f"{path} is a symbolic link") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise EngineError(f"{path} is not a regular file")
    return fd


def read_record(path: Path, *, limit: int = RECORD_LIMIT) -> dict[str, Any] | None:
    """The JSON object in ``path``, or None if there is none; EngineError if malformed."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    try:
        data = os.read(fd, limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise EngineError(f"{path} is larger than {limit} bytes")
    try:
        record = json.loads(data)
    except ValueError as exc:
        raise EngineError(f"malformed record {path}: {exc}") from None
    if not isinstance(record, dict):
        raise EngineError(f"malformed record {path}: not an object")
    return record


def read_chunks(path: Path, offset: int = 0) -> Iterator[bytes]:
    """The bytes of regular file ``path`` from ``offset`` to its current end, in chunks."""
    fd = open_regular(path)
    try:
        while chunk := os.pread(fd, _CHUNK, offset):
            offset += len(chunk)
            yield chunk
    finally:
        os.close(fd)


def agent_alive(state: Path) -> bool:
    """Whether an agent holds the state directory's lock (a shared-lock probe)."""
    try:
        fd = os.open(state / LOCK, _FLAGS)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


@dataclass(frozen=True)
class SessionRecord:
    """A journaled session as recorded on disk."""

    id: str
    argv: tuple[str, ...]
    cwd: str
    tty: bool
    stdin: bool
    created_at: datetime
    directory: Path

    @property
    def journal(self) -> Path:
        return self.directory / "journal"

    def end(self) -> dict[str, Any] | None:
        """The recorded end (``{"code", "signal"}`` or ``{"lost"}``), or None."""
        return read_record(self.directory / "exit.json")

    def last_activity(self) -> datetime:
        """When the session last produced output or ended (from file times, UTC)."""
        times = []
        for name in ("journal", "exit.json"):
            try:
                times.append(os.lstat(self.directory / name).st_mtime)
            except OSError:
                continue
        moment = max(times, default=self.created_at.timestamp())
        return datetime.fromtimestamp(moment, tz=self.created_at.tzinfo)


def read_session(directory: Path) -> SessionRecord | None:
    """The session recorded in ``directory``, or None if it is not one (or is malformed)."""
    try:
        spec = read_record(directory / "spec.json")
    except (OSError, EngineError):
        return None
    if spec is None:
        return None
    try:
        argv = spec["argv"]
        return SessionRecord(
            id=directory.name,
            argv=tuple(str(a) for a in argv),
            cwd=str(spec["cwd"]),
            tty=bool(spec["tty"]),
            stdin=bool(spec["stdin"]),
            created_at=datetime.fromisoformat(str(spec["created_at"])),
            directory=directory,
        )
    except (KeyError, TypeError, ValueError):
        return None


def list_sessions(state: Path) -> list[SessionRecord]:
    """Every journaled session recorded under ``state``, by id."""
    base = state / SESSIONS
    try:
        entries = [entry for entry in os.scandir(base) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    found = [read_session(Path(entry.path)) for entry in entries]
    return sorted((s for s in found if s is not None), key=lambda s: s.id)
