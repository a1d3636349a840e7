"""Checkpoints of a local sandbox: copies of its files, made without trusting them.

The files belong to the sandbox, so the copy never follows a symlink (links
are copied as links), never opens anything but a regular file (a FIFO would
block, a device could be anything: both are left out), and works from
directory descriptors so that a command renaming things meanwhile cannot
redirect it outside the sandbox.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ..._engine.box import Box
from . import layout

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _copy_file(src_dir: int, name: str, dst_dir: int, mode: int) -> None:
    src = os.open(name, _FILE, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            return
        dst = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600, dir_fd=dst_dir)
        try:
            with os.fdopen(src, "rb", closefd=False) as reader, \
                    os.fdopen(dst, "wb", closefd=False) as writer:
                shutil.copyfileobj(reader, writer, 1024 * 1024)
            os.fchmod(dst, stat.S_IMODE(mode))
        finally:
            os.close(dst)
    finally:
        os.close(src)


def copy_tree(src_dir: int, dst_dir: int) -> None:
    """Copy the directory ``src_dir`` into the (empty) directory ``dst_dir``."""
    with os.scandir(src_dir) as entries:
        listing = [(entry.name, entry.stat(follow_symlinks=False)) for entry in entries]
    for name, info in listing:
        if stat.S_ISLNK(info.st_mode):
            os.symlink(os.readlink(name, dir_fd=src_dir), name, dir_fd=dst_dir)
        elif stat.S_ISREG(info.st_mode):
            _copy_file(src_dir, name, dst_dir, info.st_mode)
        elif stat.S_ISDIR(info.st_mode):
            os.mkdir(name, 0o700, dir_fd=dst_dir)
            child_src = os.open(name, _DIR, dir_fd=src_dir)
            try:
                child_dst = os.open(name, _DIR, dir_fd=dst_dir)
                try:
                    copy_tree(child_src, child_dst)
                    os.fchmod(child_dst, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
                finally:
                    os.close(child_dst)
            finally:
                os.close(child_src)


def _copy(source: Path, target: Path) -> None:
    target.mkdir(mode=0o755)
    src = os.open(source, _DIR)
    try:
        dst = os.open(target, _DIR)
        try:
            copy_tree(src, dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)


def _directory(box: Box, checkpoint_id: str) -> Path:
    return box.directory / layout.CHECKPOINTS / checkpoint_id


def exists(box: Box, checkpoint_id: str) -> bool:
    return (_directory(box, checkpoint_id) / layout.FS).is_dir()


def create(box: Box, checkpoint_id: str, comment: str) -> None:
    """Copy the sandbox's files into a new checkpoint (complete, or not there at all)."""
    base = box.directory / layout.CHECKPOINTS
    base.mkdir(mode=0o700, exist_ok=True)
    staging = base / f".{checkpoint_id}"
    staging.mkdir(mode=0o700)
    try:
        _copy(box.fs, staging / layout.FS)
        (staging / "comment").write_text(comment)
        os.rename(staging, _directory(box, checkpoint_id))
    except BaseException:
        layout.remove_tree(staging)
        raise


def restore(box: Box, checkpoint_id: str) -> None:
    """Replace the sandbox's files by a checkpoint's (its agent must not run)."""
    incoming = box.directory / f".restore-{checkpoint_id}"
    outgoing = box.directory / f".replaced-{checkpoint_id}"
    _copy(_directory(box, checkpoint_id) / layout.FS, incoming)
    try:
        os.rename(box.fs, outgoing)
        os.rename(incoming, box.fs)
    except OSError:
        if outgoing.exists() and not box.fs.exists():
            os.rename(outgoing, box.fs)
        layout.remove_tree(incoming)
        raise
    layout.remove_tree(outgoing)
