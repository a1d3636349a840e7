"""Copying, swapping and deleting a sandbox's file trees without trusting them.

A sandbox's files are written by its commands, so nothing here follows a
symbolic link or opens anything but a regular file or a directory: links are
copied as links; FIFOs, sockets and devices are left out; regular files are
opened ``O_NOFOLLOW | O_NONBLOCK`` (a FIFO swapped in cannot block) and
checked after opening; and every step works from directory descriptors
opened ``O_NOFOLLOW``, so a command renaming things meanwhile cannot redirect
a copy or a deletion outside the tree. An entry that disappears or is
swapped for a link during a copy is left out of it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

#: How deep a copied tree may nest (each level holds two descriptors).
MAX_DEPTH = 256
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# An entry removed, or replaced by a link or a non-directory, between listing and opening.
_VANISHED = (errno.ENOENT, errno.ELOOP, errno.ENOTDIR)
_CHUNK = 1024 * 1024
#: Whether copies keep each entry's owner: root's do (a root caller's sandbox owns its
#: files under a uid of its own, which a restored checkpoint must keep); anyone else's
#: copies are theirs, as they were.
_KEEP_OWNERS = hasattr(os, "geteuid") and os.geteuid() == 0


def copy_tree(source: Path, target: Path) -> None:
    """Copy the directory ``source`` to ``target``, which this creates.

    Modes and modification times are kept, and owners when this process is
    root. On failure nothing is left at ``target`` and the OSError propagates
    (ENAMETOOLONG for a tree nested deeper than :data:`MAX_DEPTH`).
    """
    src = os.open(source, _DIR)
    try:
        os.mkdir(target, 0o700)
        try:
            dst = os.open(target, _DIR)
            try:
                _copy_directory(src, dst, 0)
            finally:
                os.close(dst)
        except BaseException:
            remove_tree(target)
            raise
    finally:
        os.close(src)


def _copy_directory(src: int, dst: int, depth: int) -> None:
    """Copy the entries of directory ``src`` into the empty directory ``dst``, then its mode."""
    if depth > MAX_DEPTH:
        raise OSError(errno.ENAMETOOLONG, f"directory tree deeper than {MAX_DEPTH} levels")
    for name in os.listdir(src):
        try:
            info = os.lstat(name, dir_fd=src)
            if stat.S_ISLNK(info.st_mode):
                os.symlink(os.readlink(name, dir_fd=src), name, dir_fd=dst)
                if _KEEP_OWNERS:
                    os.chown(name, info.st_uid, info.st_gid, dir_fd=dst, follow_symlinks=False)
            elif stat.S_ISREG(info.st_mode):
                _copy_file(src, name, dst)
            elif stat.S_ISDIR(info.st_mode):
                _copy_subdirectory(src, name, dst, depth)
        except OSError as exc:
            if exc.errno not in _VANISHED:
                raise
    info = os.fstat(src)
    os.utime(dst, ns=(info.st_atime_ns, info.st_mtime_ns))
    if _KEEP_OWNERS:
        os.fchown(dst, info.st_uid, info.st_gid)
    os.fchmod(dst, stat.S_IMODE(info.st_mode))


def _copy_subdirectory(src: int, name: str, dst: int, depth: int) -> None:
    child_src = os.open(name, _DIR, dir_fd=src)
    try:
        os.mkdir(name, 0o700, dir_fd=dst)
        child_dst = os.open(name, _DIR, dir_fd=dst)
        try:
            _copy_directory(child_src, child_dst, depth + 1)
        finally:
            os.close(child_dst)
    finally:
        os.close(child_src)


def _copy_file(src: int, name: str, dst: int) -> None:
    reader = os.open(name, _FILE, dir_fd=src)
    try:
        info = os.fstat(reader)
        if not stat.S_ISREG(info.st_mode):
            return
        writer = os.open(name, _NEW, 0o600, dir_fd=dst)
        try:
            while chunk := os.read(reader, _CHUNK):
                view = memoryview(chunk)
                while view:
                    view = view[os.write(writer, view) :]
            if _KEEP_OWNERS:
                os.fchown(writer, info.st_uid, info.st_gid)
            os.fchmod(writer, stat.S_IMODE(info.st_mode))
            os.utime(writer, ns=(info.st_atime_ns, info.st_mtime_ns))
        finally:
            os.close(writer)
    finally:
        os.close(reader)


def replace_tree(current: Path, snapshot: Path, scratch: Path) -> None:
    """Make ``current`` a fresh copy of ``snapshot``; nothing may be using ``current``.

    The copy is made in ``scratch`` (a directory on the same filesystem) and
    swapped in by renames, so ``current`` is either entirely the old tree or
    entirely the new one.
    """
    token = secrets.token_hex(8)
    incoming = scratch / f"incoming-{token}"
    outgoing = scratch / f"outgoing-{token}"
    copy_tree(snapshot, incoming)
    try:
        os.rename(current, outgoing)
    except OSError:
        remove_tree(incoming)
        raise
    try:
        os.rename(incoming, current)
    except OSError:
        os.rename(outgoing, current)
        remove_tree(incoming)
        raise
    remove_tree(outgoing)


def discard(path: Path) -> None:
    """Remove directory ``path`` at once (renamed to a hidden sibling), then delete it;
    nothing there is a no-op."""
    trash = path.with_name(f".trash-{secrets.token_hex(8)}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    remove_tree(trash)


def remove_tree(path: Path) -> None:
    """Delete ``path`` and everything under it; nothing there is a no-op.

    A symlink is removed itself, never followed; directories a command made
    unreadable or unwritable are given back to their owner first. The walk
    keeps one descriptor per level, never recursing in Python.
    """
    parent = os.open(path.parent, _DIR)
    try:
        remove_entry(parent, path.name)
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


def remove_entry(parent: int, name: str) -> None:
    """Delete entry ``name`` of directory ``parent`` (a whole tree for a directory), as
    :func:`remove_tree` does."""
    if not stat.S_ISDIR(os.lstat(name, dir_fd=parent).st_mode):
        os.unlink(name, dir_fd=parent)
        return
    stack = [(_enter(parent, name), name)]
    try:
        while stack:
            here = stack[-1][0]
            child = _clear_files(here)
            if child is not None:
                with contextlib.suppress(FileNotFoundError):
                    stack.append((_enter(here, child), child))
                continue
            fd, own = stack.pop()
            os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                os.rmdir(own, dir_fd=stack[-1][0] if stack else parent)
    finally:
        for fd, _ in stack:
            os.close(fd)


def _enter(parent: int, name: str) -> int:
    """A descriptor of directory ``name``, made readable, writable and searchable first."""
    try:
        fd = os.open(name, _DIR, dir_fd=parent)
    except PermissionError:
        handle = os.open(name, _PATH, dir_fd=parent)
        try:
            mode = os.fstat(handle).st_mode
            os.chmod(f"/proc/self/fd/{handle}", stat.S_IMODE(mode) | stat.S_IRWXU)
        finally:
            os.close(handle)
        fd = os.open(name, _DIR, dir_fd=parent)
    mode = os.fstat(fd).st_mode
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
    return fd


def _clear_files(fd: int) -> str | None:
    """Unlink every entry of directory ``fd`` but its subdirectories; the name of one of
    those (None when it holds none)."""
    subdirectory = None
    for name in os.listdir(fd):
        try:
            info = os.lstat(name, dir_fd=fd)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode):
            subdirectory = subdirectory or name
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)
    return subdirectory
