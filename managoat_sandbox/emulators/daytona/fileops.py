"""The toolbox's file operations besides reading and uploading: ``/files/*`` routes.

As the daemon answers them (its public source, ``apps/daemon/pkg/toolbox/fs``;
the SDK's generated toolbox client for the shapes):

* ``POST /files/folder?path=&mode=`` → 201, empty: the directory and its
  missing parents, each with ``mode`` (octal, default ``755``, less the
  umask); an existing directory is success; a bad mode is 400 ``invalid mode
  format``, any failure 400.
* ``DELETE /files?path=&recursive=`` → 204: what ``path`` names is stat'ed
  through links (404 ``FILE_NOT_FOUND``, 403 ``FILE_ACCESS_DENIED``); a
  directory without ``recursive=true`` is 400 ``cannot delete directory
  without recursive flag``; the entry itself is removed (a link, never what it
  names), a failure is 400.
* ``POST /files/move?source=&destination=`` → 200, empty: 404/403 typed for
  the source or the destination's directory, 409 ``destination already
  exists``, 400 for a failed rename.
* ``GET /files/find?path=&pattern=`` → ``[{file, line, content}]``: every
  line holding ``pattern`` (literally) of each regular file under ``path``,
  walked by name without following links; a file whose first 512 bytes hold a
  NUL (binary), or that is empty or unreadable, is passed over, and a line
  longer than 64 KiB ends its file's scan (Go's line scanner). A missing path
  is ``[]``.
* ``GET /files/search?path=&pattern=`` → ``{"files": [...]}``: every entry
  that is not a directory (links included, unfollowed) whose path relative to
  ``path`` matches the glob (:mod:`.globs`); a glob outside the language is
  400 ``invalid glob pattern: <pattern>`` once a file is met.
* ``POST /files/replace {files, pattern, newValue}`` → 200
  ``[{file, success, error?}]``: each file read and written back in place
  with every occurrence replaced; a failure is that file's ``error`` (Go's
  words: ``open <path>: no such file or directory``…). An empty ``pattern``
  is 400 (the daemon would insert ``newValue`` between every character).
* ``POST /files/permissions?path=&mode=&owner=&group=`` → 200, empty: mode
  (octal), owner and group (a number, or a name in the sandbox's
  ``/etc/passwd`` / ``/etc/group``; 400 ``user not found`` / ``group not
  found``); 404/403 typed, a refused change 403 ``FILE_ACCESS_DENIED``.
* ``GET /files/info?path=`` → a ``FileInfo`` (as in the listing) of what
  ``path`` names, through links: 404, 403 or 400 otherwise.

Every path is a sandbox path (relative ones under the home) reached through
:class:`~.files.SandboxFiles` with the sandbox user's rights, off the event
loop. Messages name the path as the daemon does: as given, or absolute where
the daemon makes it absolute first (move, permissions).
"""

from __future__ import annotations

import os
import posixpath
import stat
from collections.abc import Awaitable, Callable
from typing import IO, Any

from aiohttp import web

from managoat_sandbox._engine import safefs

from .._blocking import run_blocking
from .._fs import go_text
from .._input import BadInput, load_json, parse_int
from .daemon import Daemon
from .downloads import file_info
from .files import SandboxFiles, Walked
from .globs import compile_glob
from .shapes import DaemonError

__all__ = ["ROUTES"]

#: Go's ``bufio.Scanner`` gives up on a line longer than this.
_MAX_LINE = 64 * 1024
#: How much of a file decides whether it is binary (a NUL in it).
_HEAD = 512
_LARGEST_ID = 2**32 - 2
#: What the daemon's Go says for a path the emulator's file layer refuses.
_REFUSALS = {
    "not_a_directory": "not a directory",
    "is_directory": "is a directory",
    "loop": "too many levels of symbolic links",
    "read_only": "read-only file system",
    "system_mount": "read-only file system",
}

Failure = OSError | safefs.PathRefused | BadInput


def _reason(error: Failure) -> str:
    """The end of the daemon's message for ``error``, in Go's words."""
    if isinstance(error, OSError):
        return go_text(error)
    if isinstance(error, safefs.PathRefused):
        return _REFUSALS.get(error.reason, str(error))
    return str(error)


def _typed(operation: str, shown: str, error: Failure) -> DaemonError:
    """The daemon's error for a failed ``operation`` (``stat``…) on ``shown``: 404
    ``FILE_NOT_FOUND``, 403 ``FILE_ACCESS_DENIED`` or a 400."""
    message = f"{operation} {shown}: {_reason(error)}"
    if isinstance(error, FileNotFoundError):
        return DaemonError(404, message, code="FILE_NOT_FOUND")
    if isinstance(error, PermissionError):
        return DaemonError(403, message, code="FILE_ACCESS_DENIED")
    return DaemonError(400, message)


def _absolute(daemon: Daemon, path: str) -> str:
    """``path`` as the sandbox's absolute, normalised path; a path the daemon cannot
    take is a 400 naming why."""
    try:
        return posixpath.normpath(daemon.files.absolute(path))
    except BadInput as error:
        raise DaemonError(400, str(error)) from None


def _required(request: web.Request, *names: str, noun: str = "") -> list[str]:
    """The query parameters ``names``, each non-empty, else the daemon's 400
    (``path is required``, ``source and destination paths are required``)."""
    values = [request.query.get(name, "") for name in names]
    if not all(values):
        subject = " and ".join(names) + (f" {noun}" if noun else "")
        raise DaemonError(400, f"{subject} {'is' if len(names) == 1 else 'are'} required")
    return values


def _mode(text: str) -> int:
    """A mode written in octal, as Go's ``os.FileMode`` keeps it for a system call:
    the permission bits only."""
    try:
        return parse_int(text, "mode", low=0, high=0o7777, base=8) & 0o777
    except BadInput:
        raise DaemonError(400, "invalid mode format") from None


# -- create, delete, move -----------------------------------------------------------------


async def create_folder(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``POST /files/folder?path=&mode=`` → 201."""
    (path,) = _required(request, "path")
    mode = _mode(request.query.get("mode") or "755")
    try:
        await run_blocking(lambda: daemon.files.make_folder(path, mode))
    except (OSError, safefs.PathRefused, BadInput) as error:
        raise DaemonError(400, f"mkdir {path}: {_reason(error)}") from None
    return web.Response(status=201)


def _delete(files: SandboxFiles, path: str, *, recursive: bool) -> None:
    try:
        info = files.status(path)
    except (OSError, safefs.PathRefused, BadInput) as error:
        raise _typed("stat", path, error) from None
    if stat.S_ISDIR(info.st_mode) and not recursive:
        raise DaemonError(400, "cannot delete directory without recursive flag")
    try:
        files.delete(path, recursive=recursive)
    except (OSError, safefs.PathRefused) as error:
        raise DaemonError(400, f"remove {path}: {_reason(error)}") from None


async def delete_file(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``DELETE /files?path=&recursive=`` → 204."""
    (path,) = _required(request, "path")
    recursive = request.query.get("recursive") == "true"
    await run_blocking(lambda: _delete(daemon.files, path, recursive=recursive))
    return web.Response(status=204)


def _stat_or_raise(files: SandboxFiles, absolute: str) -> None:
    try:
        files.status(absolute)
    except (OSError, safefs.PathRefused, BadInput) as error:
        raise _typed("stat", absolute, error) from None


def _move(files: SandboxFiles, source: str, target: str) -> None:
    _stat_or_raise(files, source)
    _stat_or_raise(files, posixpath.dirname(target) or "/")
    try:
        files.status(target)
    except (OSError, safefs.PathRefused):
        pass
    else:
        raise DaemonError(409, "destination already exists")
    try:
        files.move(source, target)
    except (OSError, safefs.PathRefused) as error:
        message = f"failed to move file: rename {source} {target}: {_reason(error)}"
        raise DaemonError(400, message) from None


async def move_file(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``POST /files/move?source=&destination=`` → 200."""
    source, target = _required(request, "source", "destination", noun="paths")
    absolute = [_absolute(daemon, p) for p in (source, target)]
    await run_blocking(lambda: _move(daemon.files, *absolute))
    return web.Response(status=200)


# -- find and search -----------------------------------------------------------------------


def _scan(handle: IO[bytes], needle: bytes, shown: str) -> list[dict[str, Any]]:
    """The lines of an open text file holding ``needle``, as the daemon's matches."""
    head = handle.read(_HEAD)
    if not head or b"\0" in head:
        return []
    handle.seek(0)
    found: list[dict[str, Any]] = []
    number = 0
    while line := handle.readline(_MAX_LINE + 1):
        if not line.endswith(b"\n") and len(line) > _MAX_LINE:
            break
        number += 1
        text = line.removesuffix(b"\n").removesuffix(b"\r")
        if needle in text:
            content = text.decode("utf-8", "replace")
            found.append({"file": shown, "line": number, "content": content})
    return found


def _find(files: SandboxFiles, path: str, pattern: str) -> list[dict[str, Any]]:
    needle = pattern.encode("utf-8", "surrogateescape")
    matches: list[dict[str, Any]] = []

    def visit(entry: Walked) -> None:
        if not stat.S_ISREG(entry.info.st_mode):
            return
        try:
            fd = entry.open()
        except (OSError, safefs.PathRefused):
            return
        with os.fdopen(fd, "rb") as handle:
            try:
                matches.extend(_scan(handle, needle, entry.path))
            except OSError:
                return

    files.walk(path, visit)
    return matches


async def find_in_files(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``GET /files/find?path=&pattern=`` → the matching lines."""
    path, pattern = _required(request, "path", "pattern")
    _absolute(daemon, path)
    return web.json_response(await run_blocking(lambda: _find(daemon.files, path, pattern)))


def _search(files: SandboxFiles, path: str, pattern: str) -> list[str]:
    matches = compile_glob(pattern)
    found: list[str] = []

    def visit(entry: Walked) -> None:
        if stat.S_ISDIR(entry.info.st_mode):
            return
        if matches is None:
            raise DaemonError(400, f"invalid glob pattern: {pattern}")
        if matches(entry.relative):
            found.append(entry.path)

    files.walk(path, visit)
    return found


async def search_files(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``GET /files/search?path=&pattern=`` → ``{"files": [...]}``."""
    path, pattern = _required(request, "path", "pattern")
    _absolute(daemon, path)
    found = await run_blocking(lambda: _search(daemon.files, path, pattern))
    return web.json_response({"files": found})


# -- replace -------------------------------------------------------------------------------


def _read_failure(path: str, error: Failure) -> str:
    if isinstance(error, safefs.PathRefused) and error.reason == "is_directory":
        return f"read {path}: is a directory"
    return f"open {path}: {_reason(error)}"


def _replace_one(files: SandboxFiles, path: str, old: bytes, new: bytes) -> dict[str, Any]:
    """Replace ``old`` by ``new`` in the file ``path``: its ``ReplaceResult``."""
    try:
        content = files.read(path)
    except (OSError, safefs.PathRefused, BadInput) as error:
        return {"file": path, "success": False, "error": _read_failure(path, error)}
    try:
        files.overwrite(path, content.replace(old, new))
    except (OSError, safefs.PathRefused) as error:
        return {"file": path, "success": False, "error": f"open {path}: {_reason(error)}"}
    return {"file": path, "success": True}


def _replace_request(raw: bytes) -> tuple[list[str], str, str]:
    """``files``, ``pattern`` and ``newValue`` of a replace body, else 400."""
    try:
        body = load_json(raw or b"null")
    except BadInput as error:
        raise DaemonError(400, f"invalid request body: {error}") from None
    if not isinstance(body, dict):
        raise DaemonError(400, "invalid request body: not an object")
    files, pattern, new = body.get("files"), body.get("pattern"), body.get("newValue")
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise DaemonError(400, "invalid request body: files must be a list of paths")
    if not isinstance(pattern, str) or not pattern:
        raise DaemonError(400, "invalid request body: pattern is required")
    if not isinstance(new, str):
        raise DaemonError(400, "invalid request body: newValue is required")
    return files, pattern, new


async def replace_in_files(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``POST /files/replace`` → one ``ReplaceResult`` per file, in order."""
    paths, pattern, new = _replace_request(await request.read())
    old_bytes, new_bytes = (t.encode("utf-8", "surrogateescape") for t in (pattern, new))
    results = await run_blocking(
        lambda: [_replace_one(daemon.files, p, old_bytes, new_bytes) for p in paths]
    )
    return web.json_response(results)


# -- permissions and info ------------------------------------------------------------------


def _lookup(files: SandboxFiles, database: str, name: str) -> int | None:
    """The id of ``name`` in the sandbox's ``/etc/passwd`` or ``/etc/group``, if any."""
    try:
        text = files.read(database, limit=16 * 1024 * 1024).decode("utf-8", "replace")
    except (OSError, safefs.PathRefused):
        return None
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) > 2 and fields[0] == name and fields[2].isascii() and fields[2].isdigit():
            return int(fields[2])
    return None


def _identity(files: SandboxFiles, text: str, database: str, missing: str) -> int:
    """An owner or group: -1 (unchanged) when empty, a number, or a name looked up."""
    if not text:
        return -1
    try:
        return parse_int(text, missing, low=-1, high=_LARGEST_ID)
    except BadInput:
        found = _lookup(files, database, text)
    if found is None:
        raise DaemonError(400, missing)
    return found


def _change(absolute: str, action: str, call: str, change: Callable[[], None]) -> None:
    try:
        change()
    except (OSError, safefs.PathRefused) as error:
        raise _typed(f"failed to {action} for {absolute}: {call}", absolute, error) from None


def _set_permissions(files: SandboxFiles, absolute: str, query: dict[str, str]) -> None:
    _stat_or_raise(files, absolute)
    if query.get("mode"):
        mode = _mode(query["mode"])
        _change(absolute, "change mode", "chmod", lambda: files.change_mode(absolute, mode))
    owner, group = query.get("owner", ""), query.get("group", "")
    if owner or group:
        uid = _identity(files, owner, "/etc/passwd", "user not found")
        gid = _identity(files, group, "/etc/group", "group not found")
        _change(
            absolute, "change ownership", "chown", lambda: files.change_owner(absolute, uid, gid)
        )


async def set_file_permissions(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``POST /files/permissions?path=&mode=&owner=&group=`` → 200."""
    (path,) = _required(request, "path")
    absolute = _absolute(daemon, path)
    query = dict(request.query)
    await run_blocking(lambda: _set_permissions(daemon.files, absolute, query))
    return web.Response(status=200)


def _info(files: SandboxFiles, path: str) -> dict[str, Any]:
    try:
        info = files.status(path)
    except (OSError, safefs.PathRefused, BadInput) as error:
        message = f"stat {path}: {_reason(error)}"
        if isinstance(error, FileNotFoundError):
            raise DaemonError(404, message) from None
        if isinstance(error, PermissionError):
            raise DaemonError(403, message) from None
        raise DaemonError(400, message) from None
    absolute = posixpath.normpath(files.absolute(path))
    name = posixpath.basename(absolute) or "/"
    return file_info(absolute, name, info)


async def get_file_info(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``GET /files/info?path=`` → a ``FileInfo``."""
    (path,) = _required(request, "path")
    return web.json_response(await run_blocking(lambda: _info(daemon.files, path)))


Handler = Callable[[web.Request, Daemon], Awaitable[web.StreamResponse]]

#: ``(method, path under /toolbox/{sandboxId}, handler)`` for each route here.
ROUTES: list[tuple[str, str, Handler]] = [
    ("POST", "/files/folder", create_folder),
    ("DELETE", "/files", delete_file),
    ("POST", "/files/move", move_file),
    ("GET", "/files/find", find_in_files),
    ("GET", "/files/search", search_files),
    ("POST", "/files/replace", replace_in_files),
    ("POST", "/files/permissions", set_file_permissions),
    ("GET", "/files/info", get_file_info),
]
