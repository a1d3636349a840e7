"""envd's directory watchers, by polling: ``WatchDir`` (a server stream) and the unary
``CreateWatcher`` / ``GetWatcherEvents`` / ``RemoveWatcher``.

What a watcher sees: every change to the watched directory's entries (its
children, or its whole tree with ``recursive``), whoever made it — envd's own
calls, ``/files`` uploads and the sandbox's commands alike. Each check reads a
fresh snapshot of the tree as the sandbox's user (through
:mod:`~managoat_sandbox._engine.safefs`, never leaving the sandbox) and
compares it with the previous one; nothing hooks the file operations.

Latency: a ``WatchDir`` stream checks every :data:`POLL` seconds (plus the
time a snapshot takes). A ``CreateWatcher`` watcher does no background work:
``GetWatcherEvents`` checks when it is called, so it reports every change made
before the call. Changes between two checks are merged, unlike inotify's
envd: an entry created and removed in between is never seen, several writes
are one ``WRITE``.

Events, as envd maps inotify's (through fsnotify), named by their path
relative to the watched directory (``sub/file`` in a recursive watch):

* a new entry: ``EVENT_TYPE_CREATE``, then ``EVENT_TYPE_WRITE`` when it is a
  regular file holding data;
* an entry moved within the watched tree (same inode; a file's size and
  modification time unchanged too):
  ``EVENT_TYPE_RENAME`` for its old name, then ``EVENT_TYPE_CREATE`` for its
  new one — a moved directory's own entries move silently with it;
* a regular file whose size, modification time or inode changed (an upload
  replaces the file): ``EVENT_TYPE_WRITE``; permission bits or owner changed:
  ``EVENT_TYPE_CHMOD`` (before the write); an entry replaced by one of another
  type, or a directory by another directory: ``REMOVE`` then ``CREATE``;
* a vanished entry: ``EVENT_TYPE_REMOVE``, deepest first.

With ``includeEntry`` the ``CREATE``, ``WRITE`` and ``CHMOD`` events carry the
entry's ``EntryInfo`` when it can still be read; ``REMOVE`` and ``RENAME`` never
do. Symlinked directories and directories the sandbox's user may not list are
not descended into. Once the watched directory itself is gone or replaced,
its entries are reported removed and the watcher sees nothing more, as an
inotify watch on a deleted directory.

A ``WatchDir`` stream sends ``{"start": {}}``, then ``{"filesystem":
FilesystemEvent}`` per event and ``{"keepalive": {}}`` after
``Keepalive-Ping-Interval`` seconds without one (``WatchDirResponse`` holds
its ``event`` oneof directly, unlike the process streams' ``{"event": ...}``).
It ends when the client leaves, with ``unavailable`` when the sandbox is
paused or killed, and with ``deadline_exceeded`` once its
``Connect-Timeout-Ms`` has passed (the SDK's watch ``timeout``, 60 s by
default). Errors before the start (a missing path is ``not_found``, one that
is not a directory ``invalid_argument``) end the stream alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import secrets
import stat
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..._engine import safefs
from .._blocking import run_blocking
from . import connect, filesystem
from .layout import SandboxBox
from .processes import RpcError
from .state import SandboxRecord
from .streams import DEADLINE_ERROR, Disconnected, EnvelopeWriter

__all__ = ["POLL", "Watcher", "Watchers", "changes", "stream"]

#: Seconds between two checks of a ``WatchDir`` stream's tree.
POLL = 0.05
CREATE = "EVENT_TYPE_CREATE"
WRITE = "EVENT_TYPE_WRITE"
REMOVE = "EVENT_TYPE_REMOVE"
RENAME = "EVENT_TYPE_RENAME"
CHMOD = "EVENT_TYPE_CHMOD"
_CARRY_ENTRY = (CREATE, WRITE, CHMOD)


class Node(NamedTuple):
    """What a snapshot keeps of one entry (its own status, links not followed)."""

    ino: int
    kind: int
    perm: int
    uid: int
    gid: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, info: Any) -> Node:
        """The node of an ``os.stat_result``."""
        mode = info.st_mode
        return cls(
            info.st_ino,
            stat.S_IFMT(mode),
            stat.S_IMODE(mode),
            info.st_uid,
            info.st_gid,
            info.st_size,
            info.st_mtime_ns,
        )

    @property
    def is_file(self) -> bool:
        return self.kind == stat.S_IFREG


class Snapshot(NamedTuple):
    """The watched directory's identity (device, inode) and its entries by relative name."""

    root: tuple[int, int]
    nodes: dict[str, Node]


def _depth(name: str) -> int:
    return name.count("/")


def _moved_source(
    name: str, node: Node, old: Mapping[str, Node], gone: Mapping[int, str], moved: dict[str, str]
) -> tuple[str, bool] | None:
    """Where the new entry ``name`` was before, and whether it moved with its parent
    directory (silently) rather than on its own; None if it is new."""
    source = gone.get(node.ino)
    if source is None:
        return None
    parent = posixpath.dirname(name)
    if parent in moved and source == posixpath.join(moved[parent], posixpath.basename(name)):
        return source, True
    return (source, False) if _same_entry(old[source], node) else None


def _same_entry(before: Node, after: Node) -> bool:
    """Whether ``after`` may be ``before`` moved: a rename keeps everything of an entry
    but a directory's size and time (its own entries change them), while a new file
    that reused a freed inode differs in its time."""
    if after.kind == stat.S_IFDIR:
        return before[:5] == after[:5]
    return before == after


def _altered(before: Node, after: Node) -> list[str]:
    """The events of an entry whose name stayed, from its old and new nodes."""
    if before.kind != after.kind or (before.ino != after.ino and not after.is_file):
        return [REMOVE, CREATE]
    kinds = []
    if (before.perm, before.uid, before.gid) != (after.perm, after.uid, after.gid):
        kinds.append(CHMOD)
    if after.is_file and (before.ino, before.size, before.mtime_ns) != (
        after.ino,
        after.size,
        after.mtime_ns,
    ):
        kinds.append(WRITE)
    return kinds


def changes(old: Mapping[str, Node], new: Mapping[str, Node]) -> list[tuple[str, str]]:
    """The (name, event type) pairs that turn snapshot ``old`` into ``new`` (module
    docstring): renames and creations by depth then name, then changes, then removals
    deepest first."""
    vanished = {name for name in old if name not in new}
    gone = {old[name].ino: name for name in sorted(vanished)}
    moved: dict[str, str] = {}
    events: list[tuple[str, str]] = []
    for name in sorted((n for n in new if n not in old), key=lambda n: (_depth(n), n)):
        node = new[name]
        found = _moved_source(name, node, old, gone, moved)
        if found is None:
            events.append((name, CREATE))
            if node.is_file and node.size:
                events.append((name, WRITE))
            continue
        source, silent = found
        vanished.discard(source)
        gone.pop(old[source].ino, None)
        moved[name] = source
        if not silent:
            events += [(source, RENAME), (name, CREATE)]
    for name in sorted(n for n in new if n in old):
        events += [(name, kind) for kind in _altered(old[name], new[name])]
    for name in sorted(vanished, key=lambda n: (-_depth(n), n)):
        events.append((name, REMOVE))
    return events


def _walk(root_fd: int, path: str, recursive: bool) -> Iterator[tuple[str, Node]]:
    """Every entry under the directory at ``path`` (its children, or with ``recursive``
    its whole tree), by relative name; what cannot be listed is left out, and so is a
    temporary file the emulator's own write is filling (envd writes in place, so its
    watchers never see one)."""
    pending = [""]
    while pending:
        relative = pending.pop()
        try:
            found = safefs.list_dir(root_fd, posixpath.join(path, relative))
        except (OSError, safefs.PathRefused):
            continue
        for name, info in found:
            if safefs.is_write_temporary(name):
                continue
            child = posixpath.join(relative, name)
            yield child, Node.of(info)
            if recursive and stat.S_ISDIR(info.st_mode):
                pending.append(child)


def snapshot(sandbox: SandboxBox, path: str, recursive: bool) -> Snapshot | None:
    """The tree under the directory at sandbox ``path`` (symlinks in ``path`` followed
    inside the sandbox), or None when no directory is there (blocking)."""
    with sandbox.root() as root_fd:
        try:
            top = safefs.stat_path(root_fd, path)
        except (OSError, safefs.PathRefused):
            return None
        if not stat.S_ISDIR(top.st_mode):
            return None
        return Snapshot((top.st_dev, top.st_ino), dict(_walk(root_fd, path, recursive)))


def _check_directory(sandbox: SandboxBox, path: str) -> None:
    """RpcError unless a directory is at ``path``, with envd's codes and messages."""
    with sandbox.root() as root_fd:
        try:
            info = safefs.stat_path(root_fd, path)
        except FileNotFoundError:
            raise RpcError(
                "not_found", f"path {path} not found: stat {path}: no such file or directory"
            ) from None
        except (OSError, safefs.PathRefused) as error:
            raise RpcError("internal", f"error statting path {path}: {error}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise RpcError("invalid_argument", f"path {path} not a directory")


@dataclass
class Watcher:
    """One watch of a directory: its options and the snapshot its next check compares
    with. It holds no reference to the sandbox (each check is given it)."""

    path: str
    recursive: bool
    include_entry: bool
    _last: Snapshot | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def open(cls, sandbox: SandboxBox, request: Mapping[str, Any], user: str) -> Watcher:
        """A watcher of the directory a ``WatchDir``/``CreateWatcher`` request names,
        its first snapshot taken (blocking); RpcError as the module docstring says."""
        given = request.get("path", "")
        if not isinstance(given, str):
            raise RpcError("invalid_argument", "path must be a string")
        path = sandbox.sandbox_path(given, user)
        _check_directory(sandbox, path)
        watcher = cls(path, bool(request.get("recursive")), bool(request.get("includeEntry")))
        watcher._last = snapshot(sandbox, path, watcher.recursive)
        return watcher

    def poll(self, sandbox: SandboxBox) -> list[dict[str, Any]]:
        """The ``FilesystemEvent`` messages of what changed since the last check
        (blocking; one check at a time)."""
        with self._lock:
            last = self._last
            if last is None:
                return []
            now = snapshot(sandbox, self.path, self.recursive)
            if now is not None and now.root != last.root:
                now = None
            self._last = now
            found = changes(last.nodes, {} if now is None else now.nodes)
        return [self._event(sandbox, name, kind) for name, kind in found]

    def _event(self, sandbox: SandboxBox, name: str, kind: str) -> dict[str, Any]:
        event: dict[str, Any] = {"name": name, "type": kind}
        if self.include_entry and kind in _CARRY_ENTRY:
            # Gone again meanwhile: envd sends the event without its entry.
            with contextlib.suppress(RpcError):
                event["entry"] = filesystem.stat_entry(sandbox, posixpath.join(self.path, name))
        return event


class Watchers:
    """The watchers ``CreateWatcher`` made, by id, per sandbox.

    A sandbox's watchers are kept only as long as its :class:`SandboxBox` is (a
    weak key): killing the sandbox forgets them, and no watcher does work
    between two ``GetWatcherEvents``.
    """

    def __init__(self) -> None:
        self._by_box: weakref.WeakKeyDictionary[SandboxBox, dict[str, Watcher]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()
        #: The unary methods served: (sandbox, request, user) -> answer.
        self.methods: Mapping[
            str, Callable[[SandboxBox, Mapping[str, Any], str], dict[str, Any]]
        ] = {
            "CreateWatcher": self._create,
            "GetWatcherEvents": self._events,
            "RemoveWatcher": self._remove,
        }

    def _create(self, sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
        watcher = Watcher.open(sandbox, body, user)
        watcher_id = "w" + secrets.token_hex(8)
        with self._lock:
            self._by_box.setdefault(sandbox, {})[watcher_id] = watcher
        return {"watcherId": watcher_id}

    def _find(self, sandbox: SandboxBox, body: Mapping[str, Any], *, drop: bool) -> Watcher:
        watcher_id = body.get("watcherId", "")
        with self._lock:
            found = self._by_box.get(sandbox, {})
            watcher = found.pop(watcher_id, None) if drop else found.get(watcher_id)
        if watcher is None:
            raise RpcError("not_found", f"watcher with id {watcher_id} not found")
        return watcher

    def _events(self, sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
        events = self._find(sandbox, body, drop=False).poll(sandbox)
        return {"events": events} if events else {}

    def _remove(self, sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
        self._find(sandbox, body, drop=True)
        return {}


def _message(kind: str, body: Any) -> bytes:
    """A ``WatchDirResponse``: its ``event`` oneof's member is a field of its own."""
    return connect.encode({kind: body})


def _unavailable(record: SandboxRecord) -> bytes:
    return connect.end_stream(
        connect.error_body(
            "unavailable",
            f"the connection to sandbox {record.sandbox_id} ended before the stream completed",
        )
    )


async def stream(
    writer: EnvelopeWriter,
    watcher: Watcher,
    sandbox: SandboxBox,
    record: SandboxRecord,
    *,
    keepalive: float | None,
    deadline: float | None,
) -> None:
    """Serve one ``WatchDir`` stream (module docstring) until it ends; Disconnected when
    the client has gone. Nothing outlives it: each check runs on a thread that ends
    with the check."""
    loop = asyncio.get_running_loop()
    generation = record.generation
    await writer.send(_message("start", {}))
    quiet_since = loop.time()
    while True:
        if record.gone or record.generation != generation:
            await writer.send(_unavailable(record))
            return
        if deadline is not None and loop.time() >= deadline:
            await writer.send(connect.end_stream(DEADLINE_ERROR))
            return
        for event in await run_blocking(lambda: watcher.poll(sandbox)):
            await writer.send(_message("filesystem", event))
            quiet_since = loop.time()
        now = loop.time()
        if keepalive is not None and now - quiet_since >= keepalive:
            await writer.send(_message("keepalive", {}))
            quiet_since = now
        if writer.closing:
            raise Disconnected
        wait = POLL if deadline is None else min(POLL, deadline - now)
        await asyncio.sleep(max(wait, 0.0))
