"""What the Sprites emulator remembers: sprites, their exec sessions and checkpoints.

Each sprite is one process-engine box (:class:`~managoat_sandbox._engine.box.Box`).
Its commands run inside it — in their own user, mount, PID, network, IPC and
UTS namespaces when the host allows (:func:`~managoat_sandbox._engine.isolation.support`)
— as user ``sprite`` (uid 1000, home ``/home/sprite``), the sprite's name as
host name when it is a valid one. On disk, under the emulator's workdir::

    sprites/<sprite id>/
      box/fs/              the sprite's ``/``: what its commands see at ``/``
      box/state/           the box's agent socket, session journals, exit records
      checkpoints/<id>/    a copy of box/fs/

Every directory the emulator makes there (and the workdir, when it makes it)
is its user's alone (``0700``, :func:`~managoat_sandbox.emulators._fs.private_dirs`).

Sprites are keyed by name in memory and by their random id on disk, so a name
(any string the API accepts) never becomes a path. Sprite paths — of the
filesystem endpoints and of ``dir`` — are resolved by
:mod:`~managoat_sandbox._engine.safefs` inside ``box/fs`` the way a process in
the sprite resolves them (symlinks stay inside, ``..`` stops at ``/``); the
emulator never opens a sprite's file through a plain host path. Exec sessions
are journaled sessions of the box, their ids the emulator's integer ids as
strings; the pids reported are the ones inside the sprite.

The box is laid out at creation without its agent (a ``cold`` sprite has no
running machine); the agent starts with the first command, and again after a
restore stopped it.

Status (docs/protocols/sprites.md#status-mapping), deterministic: ``running``
while one of the sprite's
commands runs and the sprite is not frozen; otherwise the *resting* status,
``cold`` after creation and ``warm`` once a command has run, which
:meth:`State.set_status` overrides (``warm`` freezes every process of the
sprite with SIGSTOP until the next exec or attach wakes them; ``cold`` kills
them, files kept).
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import re
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from ..._engine import isolation, trees
from ..._engine.box import Box
from ..._engine.errors import EngineError
from ..._engine.settings import BoxSettings, hostname_for
from .._fs import private_dirs

STATUSES = ("cold", "warm", "running")
ORGANIZATION = "emulator"
VERSION = "0.0.1-rc46"
USER = "sprite"
UID = 1000
HOME = "/home/sprite"


def rfc3339(moment: datetime) -> str:
    """``2026-01-02T03:04:05.678Z``."""
    return moment.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def now() -> datetime:
    """The current UTC time."""
    return datetime.now(timezone.utc)


@attrs.define(eq=False)
class ExecSession:
    """One command started through ``/exec``: the journaled box session ``str(id)``.

    ``pid`` is its pid inside the sprite (its process group's id). ``subscribers``
    counts the open sockets following it; ``connections`` holds the callbacks
    that abort them (used when the sprite goes away or goes cold).
    ``max_run_after_disconnect`` is in seconds, None meaning forever. ``lost`` is
    set once the box's agent was stopped under it (a restore): a later agent
    does not know it, so it has ended.
    """

    id: int
    box: Box
    pid: int | None
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
    lost: bool = False

    @property
    def sid(self) -> str:
        """The box's id of the session."""
        return str(self.id)

    @property
    def command(self) -> str:
        """The argv joined by spaces, as the listing shows it."""
        return " ".join(self.argv)

    def ended(self) -> bool:
        """Whether the process has ended (or its agent is gone); reads the box's records."""
        if self.lost:
            return True
        try:
            return not self.box.running(self.sid)
        except (OSError, EngineError):
            return True

    def signal(self, signum: int) -> bool:
        """Signal the process group; False if nothing was signalled (blocking)."""
        try:
            return self.box.signal(self.sid, signum)
        except (OSError, EngineError):
            return False

    def listing(self) -> dict[str, Any]:
        """The session as ``GET …/exec`` lists it (id stringified:
        docs/protocols/sprites.md#session-listing); reads the
        box's records."""
        record = self.box.session(self.sid)
        last = record.last_activity() if record is not None else self.created
        return {
            "id": self.sid,
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
    """A saved copy of a sprite's files (in ``directory``) and network policy."""

    id: str
    comment: str
    create_time: datetime
    directory: Path
    policy: list[dict[str, Any]]

    def listing(self) -> dict[str, Any]:
        """The checkpoint as the API shows it."""
        return {"id": self.id, "create_time": rfc3339(self.create_time), "comment": self.comment}


@attrs.define(eq=False)
class Sprite:
    """One sprite and everything it owns.

    ``machine`` serialises what starts or stops the box's agent against what
    swaps its files (new commands, checkpoints, restores).
    """

    id: str
    name: str
    directory: Path
    box: Box
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
    machine: asyncio.Lock = attrs.field(factory=asyncio.Lock)
    _masked: tuple[str, ...] | None = None

    @property
    def root(self) -> Path:
        """The host directory that is the sprite's ``/`` (reach it through :meth:`files`)."""
        return self.box.fs

    @property
    def checkpoint_root(self) -> Path:
        """Where the sprite's checkpoints are kept (outside the box)."""
        return self.directory / "checkpoints"

    @property
    def url(self) -> str:
        """The sprite's public URL, in the platform's shape."""
        label = re.sub(r"[^a-z0-9-]+", "-", self.name.lower()).strip("-") or "sprite"
        return f"https://{label}-{ORGANIZATION}.sprites.app"

    def files(self) -> contextlib.AbstractContextManager[int]:
        """A descriptor of the sprite's ``/`` for :mod:`safefs` calls (closed after)."""
        return self.box.root()

    def masked(self) -> tuple[str, ...]:
        """Sprite paths its commands see as read-only system mounts (writes refused)."""
        if self._masked is None:
            self._masked = self.box.masked()
        return self._masked

    def live_sessions(self) -> list[ExecSession]:
        """Sessions whose process has not ended (reads the box's records)."""
        return [session for session in list(self.sessions.values()) if not session.ended()]

    def status(self) -> str:
        """``running``, ``warm`` or ``cold`` (see the module docstring)."""
        if not self.frozen and self.live_sessions():
            return "running"
        return self.resting

    @staticmethod
    def resolve(path: str, working_dir: str = "/") -> str:
        """The sprite path of ``path``, relative ones taken from ``working_dir`` (itself
        taken from ``/``). Symlinks and ``..`` are left to :mod:`safefs`."""
        return posixpath.join("/", working_dir, path)

    def to_json(self) -> dict[str, Any]:
        """The sprite object of create/get/update and of listings (reads the box's records)."""
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
        """A new sprite, its box laid out (blocking); None if the name is taken."""
        sprite_id = str(uuid.uuid4())
        directory = self.workdir / "sprites" / sprite_id
        settings = BoxSettings(
            isolated=isolation.support().available,
            hostname=hostname_for(name),
            user=USER,
            uid=UID,
            home=HOME,
        )
        with self.lock:
            if name in self.sprites:
                return None
            private_dirs(directory / "box")
            box = Box.layout(directory / "box", settings)
            moment = now()
            sprite = Sprite(sprite_id, name, directory, box, moment, moment)
            self.sprites[name] = sprite
        return sprite

    def remove(self, name: str) -> Sprite | None:
        """Forget the sprite ``name``; the caller disposes of it."""
        with self.lock:
            return self.sprites.pop(name, None)

    def remove_all(self) -> list[Sprite]:
        """Forget every sprite; the caller disposes of them."""
        with self.lock:
            sprites = list(self.sprites.values())
            self.sprites.clear()
        return sprites

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
        """Force the sprite's resting status; see the module docstring (blocking)."""
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
            sprite.box.suspend()
        else:
            sprite.frozen = False
            abort_connections(sprite)
            sprite.box.kill_all()


def wake(sprite: Sprite) -> None:
    """Resume a frozen sprite's processes (the implicit wake of an exec; blocking)."""
    if sprite.frozen:
        sprite.frozen = False
        sprite.box.resume()
    sprite.resting = "warm"


def abort_connections(sprite: Sprite) -> None:
    """Abort every socket following the sprite's sessions (their processes are untouched)."""
    for session in list(sprite.sessions.values()):
        for abort in list(session.connections):
            with contextlib.suppress(Exception):
                abort()


def stop_machine(sprite: Sprite) -> bool:
    """Stop the box's agent and with it every process of the sprite (blocking); its
    sessions end and are marked lost. The agent restarts with the next command.
    True once the agent is confirmed gone."""
    sprite.frozen = False
    try:
        stopped = sprite.box.stop()
    except (OSError, EngineError):
        stopped = False
    for session in list(sprite.sessions.values()):
        session.lost = True
    return stopped


def dispose(sprite: Sprite) -> None:
    """Stop the sprite's box and delete its directory (blocking); sockets following its
    sessions should be aborted first (:func:`abort_connections`)."""
    stop_machine(sprite)
    sprite.box.close()
    trees.remove_tree(sprite.directory)
