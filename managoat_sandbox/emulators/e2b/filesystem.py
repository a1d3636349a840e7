"""envd's unary ``filesystem.Filesystem`` calls and the reads of ``GET /files``.

Served: ``ListDir``, ``Stat``, ``MakeDir``, ``Move`` and ``Remove`` (the
watchers live in :mod:`.watch`).

Everything here runs on the sandbox's real files, reached only through
:mod:`~managoat_sandbox._engine.safefs` from a descriptor of the sandbox's
root: a symlink a command planted is resolved inside the sandbox (an absolute
target restarts at the sandbox's ``/``), never on the host, and a file is read
only when it is a regular file (a FIFO is never opened, so nothing blocks).
The functions block; the routes call them off the event loop.

``ListDir`` (``{"path", "depth"}``; depth 0 means 1) answers
``{"entries": [EntryInfo...]}``: directories (and links to them) first, then
by case-folded name;
the entries of subdirectories down to ``depth`` (symlinked directories are not
descended into). A missing path is ``not_found``, one that is not a directory
(after following symlinks) ``invalid_argument``, a symlink loop
``invalid_argument``, one the sandbox's user may not reach or read
``internal`` with the message envd's walk builds from Go's ``EACCES``
(``error resolving symlink: lstat <p>: permission denied``, ``error reading
directory <p>: open <p>: permission denied``; a subdirectory of a deeper
listing fails it too, as envd's walk does). ``Stat`` (``{"path"}``) answers ``{"entry": EntryInfo}``
for the path itself (a final symlink not followed), ``not_found`` if nothing
is there. A path that leads through a file is ``internal`` for both, with the
message envd's own code builds from Go's ``ENOTDIR`` (ListDir's symlink walk
returns it bare; Stat's ``lstat`` names the path).

An ``EntryInfo`` is protobuf JSON, zero values left out: ``name``, ``type``
(``FILE_TYPE_FILE``, ``FILE_TYPE_DIRECTORY``, else unspecified and absent),
``path`` (under the requested path, symlinks in it kept), ``size`` (int64, so
a string; a symlink's own size), ``mode`` (the permission bits),
``permissions`` (as Go's ``FileMode.String``, ``-rw-r--r--``),
``owner``/``group``, ``modifiedTime`` (RFC 3339, UTC) and, for a symlink,
``isSymlink: true`` with ``type`` and ``mode`` those of its target and
``symlinkTarget`` the target's resolved sandbox path (both absent when the
link dangles or loops), and ``metadata``: the entry's own ``user.e2b.<key>``
extended attributes as ``{key: value}`` (what an upload's ``X-Metadata-<key>``
headers set, or any other tool), absent when there are none or they cannot be
read (a symlink's own attributes are read, never its target's).

``MakeDir`` (``{"path"}``) creates the directory and its parents and answers
``{"entry": {"name", "type": FILE_TYPE_DIRECTORY, "path"}}``;
``already_exists`` if a directory is there, ``invalid_argument`` if something
else is. ``Move`` (``{"source", "destination"}``) creates the destination's
parents, renames (an entry at the destination is replaced, as ``rename(2)``
does) and answers ``{"entry": EntryInfo}`` of the destination; ``not_found``
when the source is missing. ``Remove`` (``{"path"}``) deletes a file, a
symlink itself or a whole tree and answers ``{}``, also when nothing was there
(envd's ``os.RemoveAll``). What the sandbox's user may not do is ``internal``
with envd's message (``error renaming: ...``, ``error removing file or
directory: ...``) ending in Go's text for the errno.

Owners: the box runs every command as one uid (:mod:`.layout`), and what the
emulator writes is the host's; so files of the emulator's host uid/gid are
reported as the box user's, anything else as the uid ``65534`` and group
``nogroup`` (how an unmapped id looks inside the sandbox).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from ..._engine import safefs
from .._fs import go_text
from .layout import SandboxBox, box_user
from .processes import RpcError

__all__ = [
    "METHODS",
    "READ_CHUNK",
    "XATTR_PREFIX",
    "entry_info",
    "list_dir",
    "make_dir",
    "move",
    "open_file",
    "remove",
    "stat_entry",
]

#: Bytes handed to the event loop per read of a ``GET /files`` body.
READ_CHUNK = 1024 * 1024
FILE = "FILE_TYPE_FILE"
DIRECTORY = "FILE_TYPE_DIRECTORY"
#: The extended-attribute namespace upload metadata is kept in (the key follows it).
XATTR_PREFIX = "user.e2b."
_NOBODY = "65534"
#: Go's text for the errno behind each way safefs refuses a path.
_REFUSAL_TEXT: Mapping[str, str] = {
    "not_a_directory": "not a directory",
    "is_directory": "is a directory",
    "is_root": "device or resource busy",
    "loop": "too many levels of symbolic links",
    "read_only": "read-only file system",
    "system_mount": "read-only file system",
}
_NOGROUP = "nogroup"


def _permissions(mode: int) -> str:
    """``mode`` as Go's ``FileMode.String`` writes it (``drwxr-xr-x``, ``Lrwxrwxrwx``): its
    type and special-bit letters in Go's order (``-`` if none), then the nine bits."""
    flags = (
        (stat.S_ISDIR(mode), "d"),
        (stat.S_ISLNK(mode), "L"),
        (stat.S_ISBLK(mode) or stat.S_ISCHR(mode), "D"),
        (stat.S_ISFIFO(mode), "p"),
        (stat.S_ISSOCK(mode), "S"),
        (bool(mode & stat.S_ISUID), "u"),
        (bool(mode & stat.S_ISGID), "g"),
        (stat.S_ISCHR(mode), "c"),
        (bool(mode & stat.S_ISVTX), "t"),
    )
    letters = "".join(letter for present, letter in flags if present)
    bits = "".join(char if mode & (1 << (8 - i)) else "-" for i, char in enumerate("rwxrwxrwx"))
    return (letters or "-") + bits


def _timestamp(ns: int) -> str:
    """A protobuf JSON ``Timestamp``: UTC, with 0, 3, 6 or 9 fractional digits."""
    seconds, nanos = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    if nanos:
        digits = f"{nanos:09d}"
        while digits.endswith("000"):
            digits = digits[:-3]
        text += "." + digits
    return text + "Z"


def _file_type(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return FILE
    if stat.S_ISDIR(mode):
        return DIRECTORY
    return None


class _Owners:
    """Names for the owner and group ids of the sandbox's files (see the module docstring)."""

    def __init__(self, sandbox: SandboxBox) -> None:
        self.user = box_user(sandbox.users)
        self.uid, self.gid = sandbox.box.owner

    def owner(self, uid: int) -> str:
        return self.user if uid == self.uid else _NOBODY

    def group(self, gid: int) -> str:
        return self.user if gid == self.gid else _NOGROUP


def _link_target(root_fd: int, path: str) -> tuple[str, os.stat_result] | None:
    """Where the symlink at ``path`` leads inside the sandbox and what is there, or None
    when it dangles, loops or passes through a non-directory."""
    try:
        where = safefs.resolve(root_fd, path)
    except (OSError, safefs.PathRefused):
        return None
    try:
        return where.path, os.stat(where.name, dir_fd=where.parent, follow_symlinks=False)
    except OSError:
        return None
    finally:
        where.close()


def _metadata(root_fd: int, path: str) -> dict[str, str]:
    """The ``user.e2b.*`` extended attributes of the entry at ``path`` itself, prefix
    stripped; empty when it has none or they cannot be read.

    The attributes are read by name under the descriptor of the entry's parent
    (``/proc/self/fd/<parent>/<name>``, the last component not followed), so the
    path is the one :func:`safefs.resolve` walked inside the sandbox.
    """
    try:
        where = safefs.resolve(root_fd, path, follow=False)
    except (OSError, safefs.PathRefused):
        return {}
    try:
        target = f"/proc/self/fd/{where.parent}/{where.name}"
        return {
            name[len(XATTR_PREFIX) :]: os.getxattr(target, name, follow_symlinks=False).decode(
                "utf-8", "replace"
            )
            for name in os.listxattr(target, follow_symlinks=False)
            if name.startswith(XATTR_PREFIX)
        }
    except OSError:
        return {}
    finally:
        where.close()


def entry_info(root_fd: int, path: str, info: os.stat_result, owners: _Owners) -> dict[str, Any]:
    """The ``EntryInfo`` of the entry at sandbox ``path`` whose own status is ``info``."""
    entry: dict[str, Any] = {"name": posixpath.basename(path) or "/", "path": path}
    kind, mode = _file_type(info.st_mode), stat.S_IMODE(info.st_mode) & 0o777
    if stat.S_ISLNK(info.st_mode):
        entry["isSymlink"] = True
        target = _link_target(root_fd, path)
        kind, mode = None, 0
        if target is not None:
            entry["symlinkTarget"] = target[0]
            kind, mode = _file_type(target[1].st_mode), stat.S_IMODE(target[1].st_mode) & 0o777
    if kind is not None:
        entry["type"] = kind
    if info.st_size:
        entry["size"] = str(info.st_size)
    if mode:
        entry["mode"] = mode
    entry["permissions"] = _permissions(info.st_mode)
    entry["owner"] = owners.owner(info.st_uid)
    entry["group"] = owners.group(info.st_gid)
    entry["modifiedTime"] = _timestamp(info.st_mtime_ns)
    metadata = _metadata(root_fd, path)
    if metadata:
        entry["metadata"] = metadata
    return entry


def _directory(root_fd: int, path: str) -> None:
    """``not_found`` unless something is at ``path``; ``invalid_argument`` unless it is a
    directory (symlinks followed inside the sandbox)."""
    try:
        info = safefs.stat_path(root_fd, path)
    except FileNotFoundError:
        raise RpcError("not_found", f"directory not found: {path}") from None
    except PermissionError as error:
        raise RpcError(
            "internal", f"error resolving symlink: lstat {path}: {go_text(error)}"
        ) from None
    except safefs.PathRefused as refusal:
        if refusal.reason == "not_a_directory":
            raise RpcError("internal", "error resolving symlink: not a directory") from None
        raise RpcError("invalid_argument", f"cannot list {path}: {refusal}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise RpcError("invalid_argument", f"path is not a directory: {path}")


def _sort_key(entry: Mapping[str, Any]) -> tuple[int, str]:
    return (0 if entry.get("type") == DIRECTORY else 1, str(entry["name"]).lower())


def list_dir(sandbox: SandboxBox, path: str, depth: int) -> list[dict[str, Any]]:
    """The entries under the directory at sandbox ``path`` (absolute, normalised), down to
    ``depth`` levels (at least 1); RpcError as the module docstring says."""
    owners = _Owners(sandbox)
    entries: list[dict[str, Any]] = []
    with sandbox.root() as root_fd:
        _directory(root_fd, path)
        pending = [(path, 1)]
        while pending:
            directory, level = pending.pop()
            try:
                found = safefs.list_dir(root_fd, directory)
            except PermissionError as error:
                raise RpcError(
                    "internal",
                    f"error reading directory {directory}: open {directory}: {go_text(error)}",
                ) from None
            except (FileNotFoundError, safefs.PathRefused):
                if directory == path:
                    raise RpcError("not_found", f"directory not found: {path}") from None
                continue  # a subdirectory replaced meanwhile
            for name, info in found:
                full = posixpath.join(directory, name)
                entries.append(entry_info(root_fd, full, info, owners))
                if level < depth and stat.S_ISDIR(info.st_mode):
                    pending.append((full, level + 1))
    entries.sort(key=_sort_key)
    return entries


def stat_entry(sandbox: SandboxBox, path: str) -> dict[str, Any]:
    """The ``EntryInfo`` of sandbox ``path`` itself (a final symlink not followed)."""
    with sandbox.root() as root_fd:
        try:
            info = safefs.stat_path(root_fd, path, follow=False)
        except FileNotFoundError:
            raise RpcError("not_found", f"file not found: {path}") from None
        except safefs.PathRefused as refusal:
            if refusal.reason == "not_a_directory":
                raise RpcError(
                    "internal", f"error getting file info: lstat {path}: not a directory"
                ) from None
            raise RpcError("invalid_argument", f"cannot stat {path}: {refusal}") from None
        return entry_info(root_fd, path, info, _Owners(sandbox))


def open_file(sandbox: SandboxBox, path: str) -> int:
    """A read descriptor of the regular file at sandbox ``path`` (the caller closes it):
    FileNotFoundError, or PathRefused ``is_directory``/``not_a_file``/... as safefs says."""
    with sandbox.root() as root_fd:
        return safefs.open_file(root_fd, path)


def _path(body: Mapping[str, Any], sandbox: SandboxBox, user: str, key: str = "path") -> str:
    """The sandbox path the request's field ``key`` names, as ``user`` means it."""
    given = body.get(key, "")
    if not isinstance(given, str):
        raise RpcError("invalid_argument", f"{key} must be a string")
    return sandbox.sandbox_path(given, user)


def _depth(body: Mapping[str, Any]) -> int:
    given = body.get("depth", 0)
    try:
        depth = int(given) if isinstance(given, (int, str)) and not isinstance(given, bool) else -1
    except ValueError:
        depth = -1
    if depth < 0 or depth > 0xFFFFFFFF:
        raise RpcError("invalid_argument", "depth must be a uint32")
    return depth or 1


def _list_dir(sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
    entries = list_dir(sandbox, _path(body, sandbox, user), _depth(body))
    return {"entries": entries} if entries else {}


def _stat(sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
    return {"entry": stat_entry(sandbox, _path(body, sandbox, user))}


def _refusal_text(refusal: safefs.PathRefused) -> str:
    """Go's text for the errno the kernel gives where safefs refused a path."""
    return _REFUSAL_TEXT.get(refusal.reason, str(refusal))


def _existing(sandbox: SandboxBox, path: str) -> os.stat_result | None:
    """The status of what is at ``path`` (symlinks followed), None if nothing is; RpcError
    ``internal`` as envd's ``stat`` failing for another reason."""
    with sandbox.root() as root_fd:
        try:
            return safefs.stat_path(root_fd, path)
        except FileNotFoundError:
            return None
        except PermissionError as error:
            text = go_text(error)
        except safefs.PathRefused as refusal:
            text = _refusal_text(refusal)
    raise RpcError("internal", f"error getting file info: stat {path}: {text}")


def make_dir(sandbox: SandboxBox, path: str) -> dict[str, Any]:
    """``MakeDir``: the directory at ``path`` and its parents made (module docstring)."""
    existing = _existing(sandbox, path)
    if existing is not None:
        if stat.S_ISDIR(existing.st_mode):
            raise RpcError("already_exists", f"directory already exists: {path}")
        raise RpcError("invalid_argument", f"path already exists but it is not a directory: {path}")
    try:
        sandbox.make_dirs(path)
    except safefs.PathRefused as refusal:
        text = _refusal_text(refusal)
    except OSError as error:
        text = go_text(error)
    else:
        return {"entry": {"name": posixpath.basename(path) or "/", "type": DIRECTORY, "path": path}}
    raise RpcError("internal", f"error creating directory {path}: mkdir {path}: {text}")


def move(sandbox: SandboxBox, source: str, destination: str) -> dict[str, Any]:
    """``Move``: ``source`` renamed to ``destination`` (module docstring)."""
    where = f"rename {source} {destination}"
    try:
        sandbox.rename(source, destination)
    except FileNotFoundError:
        raise RpcError(
            "not_found", f"source file not found: {where}: no such file or directory"
        ) from None
    except safefs.PathRefused as refusal:
        raise RpcError("internal", f"error renaming: {where}: {_refusal_text(refusal)}") from None
    except OSError as error:
        raise RpcError("internal", f"error renaming: {where}: {go_text(error)}") from None
    return {"entry": stat_entry(sandbox, destination)}


def remove(sandbox: SandboxBox, path: str) -> dict[str, Any]:
    """``Remove``: whatever is at ``path`` deleted, nothing there being no error."""
    try:
        sandbox.remove(path)
    except FileNotFoundError:
        return {}
    except safefs.PathRefused as refusal:
        text = _refusal_text(refusal)
    except OSError as error:
        text = go_text(error)
    else:
        return {}
    raise RpcError("internal", f"error removing file or directory: unlinkat {path}: {text}")


def _make_dir(sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
    return make_dir(sandbox, _path(body, sandbox, user))


def _move(sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
    source = _path(body, sandbox, user, "source")
    return move(sandbox, source, _path(body, sandbox, user, "destination"))


def _remove(sandbox: SandboxBox, body: Mapping[str, Any], user: str) -> dict[str, Any]:
    return remove(sandbox, _path(body, sandbox, user))


#: The unary ``filesystem.Filesystem`` methods served: (sandbox, request, user) -> answer.
METHODS: Mapping[str, Callable[[SandboxBox, Mapping[str, Any], str], dict[str, Any]]] = {
    "ListDir": _list_dir,
    "Stat": _stat,
    "MakeDir": _make_dir,
    "Move": _move,
    "Remove": _remove,
}
