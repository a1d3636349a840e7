"""What the Sprites emulator remembers: sprites, their exec sessions and checkpoints.

On disk, under the emulator's workdir::

    sprites/<sprite id>/
      fs/                  the sprite's filesystem root: cwd and HOME of its commands
      sessions/<id>/       one exec session (a process-engine directory)
      checkpoints/<id>/    a snapshot of fs/

Sprites are keyed by name in memory and by their random id on disk, so a name
(any string the API accepts) never becomes a path. The sprite-side path ``/``
is ``fs/``; absolute paths given to the filesystem endpoints and to ``dir``
resolve inside it (:meth:`Sprite.resolve`).

Status (reference §2.5), deterministic: ``running`` while one of the sprite's
commands runs and the sprite is not frozen; otherwise the *resting* status,
``cold`` after creation and ``warm`` once a command has run, which
:meth:`State.set_status` overrides (``warm`` freezes live commands with
SIGSTOP until the next exec wakes them; ``cold`` kills them).
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import shutil
import signal
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from ... import _engine as engine

STATUSES = ("cold", "warm", "running")
ORGANIZATION = "emulator"
VERSION = "0.0.1-rc46"


def rfc3339(moment: datetime) -> str:
    """``2026-01-02T03:04:05.678Z``."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


def now() -> datetime:
    """The current UTC time."""
    return datetime.now(timezone.utc)


@attrs.define(eq=False)
class ExecSession:
    """One command started through ``/exec``; its process is an engine session.

    ``subscribers`` counts the open sockets following it; ``connections`` holds
    the callbacks that abort them (used when the sprite goes away).
    ``max_run_after_disconnect`` is in seconds, None meaning forever.
    """

    id: int
    directory: Path
    argv: tuple[str, ...]
    workdir: str
    tty: bool
    stdin: bool
    created: datetime
    max_run_after_disconnect: float | None
    subscribers: int = 0
    connections: set[Any] = attrs.field(factory=set)
    timer: asyncio.TimerHandle | None = None
    stdin_lock: asyncio.Lock = attrs.field(factory=asyncio.Lock)

    @property
    def command(self) -> str:
        """The argv joined by spaces, as the listing shows it."""
        return " ".join(self.argv)

    def ended(self) -> bool:
        """Whether the process has ended (or its supervisor is gone)."""
        try:
            return not isinstance(engine.status(self.directory), engine.Running)
        except (OSError, engine.EngineError):
            return True

    def pgid(self) -> int | None:
        """The process group the kill endpoint signals, if the process started."""
        try:
            info = engine.read_process(self.directory)
        except (OSError, engine.EngineError):
            return None
        return None if info is None else info.pgid

    def signal(self, signum: int) -> bool:
        """Signal the process group; False if nothing was signalled."""
        try:
            return engine.signal_group(self.directory, signum)
        except (OSError, engine.EngineError):
            return False

    def listing(self) -> dict[str, Any]:
        """The session as ``GET …/exec`` lists it (id stringified, errata 4)."""
        try:
            last = engine.last_activity(self.directory)
        except (OSError, engine.EngineError):
            last = self.created
        return {
            "id": str(self.id),
            "command": self.command,
            "workdir": self.workdir,
            "created": rfc3339(self.created),
            "bytes_per_second": 0.0,
            "is_active": self.subscribers > 0,
            "last_activity": rfc3339(last),
            "tty": self.tty,
        }


@attrs.define(eq=False)
class Checkpoint:
    """A saved copy of a sprite's files and network policy."""

    id: str
    comment: str
    create_time: datetime
    directory: Path
    policy: list[dict[str, Any]]

    def listing(self) -> dict[str, Any]:
        """The checkpoint as the API shows it."""
        return {"id": self.id, "create_time": rfc3339(self.create_time),
                "comment": self.comment}


@attrs.define(eq=False)
class Sprite:
    """One sprite and everything it owns."""

    id: str
    name: str
    directory: Path
    created_at: datetime
    updated_at: datetime
    url_auth: str = "sprite"
    private_access: str | None = None
    labels: list[str] = attrs.field(factory=list)
    has_url: bool = True
    resting: str = "cold"
    frozen: bool = False
    policy: list[dict[str, Any]] = attrs.field(factory=list)
    checkpoints: list[Checkpoint] = attrs.field(factory=list)
    sessions: dict[int, ExecSession] = attrs.field(factory=dict)
    boot_refusals: int = 0
    checkpoint_counter: int = 0

    @property
    def root(self) -> Path:
        """The sprite's filesystem root (sprite path ``/``)."""
        return self.directory / "fs"

    @property
    def url(self) -> str:
        """The sprite's public URL, in the platform's shape."""
        label = re.sub(r"[^a-z0-9-]+", "-", self.name.lower()).strip("-") or "sprite"
        return f"https://{label}-{ORGANIZATION}.sprites.app"

    def live_sessions(self) -> list[ExecSession]:
        """Sessions whose process has not ended."""
        return [session for session in list(self.sessions.values()) if not session.ended()]

    def status(self) -> str:
        """``running``, ``warm`` or ``cold`` (see the module docstring)."""
        if not self.frozen and self.live_sessions():
            return "running"
        return self.resting

    def resolve(self, path: str, working_dir: str = "/") -> Path:
        """The host path of sprite path ``path`` (relative to ``working_dir``).

        Like a chroot, ``..`` stops at the sprite's ``/``: nothing resolves outside it.
        """
        relative = posixpath.normpath(posixpath.join("/", working_dir, path)).lstrip("/")
        return self.root / relative if relative else self.root

    def to_json(self) -> dict[str, Any]:
        """The sprite object of create/get/update and of listings."""
        settings: dict[str, Any] = {"auth": self.url_auth}
        if self.private_access is not None:
            settings["private_access"] = self.private_access
        body: dict[str, Any] = {
            "id": self.id,
            "name": self.name,
            "organization": ORGANIZATION,
            "status": self.status(),
            "url_settings": settings,
            "labels": list(self.labels),
            "version": VERSION,
            "created_at": rfc3339(self.created_at),
            "updated_at": rfc3339(self.updated_at),
        }
        if self.has_url:
            body["url"] = self.url
        return body


class State:
    """All sprites of one emulator; safe to use from the server and the test thread."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.lock = threading.Lock()
        self.sprites: dict[str, Sprite] = {}
        self._next_session = 1000

    def get(self, name: str) -> Sprite | None:
        """The sprite called ``name``, if any."""
        with self.lock:
            return self.sprites.get(name)

    def create(self, name: str) -> Sprite | None:
        """A new sprite (its directories made); None if the name is taken."""
        sprite_id = str(uuid.uuid4())
        moment = now()
        sprite = Sprite(sprite_id, name, self.workdir / "sprites" / sprite_id, moment, moment)
        with self.lock:
            if name in self.sprites:
                return None
            self.sprites[name] = sprite
        sprite.root.mkdir(parents=True)
        return sprite

    def remove(self, name: str) -> Sprite | None:
        """Forget the sprite ``name``; the caller disposes of it."""
        with self.lock:
            return self.sprites.pop(name, None)

    def names(self) -> list[str]:
        """Every sprite name, sorted."""
        with self.lock:
            return sorted(self.sprites)

    def next_session_id(self) -> int:
        """A fresh session id (an integer, like the platform's PIDs)."""
        with self.lock:
            self._next_session += 1
            return self._next_session

    def set_status(self, name: str, status: str) -> None:
        """Force the sprite's resting status; see the module docstring."""
        if status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}")
        sprite = self.get(name)
        if sprite is None:
            raise KeyError(name)
        if status == "running":
            wake(sprite)
            return
        sprite.resting = status
        if status == "warm":
            sprite.frozen = True
            for session in sprite.live_sessions():
                session.signal(signal.SIGSTOP)
        else:
            sprite.frozen = False
            stop_sessions(sprite, signal.SIGKILL)


def wake(sprite: Sprite) -> None:
    """Resume a frozen sprite's commands (the implicit wake of an exec)."""
    if sprite.frozen:
        sprite.frozen = False
        for session in sprite.live_sessions():
            session.signal(signal.SIGCONT)
    sprite.resting = "warm"


def stop_sessions(sprite: Sprite, signum: int) -> None:
    """Abort every socket following the sprite's sessions, then signal their processes."""
    for session in list(sprite.sessions.values()):
        for abort in list(session.connections):
            with contextlib.suppress(Exception):
                abort()
        if session.signal(signum):
            session.signal(signal.SIGCONT)


def remove_tree(path: Path, sessions: list[ExecSession]) -> None:
    """Wait (bounded) for the sessions' supervisors to record their exits, then delete."""
    for session in sessions:
        with contextlib.suppress(OSError, engine.EngineError):
            engine.wait_exit(session.directory, timeout=5.0)
    shutil.rmtree(path, ignore_errors=True)
