"""The toolbox's file reads: ``POST /files/bulk-download`` and ``GET /files`` (the listing).

Built from the official SDK's observed use (daytona 0.226.1) and the daemon's
published behaviour:

* **bulk download**: ``{"paths": [...]}`` (a missing or empty list is 400) is
  answered 200 ``multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY`` with one
  part per path, in order, each ``Content-Disposition: form-data;
  name="file"|"error"; filename="<the path as requested>"`` and its
  ``Content-Length`` (the SDK reports download progress against it). A ``file``
  part streams the file (``Content-Type`` by extension, else
  ``application/octet-stream``), exactly the length it had when opened; an
  ``error`` part is the daemon's JSON error
  (``application/json``: ``statusCode``, ``message``, ``code``, ``source``
  ``DAYTONA_DAEMON``, ``timestamp``, ``path``, ``method``): 404
  ``FILE_NOT_FOUND`` for nothing there, 400 ``INVALID_FILE_PATH`` for a
  directory or anything else that is not a regular file, 403
  ``FILE_ACCESS_DENIED``, 500 ``FILE_READ_FAILED`` (also after a file part, if
  reading fails midway or the file was truncated meanwhile). A path that cannot
  go in a quoted header value (non-ASCII, control characters) is sent as
  ``filename*=utf-8''…``, which the SDK decodes.
* **listing**: ``GET /files?path=`` (default: the home; ``depth`` >= 1 lists
  that many levels) answers a JSON list of ``{name, size, mode, permissions,
  modTime, modifiedAt, isDir, owner, group, path}``: each entry stat'ed through
  symlinks, a dangling one left out (deeper levels descend into real
  directories only, never through a link); 404 for a missing path, 400 for one
  that is not a directory, 403 (``open <path>: permission denied``) for one the
  sandbox's user may not read.

Files are reached only through :class:`~.files.SandboxFiles` (resolved inside
the sandbox, a FIFO never opened) and read a piece at a time off the event
loop, so a large file is never held whole.
"""

from __future__ import annotations

import json
import mimetypes
import os
import stat
import threading
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from aiohttp import web

from managoat_sandbox._engine import safefs

from .._blocking import run_blocking
from .._input import BadInput, load_json, parse_int
from .daemon import Daemon
from .shapes import DaemonError, iso

__all__ = ["BOUNDARY", "bulk_download", "file_info", "go_mode", "list_files"]

#: The daemon's fixed multipart boundary.
BOUNDARY = "DAYTONA-FILE-BOUNDARY"
_PIECE = 1024 * 1024
#: Go ``FileMode.String()`` type letters, in its order, with the ``stat`` test for each.
_TYPE_LETTERS = (
    ("d", stat.S_ISDIR),
    ("L", stat.S_ISLNK),
    ("D", lambda mode: stat.S_ISBLK(mode) or stat.S_ISCHR(mode)),
    ("p", stat.S_ISFIFO),
    ("S", stat.S_ISSOCK),
)
_MAX_DEPTH = 32


# -- bulk download ------------------------------------------------------------------------


def _disposition(field: str, path: str) -> str:
    if path.isascii() and path.isprintable():
        quoted = path.replace("\\", "\\\\").replace('"', '\\"')
        return f'form-data; name="{field}"; filename="{quoted}"'
    return f"form-data; name=\"{field}\"; filename*=utf-8''{quote(path, safe='')}"


class _Parts:
    """The multipart body being written: one part after another, then the close."""

    def __init__(self, response: web.StreamResponse) -> None:
        self.response = response
        self.started = False

    async def open(self, field: str, path: str, content_type: str, length: int) -> None:
        """Start a part whose body is ``length`` bytes (its ``Content-Length``)."""
        head = "" if not self.started else "\r\n"
        self.started = True
        await self.response.write(
            f"{head}--{BOUNDARY}\r\nContent-Disposition: {_disposition(field, path)}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {length}\r\n\r\n".encode()
        )

    async def error(
        self, request: web.Request, path: str, status: int, code: str, message: str
    ) -> None:
        body = json.dumps(
            {
                "statusCode": status,
                "message": message,
                "code": code,
                "source": "DAYTONA_DAEMON",
                "timestamp": iso(datetime.now(timezone.utc)),
                "path": path,
                "method": request.method,
            }
        ).encode()
        await self.open("error", path, "application/json", len(body))
        await self.response.write(body)

    async def close(self) -> None:
        head = "" if not self.started else "\r\n"
        await self.response.write(f"{head}--{BOUNDARY}--\r\n".encode())


def _refusal(path: str, error: BaseException) -> tuple[int, str, str]:
    """The error part (status, code, message) for a path that cannot be opened."""
    if isinstance(error, FileNotFoundError):
        return 404, "FILE_NOT_FOUND", f"file not found: {path}"
    if isinstance(error, PermissionError):
        return 403, "FILE_ACCESS_DENIED", f"permission denied: {path}"
    if isinstance(error, safefs.PathRefused):
        if error.reason == "is_directory":
            return 400, "INVALID_FILE_PATH", f"path is a directory: {path}"
        return 400, "INVALID_FILE_PATH", f"invalid file path: {error}"
    if isinstance(error, BadInput):
        return 400, "INVALID_FILE_PATH", f"invalid file path: {error}"
    return 500, "FILE_READ_FAILED", f"error opening file: {error}"


class _Reader:
    """A regular file's descriptor read off the event loop, closed safely: a close waits
    for a read in progress, so the descriptor (and its number) is never pulled from
    under a reading thread — also when the request is cancelled mid-read.

    It reads at most ``size`` bytes (the file's length when opened, the part's
    ``Content-Length``), so a file a command keeps growing is not read past it.
    """

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd
        self._lock = threading.Lock()
        self.size = os.fstat(fd).st_size
        self._left = self.size

    def read(self) -> bytes:
        """The next piece; ``b""`` once ``size`` bytes have been read. OSError, or
        EOFError when the file ends short of ``size`` (it was truncated meanwhile)."""
        with self._lock:
            if self._fd is None or self._left <= 0:
                return b""
            piece = os.read(self._fd, min(_PIECE, self._left))
            if not piece:
                raise EOFError("unexpected EOF")
            self._left -= len(piece)
            return piece

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


async def _send_file(parts: _Parts, request: web.Request, daemon: Daemon, path: str) -> None:
    if not path:
        await parts.error(request, path, 400, "INVALID_FILE_PATH", "path is required")
        return
    try:
        fd = await run_blocking(lambda: daemon.files.open(path), discard=os.close)
    except (OSError, safefs.PathRefused, BadInput) as error:
        await parts.error(request, path, *_refusal(path, error))
        return
    reader = _Reader(fd)
    try:
        kind = mimetypes.guess_type(path)[0] or "application/octet-stream"
        await parts.open("file", path, kind, reader.size)
        while True:
            try:
                piece = await run_blocking(reader.read)
            except (OSError, EOFError) as error:
                await parts.error(
                    request, path, 500, "FILE_READ_FAILED", f"error streaming file: {error}"
                )
                return
            if not piece:
                return
            await parts.response.write(piece)
    finally:
        reader.close()


async def bulk_download(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``POST /files/bulk-download {"paths": [...]}`` → one multipart part per path."""
    try:
        body = load_json(await request.read() or b"null")
    except BadInput:
        body = None
    paths = body.get("paths") if isinstance(body, dict) else None
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) for p in paths):
        raise DaemonError(400, 'request body must be {"paths": [ ... ]} and non-empty')
    response = web.StreamResponse(
        status=200, headers={"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    )
    await response.prepare(request)
    parts = _Parts(response)
    for path in paths:
        await _send_file(parts, request, daemon, path)
    await parts.close()
    await response.write_eof()
    return response


# -- listing ------------------------------------------------------------------------------


def go_mode(mode: int) -> str:
    """``mode`` (an ``st_mode``) as Go's ``FileMode.String()``: type letters, the special
    bits as ``u``/``g``/``c``/``t``, then ``rwxrwxrwx`` (``-`` when there are no letters)."""
    letters = [letter for letter, test in _TYPE_LETTERS if test(mode)]
    letters += ["u"] if mode & stat.S_ISUID else []
    letters += ["g"] if mode & stat.S_ISGID else []
    letters += ["c"] if stat.S_ISCHR(mode) else []
    letters += ["t"] if mode & stat.S_ISVTX else []
    rwx = "".join(
        char if mode & (1 << (8 - index)) else "-" for index, char in enumerate("rwxrwxrwx")
    )
    return ("".join(letters) or "-") + rwx


def _go_time(seconds: int, nanos: int) -> str:
    """A UTC time as Go's ``time.String()`` (fraction without trailing zeros)."""
    moment = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{moment}{'.' + fraction if fraction else ''} +0000 UTC"


def _rfc3339(seconds: int, nanos: int) -> str:
    """A UTC time as Go's RFC 3339 with nanoseconds (trailing zeros dropped)."""
    moment = datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{nanos:09d}".rstrip("0")
    return f"{moment}{'.' + fraction if fraction else ''}Z"


def file_info(path: str, name: str, info: os.stat_result) -> dict[str, Any]:
    """The daemon's ``FileInfo`` of the entry ``name`` at sandbox path ``path``."""
    seconds, nanos = divmod(info.st_mtime_ns, 1_000_000_000)
    return {
        "name": name,
        "size": info.st_size,
        "mode": go_mode(info.st_mode),
        "permissions": f"{stat.S_IMODE(info.st_mode) & 0o777:04o}",
        "modTime": _go_time(seconds, nanos),
        "modifiedAt": _rfc3339(seconds, nanos),
        "isDir": stat.S_ISDIR(info.st_mode),
        "owner": str(info.st_uid),
        "group": str(info.st_gid),
        "path": path,
    }


def _entry(directory: str, name: str, info: os.stat_result) -> dict[str, Any]:
    return file_info(f"{directory.rstrip('/')}/{name}", name, info)


def _walk(daemon: Daemon, directory: str, depth: int) -> list[dict[str, Any]]:
    found = []
    for name, info, linked in daemon.files.listing(directory):
        found.append(_entry(directory, name, info))
        if depth > 1 and stat.S_ISDIR(info.st_mode) and not linked:
            try:
                found += _walk(daemon, f"{directory.rstrip('/')}/{name}", depth - 1)
            except (OSError, safefs.PathRefused):
                continue
    return found


async def list_files(request: web.Request, daemon: Daemon) -> web.StreamResponse:
    """``GET /files?path=&depth=`` → the entries' FileInfo list."""
    path = request.query.get("path") or "."
    try:
        depth = parse_int(request.query.get("depth", "1"), "depth", low=1, high=_MAX_DEPTH)
    except BadInput as error:
        raise DaemonError(400, str(error)) from None
    directory = daemon.files.absolute(path) if path != "." else daemon.home
    try:
        entries = await run_blocking(lambda: _walk(daemon, directory, depth))
    except FileNotFoundError:
        raise DaemonError(404, f"open {path}: no such file or directory") from None
    except PermissionError:
        raise DaemonError(403, f"open {path}: permission denied") from None
    except (OSError, safefs.PathRefused) as error:
        raise DaemonError(400, f"open {path}: {error}") from None
    return web.json_response(entries)
