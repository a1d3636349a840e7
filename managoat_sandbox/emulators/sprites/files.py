"""The Sprites filesystem routes: ``fs/write``, ``fs/read`` and ``fs/list``.

Every path is resolved as a process inside the sprite would resolve it,
through :mod:`~managoat_sandbox._engine.safefs` from a descriptor of the
sprite's ``/`` (symlinks stay inside the sprite, ``..`` stops at ``/``);
writes under the read-only system mounts its commands see (``/usr``,
``/proc``…) are refused with ``EROFS``. Relative paths are taken from
``workingDir``.

* ``PUT fs/write?path=&workingDir=&mode=&mkdirParents=`` stores the raw body
  → 200 ``{}``.
* ``GET fs/read?path=&workingDir=`` → 200 ``application/octet-stream`` with
  the file's bytes and its ``Content-Length``, streamed from the file as it
  is read (a large file is never held whole). Only regular files are opened
  (a FIFO never is, so a read cannot block on one). The length is the file's
  size when it is opened; a file that shrinks meanwhile ends the connection
  before the announced length, so the client sees an incomplete body, never
  a short file.
* ``GET fs/list?path=&workingDir=`` → 200 ``{"path", "entries", "count"}``,
  each entry ``{"name", "path", "type", "size", "mode", "modTime", "isDir"}``
  — the fields the vendor's SDKs parse: ``type`` is ``file``, ``directory``,
  ``symlink`` or (for a FIFO, socket or device, where the vendor says nothing)
  ``other``; ``mode`` the permission bits as 4-digit octal text; ``modTime``
  RFC 3339. A directory lists its entries (links not followed, ``.`` and
  ``..`` left out); any other path lists one entry describing the path
  itself, which is how the SDKs' ``stat`` reads a file.

Every operation acts as the sprite's user (:meth:`Sprite.files` reaches the
files through :meth:`Box.root`): what its commands may not read, list or
write, the API may not either.

Failures are the filesystem API's JSON errors, ``{"error", "message",
"code", "path"}`` with an errno name as ``code`` (what the SDKs match) and
the sprite path the call named as ``path``: 404 ``ENOENT`` for a missing
path, 400 ``EISDIR`` for a directory read as a file, 400 ``ENOTDIR`` for a
path through a file, 400 ``EINVAL`` for a read of something that is not a
regular file, 403 ``EACCES`` (or ``EPERM``) with Go's text (``open <path>:
permission denied``) for what the sprite's user may not do — the status is
not documented by the vendor, so the emulator answers its documented
permission status (docs/emulators.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import posixpath
import stat
import threading
from collections.abc import AsyncGenerator
from datetime import datetime, timezone
from typing import Any

from aiohttp import web

from ..._engine import safefs
from .. import _cut
from .._blocking import run_blocking
from .._fs import go_text
from .._input import BadInput, parse_int
from . import wire
from .state import Sprite, State, rfc3339

__all__ = ["Files"]

#: Bytes read from a file per piece of a streamed ``fs/read`` answer.
CHUNK = 256 * 1024
#: Pieces read ahead of the client before the reading thread waits for it.
_AHEAD = 4


class Files:
    """Handlers of the filesystem routes over one emulator's state."""

    def __init__(self, state: State) -> None:
        self.state = state

    def add_routes(self, app: web.Application) -> None:
        """Register the routes."""
        router = app.router
        router.add_put("/v1/sprites/{name}/fs/write", self.write)
        router.add_get("/v1/sprites/{name}/fs/read", self.read)
        router.add_get("/v1/sprites/{name}/fs/list", self.list)

    async def write(self, request: web.Request) -> web.StreamResponse:
        """``PUT …/fs/write?path=&workingDir=&mode=&mkdirParents=`` with the raw body."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        query = request.query
        if not query.get("path") or not query.get("workingDir"):
            return wire.invalid("path and workingDir are required")
        target = sprite.resolve(query["path"], query["workingDir"])
        try:
            mode = parse_int(query.get("mode") or "0644", "mode", low=0, high=0o7777, base=8)
        except BadInput as error:
            return wire.invalid(str(error))
        data = await request.read()
        parents = wire.flag(query.get("mkdirParents"), False)
        try:
            await run_blocking(lambda: _write(sprite, target, data, mode, parents))
        except (OSError, safefs.PathRefused) as failure:
            return _fs_error(failure, target)
        return web.json_response({})

    async def read(self, request: web.Request) -> web.StreamResponse:
        """``GET …/fs/read?path=&workingDir=`` → the file's bytes, streamed."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        target = _target(sprite, request)
        try:
            fd, size = await run_blocking(
                lambda: _open(sprite, target), discard=lambda opened: os.close(opened[0])
            )
        except (OSError, safefs.PathRefused) as failure:
            return _fs_error(failure, target)
        pieces = _pieces(fd, size)
        async with contextlib.aclosing(pieces):
            response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
            response.content_length = size
            await response.prepare(request)
            sent = 0
            async for piece in pieces:
                await response.write(piece)
                sent += len(piece)
            if sent < size:
                _cut.close(request.transport)
                return response
            await response.write_eof()
            return response

    async def list(self, request: web.Request) -> web.StreamResponse:
        """``GET …/fs/list?path=&workingDir=`` → ``{"path", "entries", "count"}``."""
        sprite = self.state.get(request.match_info["name"])
        if sprite is None:
            return wire.not_found("sprite")
        target = _target(sprite, request)
        try:
            entries = await run_blocking(lambda: _listing(sprite, target))
        except (OSError, safefs.PathRefused) as failure:
            return _fs_error(failure, target)
        return web.json_response({"path": target, "entries": entries, "count": len(entries)})


def _target(sprite: Sprite, request: web.Request) -> str:
    """The absolute sprite path a read or list names, ``..`` taken lexically (stopping
    at ``/``), as the answer's ``path`` fields show it."""
    joined = sprite.resolve(request.query.get("path", ""), request.query.get("workingDir") or "/")
    return "/" + posixpath.normpath(joined).lstrip("/")


def _write(sprite: Sprite, target: str, data: bytes, mode: int, parents: bool) -> None:
    """Write a sprite file (blocking); FileNotFoundError for a missing parent without
    ``parents``, PathRefused as :func:`safefs.write_file`."""
    with sprite.files() as root_fd:
        if not parents and not safefs.is_directory(root_fd, posixpath.dirname(target)):
            raise FileNotFoundError(errno.ENOENT, "no such file or directory", target)
        safefs.write_file(root_fd, target, data, mode=mode, masked=sprite.masked())


def _open(sprite: Sprite, target: str) -> tuple[int, int]:
    """A read descriptor of the regular file at ``target`` and its size (blocking)."""
    with sprite.files() as root_fd:
        fd = safefs.open_file(root_fd, target)
    try:
        return fd, os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise


async def _pieces(fd: int, size: int) -> AsyncGenerator[bytes, None]:
    """The first ``size`` bytes of ``fd``, piece by piece; fewer if the file ends first.

    A thread of its own reads the descriptor (blocking) at most a few pieces
    ahead of the consumer, and closes it when it is done — also when the
    generator is closed early (use :func:`contextlib.aclosing`), which also
    ends the thread.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue()
    credits = threading.Semaphore(_AHEAD)
    stopped = threading.Event()

    def pump() -> None:
        left = size
        try:
            while left > 0:
                credits.acquire()
                if stopped.is_set():
                    return
                try:
                    piece = os.read(fd, min(CHUNK, left))
                except OSError:
                    piece = b""
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(queue.put_nowait, piece)
                if not piece:
                    return
                left -= len(piece)
        finally:
            os.close(fd)

    threading.Thread(target=pump, name="sprites-emulator-read", daemon=True).start()
    try:
        left = size
        while left > 0:
            piece = await queue.get()
            credits.release()
            if not piece:
                return
            left -= len(piece)
            yield piece
    finally:
        stopped.set()
        credits.release()


def _listing(sprite: Sprite, target: str) -> list[dict[str, Any]]:
    """The entries of the directory at ``target``, or one entry for ``target`` itself
    when it is anything else (blocking)."""
    with sprite.files() as root_fd:
        info = safefs.stat_path(root_fd, target)
        if not stat.S_ISDIR(info.st_mode):
            return [_entry(posixpath.basename(target), target, info)]
        return [
            _entry(name, posixpath.join(target, name), status)
            for name, status in safefs.list_dir(root_fd, target)
        ]


def _entry(name: str, path: str, info: os.stat_result) -> dict[str, Any]:
    """One listing entry (the fields the vendor's SDKs parse)."""
    is_dir = stat.S_ISDIR(info.st_mode)
    return {
        "name": name,
        "path": path,
        "type": _kind(info.st_mode),
        "size": info.st_size,
        "mode": f"{stat.S_IMODE(info.st_mode):04o}",
        "modTime": rfc3339(datetime.fromtimestamp(info.st_mtime, tz=timezone.utc)),
        "isDir": is_dir,
    }


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISREG(mode):
        return "file"
    return "other"


_REFUSALS = {
    "is_directory": (400, "is a directory", "EISDIR"),
    "is_root": (400, "is a directory", "EISDIR"),
    "not_a_directory": (400, "not a directory", "ENOTDIR"),
    "not_a_file": (400, "not a regular file", "EINVAL"),
    "loop": (400, "too many levels of symbolic links", "ELOOP"),
    "read_only": (400, "read-only file system", "EROFS"),
}


def _fs_error(failure: OSError | safefs.PathRefused, target: str) -> web.Response:
    """The filesystem API's JSON error for a failed file operation on sprite path
    ``target`` (see the module docstring)."""
    if isinstance(failure, safefs.PathRefused):
        status, text, code = _REFUSALS.get(failure.reason, (400, str(failure), "EINVAL"))
    elif isinstance(failure, FileNotFoundError):
        status, text, code = 404, "no such file or directory", "ENOENT"
    elif isinstance(failure, PermissionError):
        status, text = 403, f"open {target}: {go_text(failure)}"
        code = errno.errorcode.get(failure.errno or errno.EACCES, "EACCES")
    else:
        status, text = 500, failure.strerror or "input/output error"
        code = errno.errorcode.get(failure.errno or errno.EIO, "EIO")
    return wire.error(status, text, text, code=code, path=target)
