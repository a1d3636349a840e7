"""The host filesystem as the emulators meet it: the directories they make, and how the
services they stand for word a failed system call.

* :func:`private_dirs` makes the directories an emulator keeps its sandboxes in
  (its workdir when it has to make it, and everything it makes under it)
  owner-only, ``0700`` whatever the umask, so no other user of the host can
  reach a sandbox's files through them. A directory that already exists — a
  workdir the caller gave — is left as it is.
* :func:`go_text` is an ``OSError``'s errno as Go's ``syscall.Errno`` prints it
  (``permission denied``, ``operation not permitted``): the services'
  file daemons are written in Go, and their error messages end so.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

__all__ = ["PRIVATE", "go_text", "private_dirs"]

#: The mode of every directory an emulator makes: the owner's alone.
PRIVATE = 0o700
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def private_dirs(path: Path) -> None:
    """Make the directory ``path`` and each missing parent, each one made mode ``0700``
    (set on the new directory itself, not left to the umask). Directories that exist
    are left as they are, also one made meanwhile by another thread; OSError if a
    component cannot be made or is not a directory."""
    missing: list[Path] = []
    current = path
    while not current.is_dir():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, PRIVATE)
        except FileExistsError:
            if not directory.is_dir():
                raise
            continue
        fd = os.open(directory, _DIR_FLAGS)
        try:
            os.fchmod(fd, PRIVATE)
        finally:
            os.close(fd)


def go_text(error: OSError) -> str:
    """The text Go gives ``error``'s errno: glibc's message with a lower-case first
    letter, as Go's table has it (``permission denied``); an error without an errno
    is taken for ``EIO`` (``input/output error``)."""
    text = os.strerror(error.errno if error.errno is not None else errno.EIO)
    return text[:1].lower() + text[1:]
