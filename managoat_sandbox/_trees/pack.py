"""A local file or directory tree as a tar stream (``upload``'s side).

:func:`plan` walks the tree once, never following a symbolic link (a link is
archived as a link, whatever it points at), and lists what will be sent:
directories, regular files and symbolic links, sorted by name so that the
stream is the same every time. Anything else under the tree (a FIFO, a socket,
a device) is left out and logged. :func:`write_archive` then writes them as a
POSIX (pax) tar stream to a sink, one file at a time through a bounded buffer:
memory does not grow with the size of a file or of the tree.

Each entry keeps its permission bits (setuid, setgid and sticky included: the
sandbox is the caller's to give them to) and its modification time; owners are
not sent (the sandbox's ``tar`` makes everything its user's).
"""

from __future__ import annotations

import logging
import os
import posixpath
import stat
import tarfile
from collections.abc import Iterator
from typing import IO, Literal, Protocol, cast

import attrs

from ..errors import Invalid
from ..reasons import Reason
from .counter import Counter

__all__ = ["CHUNK", "Entry", "Sink", "plan", "totals", "write_archive"]

log = logging.getLogger("managoat_sandbox")

#: The block the stream is written in (and the most of a file held at once).
CHUNK = 256 * 1024

Kind = Literal["dir", "file", "symlink"]


@attrs.frozen
class Entry:
    """One thing to send: the local ``path``, its name in the archive, what it is, and
    (a file) its size when planned."""

    path: str
    arcname: str
    kind: Kind
    size: int = 0


def _kind(mode: int) -> Kind | None:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return None


def plan(local_path: str, arcroot: str) -> list[Entry]:
    """What :func:`write_archive` sends for ``local_path``, named ``arcroot`` (and
    ``arcroot/...`` below it) in the archive. ``Invalid(("local_path", ...))`` when
    ``local_path`` itself is not a directory, regular file or symbolic link; an
    ``OSError`` reading the tree propagates."""
    info = os.lstat(local_path)
    kind = _kind(info.st_mode)
    if kind is None:
        raise Invalid(
            Reason.LOCAL_PATH, problem=f"{local_path!r} is not a file, directory or symlink"
        )
    root = Entry(local_path, arcroot, kind, info.st_size if kind == "file" else 0)
    if kind != "dir":
        return [root]
    return [root, *_below(local_path, arcroot)]


def _below(directory: str, arcname: str) -> Iterator[Entry]:
    with os.scandir(directory) as found:
        entries = sorted(found, key=lambda entry: entry.name)
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        kind = _kind(info.st_mode)
        name = posixpath.join(arcname, entry.name)
        if kind is None:
            log.warning("upload leaves out %r: not a file, directory or symlink", entry.path)
            continue
        yield Entry(entry.path, name, kind, info.st_size if kind == "file" else 0)
        if kind == "dir":
            yield from _below(entry.path, name)


def totals(entries: list[Entry]) -> tuple[int, int]:
    """The files (regular files and symbolic links) and bytes ``entries`` send."""
    files = sum(1 for entry in entries if entry.kind != "dir")
    return files, sum(entry.size for entry in entries)


class _Counted:
    """A file read for the archive, each read counted."""

    def __init__(self, file: IO[bytes], counter: Counter) -> None:
        self.file = file
        self.counter = counter

    def read(self, size: int = -1) -> bytes:
        data = self.file.read(size)
        self.counter.add_bytes(len(data))
        return data


def _header(entry: Entry, info: os.stat_result) -> tarfile.TarInfo:
    header = tarfile.TarInfo(entry.arcname)
    header.mode = stat.S_IMODE(info.st_mode)
    header.mtime = int(info.st_mtime)
    header.uid = header.gid = 0
    header.uname = header.gname = ""
    return header


class Sink(Protocol):
    """Where the stream goes: anything taking ``write(bytes)``."""

    def write(self, data: bytes, /) -> int: ...


def write_archive(entries: list[Entry], sink: Sink, counter: Counter) -> None:
    """Write ``entries`` to ``sink`` as a pax tar stream (see the module docstring),
    counting files and bytes on ``counter``. A file that changed since it was planned
    is sent as it is now; one that shrank while being read, or that became something
    else, is an ``OSError`` (``ELOOP`` for a file turned into a link)."""
    stream = cast(IO[bytes], sink)  # tarfile's stream mode only calls write
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT, bufsize=CHUNK) as tar:
        for entry in entries:
            if entry.kind == "file":
                _add_file(tar, entry, counter)
                continue
            info = os.lstat(entry.path)
            header = _header(entry, info)
            if entry.kind == "dir":
                header.type = tarfile.DIRTYPE
            else:
                header.type = tarfile.SYMTYPE
                header.linkname = os.readlink(entry.path)
            tar.addfile(header)
            if entry.kind == "symlink":
                counter.add_file()


def _add_file(tar: tarfile.TarFile, entry: Entry, counter: Counter) -> None:
    fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb", buffering=0) as file:
        info = os.fstat(file.fileno())
        header = _header(entry, info)
        header.type = tarfile.REGTYPE
        header.size = info.st_size
        tar.addfile(header, _Counted(file, counter))
    counter.add_file()
