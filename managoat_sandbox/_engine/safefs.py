"""Reaching a sandbox's files from the host without letting the sandbox redirect us.

A command can plant symlinks anywhere in its filesystem. Every path here is
resolved one component at a time from a descriptor of the sandbox's root,
each component opened with ``O_NOFOLLOW``: a symlink is read and resolved
*inside* the root (an absolute target restarts at the root, ``..`` stops at
it), as the kernel's ``RESOLVE_IN_ROOT`` would, so a path means what it means
to a process inside the sandbox and can never leave it — also when a command
swaps components meanwhile (each step is one ``openat`` on a descriptor).

``masked`` paths are those an isolated sandbox sees from the host instead
(its read-only system mounts): writes resolving under them are refused, as
they would fail inside, and so are reads and listings — what lies under them
in the sandbox's root is a mount point, not what a command sees there, and
what a command sees there is the host's, not the sandbox's own.

Reading never blocks: a FIFO or device is never opened for reading (the type
is checked before the open, and the opened descriptor again after it), and a
file is read up to the length it had when opened, so a command that keeps
growing it cannot keep the reader reading.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from .trees import remove_entry

_MAX_HOPS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
#: The most :func:`pieces` reads at once.
PIECE = 1024 * 1024


class PathRefused(Exception):
    """A path that cannot be used: ``reason`` is a short code, ``str()`` says why."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass
class Resolved:
    """A resolved path: a descriptor of its parent directory and its last name."""

    parent: int
    name: str
    path: str

    def close(self) -> None:
        os.close(self.parent)


#: The end of the name of the temporary file :func:`write_file` writes before putting
#: it in place (``.<name>.<8 hex digits>.tmp``, beside the file).
_TEMPORARY_SUFFIX = ".tmp"
_TEMPORARY = re.compile(r"\..+\.[0-9a-f]{8}\.tmp")


def is_write_temporary(name: str) -> bool:
    """Whether ``name`` is that of a temporary file :func:`write_file` is filling (a
    watcher of the tree leaves it out: the write shows as the file's own)."""
    return _TEMPORARY.fullmatch(name) is not None


def _components(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def resolve(
    root_fd: int,
    path: str,
    *,
    create_parents: bool = False,
    follow: bool = True,
    masked: tuple[str, ...] = (),
    masked_as: str = "read_only",
) -> Resolved:
    """Resolve sandbox path ``path`` (absolute, or relative to the root) under ``root_fd``.

    Symlinks are followed inside the root — the last component's too, unless
    ``follow`` is false. The root itself resolves to the name ``"."``. Missing
    parents are created with ``create_parents``, else FileNotFoundError.
    PathRefused for a loop, a non-directory parent, or — as soon as the walk
    enters one, before anything under it is looked at — a path under
    ``masked`` (reason ``masked_as``: ``read_only`` or ``system_mount``).
    """
    pending = deque(_components(path))
    stack = [os.dup(root_fd)]
    names: list[str] = []
    hops = 0
    try:
        while pending:
            part = pending.popleft()
            if part == "..":
                if len(stack) > 1:
                    os.close(stack.pop())
                    names.pop()
                continue
            here = stack[-1]
            full = "/" + "/".join([*names, part])
            _check_masked(full, masked, masked_as)
            try:
                info: os.stat_result | None = os.lstat(part, dir_fd=here)
            except FileNotFoundError:
                info = None
            if info is not None and stat.S_ISLNK(info.st_mode) and (pending or follow):
                hops += 1
                if hops > _MAX_HOPS:
                    raise PathRefused("loop", f"too many symbolic links in {path!r}")
                target = os.readlink(part, dir_fd=here)
                if target.startswith("/"):
                    for fd in stack[1:]:
                        os.close(fd)
                    del stack[1:]
                    names.clear()
                pending.extendleft(reversed(_components(target)))
                continue
            if not pending:
                return Resolved(os.dup(here), part, full)
            if info is None:
                if not create_parents:
                    raise FileNotFoundError(errno.ENOENT, "no such directory", path)
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o755, dir_fd=here)
            try:
                stack.append(os.open(part, _DIR_FLAGS, dir_fd=here))
            except OSError as exc:
                if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                    raise PathRefused(
                        "not_a_directory", f"{'/'.join([*names, part])!r} is not a directory"
                    ) from None
                raise
            names.append(part)
        full = "/" + "/".join(names)
        if len(stack) == 1:
            return Resolved(os.dup(stack[0]), ".", "/")
        parent_fd = os.open("..", _DIR_FLAGS, dir_fd=stack[-1])
        return Resolved(parent_fd, names[-1], full)
    finally:
        for fd in stack:
            os.close(fd)


def _check_masked(full: str, masked: tuple[str, ...], reason: str) -> None:
    if not any(full == top or full.startswith(top.rstrip("/") + "/") for top in masked):
        return
    if reason == "read_only":
        raise PathRefused(reason, f"{full!r} is read-only in the sandbox")
    raise PathRefused(
        reason,
        f"{full!r} is a host system path mounted read-only in the "
        f"sandbox, not one of its own files",
    )


def _resolve_own(root_fd: int, path: str, masked: tuple[str, ...]) -> Resolved:
    """:func:`resolve` (links followed) for reading: a path that enters ``masked`` is
    PathRefused ``system_mount``."""
    return resolve(root_fd, path, masked=masked, masked_as="system_mount")


def _not_root(where: Resolved, path: str) -> None:
    if where.name == ".":
        where.close()
        raise PathRefused("is_root", f"{path!r} is the sandbox's root directory")


def write_file(
    root_fd: int,
    path: str,
    data: bytes,
    *,
    mode: int | None = None,
    masked: tuple[str, ...] = (),
    xattrs: Mapping[str, bytes] | None = None,
) -> None:
    """Replace the file at sandbox path ``path`` atomically with ``data``.

    Parents are created. The new file gets ``mode`` if given, else the mode of
    the file it replaces, else 0o644, and the extended attributes ``xattrs``
    (name → value) before it replaces anything. PathRefused for a directory or
    any path :func:`resolve` refuses; OSError for other failures (a file
    system without user xattrs among them).
    """
    where = resolve(root_fd, path, create_parents=True, masked=masked)
    _not_root(where, path)
    try:
        try:
            current: os.stat_result | None = os.lstat(where.name, dir_fd=where.parent)
        except FileNotFoundError:
            current = None
        if current is not None and stat.S_ISDIR(current.st_mode):
            raise PathRefused("is_directory", f"{path!r} is a directory")
        if mode is None:
            mode = stat.S_IMODE(current.st_mode) if current is not None else 0o644
        tmp = f".{where.name[:200]}.{secrets.token_hex(4)}{_TEMPORARY_SUFFIX}"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=where.parent,
        )
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            for name, value in (xattrs or {}).items():
                os.setxattr(fd, name, value)
            os.fchmod(fd, mode)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=where.parent)
            raise
        os.close(fd)
        try:
            os.rename(tmp, where.name, src_dir_fd=where.parent, dst_dir_fd=where.parent)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=where.parent)
            raise
    finally:
        where.close()


def open_file(root_fd: int, path: str, *, masked: tuple[str, ...] = ()) -> int:
    """A read descriptor of the regular file at sandbox path ``path``.

    FileNotFoundError if missing; PathRefused ``is_directory`` for a directory,
    ``not_a_file`` for anything else that is not a regular file (a FIFO or
    device is never opened for reading, so it cannot block; a file swapped for
    a link meanwhile is refused, never followed) and ``system_mount`` for a
    path under ``masked``.
    """
    where = _resolve_own(root_fd, path, masked)
    try:
        info = os.stat(where.name, dir_fd=where.parent, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode):
            raise PathRefused("is_directory", f"{path!r} is a directory")
        if not stat.S_ISREG(info.st_mode):
            raise PathRefused("not_a_file", f"{path!r} is not a regular file")
        try:
            fd = os.open(where.name, _READ_FLAGS, dir_fd=where.parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathRefused("not_a_file", f"{path!r} is not a regular file") from None
            raise
    finally:
        where.close()
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise PathRefused("not_a_file", f"{path!r} is not a regular file")
    return fd


def pieces(fd: int, size: int) -> Iterator[bytes]:
    """The content of the open file ``fd`` from its offset, in pieces of at most
    :data:`PIECE` bytes, ending at end of file or after ``size`` bytes (its length when
    opened: a file that keeps growing is read to a bound)."""
    remaining = size
    while remaining > 0:
        piece = os.read(fd, min(PIECE, remaining))
        if not piece:
            return
        remaining -= len(piece)
        yield piece


def read_file(root_fd: int, path: str, *, limit: int | None = None) -> bytes:
    """The content of the regular file at ``path``; PathRefused ``too_large`` past
    ``limit`` bytes (and as :func:`open_file`)."""
    fd = open_file(root_fd, path)
    try:
        size = os.fstat(fd).st_size
        if limit is not None and size > limit:
            raise PathRefused("too_large", f"{path!r} is larger than {limit} bytes")
        return b"".join(pieces(fd, size))
    finally:
        os.close(fd)


def stat_path(root_fd: int, path: str, *, follow: bool = True) -> os.stat_result:
    """The status of sandbox path ``path`` (of a final symlink itself if not ``follow``)."""
    where = resolve(root_fd, path, follow=follow)
    try:
        return os.stat(where.name, dir_fd=where.parent, follow_symlinks=False)
    finally:
        where.close()


def list_dir(
    root_fd: int, path: str, *, masked: tuple[str, ...] = ()
) -> list[tuple[str, os.stat_result]]:
    """The entries of the directory at ``path`` (links followed inside the root) with
    their own status (an entry that is a link is not followed), by name. PathRefused
    ``not_a_directory`` for anything else, ``system_mount`` under ``masked``."""
    where = _resolve_own(root_fd, path, masked)
    try:
        try:
            fd = os.open(where.name, _DIR_FLAGS, dir_fd=where.parent)
        except OSError as exc:
            if exc.errno in (errno.ENOTDIR, errno.ELOOP):
                raise PathRefused("not_a_directory", f"{path!r} is not a directory") from None
            raise
    finally:
        where.close()
    try:
        names = sorted(os.listdir(fd))
        found = []
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                found.append((name, os.lstat(name, dir_fd=fd)))
        return found
    finally:
        os.close(fd)


def make_dirs(root_fd: int, path: str, *, masked: tuple[str, ...] = ()) -> bool:
    """Create the directory at ``path`` and its parents; False if it already existed."""
    where = resolve(root_fd, path, create_parents=True, masked=masked)
    try:
        if where.name == ".":
            return False
        try:
            os.mkdir(where.name, 0o755, dir_fd=where.parent)
        except FileExistsError:
            if not stat.S_ISDIR(os.stat(where.name, dir_fd=where.parent).st_mode):
                raise PathRefused(
                    "not_a_directory", f"{path!r} exists and is not a directory"
                ) from None
            return False
        return True
    finally:
        where.close()


def remove(root_fd: int, path: str, *, masked: tuple[str, ...] = ()) -> None:
    """Remove the file, symlink (itself) or directory tree at ``path``."""
    where = resolve(root_fd, path, follow=False, masked=masked)
    _not_root(where, path)
    try:
        remove_entry(where.parent, where.name)
    finally:
        where.close()


def rename(root_fd: int, source: str, target: str, *, masked: tuple[str, ...] = ()) -> None:
    """Move ``source`` (a final symlink itself) to ``target``, creating its parents."""
    src = resolve(root_fd, source, follow=False, masked=masked)
    _not_root(src, source)
    try:
        dst = resolve(root_fd, target, create_parents=True, follow=False, masked=masked)
        _not_root(dst, target)
        try:
            os.rename(src.name, dst.name, src_dir_fd=src.parent, dst_dir_fd=dst.parent)
        finally:
            dst.close()
    finally:
        src.close()


def is_directory(root_fd: int, path: str) -> bool:
    """Whether sandbox path ``path`` is a directory (symlinks followed inside the root)."""
    try:
        return stat.S_ISDIR(stat_path(root_fd, path).st_mode)
    except (OSError, PathRefused):
        return False


def open_root(path: str | os.PathLike[str]) -> int:
    """A descriptor of a sandbox's root directory (never through a symlink)."""
    return os.open(path, _DIR_FLAGS)
