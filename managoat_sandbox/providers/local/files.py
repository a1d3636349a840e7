"""Reading a local sandbox's files back: ``read_file`` and ``list_files``.

A path means what a command in the sandbox sees at it, as for ``write_file``:
it is resolved inside the sandbox's own filesystem (its ``fs/``) by
:mod:`managoat_sandbox._engine.safefs`, one component at a time from a
descriptor of the sandbox's root, so a symlink a command planted (an
absolute target, ``..`` past the root, a link swapped in between two checks)
resolves inside the sandbox and can never lead out of it. A FIFO or device
is refused without being opened; the host's read-only system mounts of an
isolated sandbox (``/usr``, the ``/etc`` files it is given…) are not the
sandbox's own files and are refused. See docs/local-sandbox.md.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone

from ..._engine import safefs
from ..._engine.box import Box
from ...errors import Denied, Invalid, NotFound
from ...files import collect
from ...reasons import Reason
from ...types import FileInfo, FileType

__all__ = ["listing", "read"]


def read(box: Box, path: str, max_bytes: int | None) -> bytes:
    """The bytes of the regular file at sandbox path ``path`` (links resolved inside the
    sandbox), read up to its length when opened; ``Truncated`` past ``max_bytes``.
    ``NotFound`` when nothing is there, ``Invalid`` for anything that is not a regular
    file or not the sandbox's own."""
    try:
        with box.root() as root_fd:
            fd = safefs.open_file(root_fd, path, masked=box.masked())
    except (OSError, safefs.PathRefused) as error:
        raise error_for(error, path, Reason.READ_FAILED) from None
    try:
        size = os.fstat(fd).st_size
        return collect(safefs.pieces(fd, size), max_bytes, size=size)
    except OSError as error:
        raise error_for(error, path, Reason.READ_FAILED) from None
    finally:
        os.close(fd)


def listing(box: Box, path: str) -> list[FileInfo]:
    """The entries directly in the directory at sandbox path ``path``, by name, each as
    it is itself (a symlink is reported as ``"symlink"``, never followed). ``NotFound``
    when nothing is there, ``Invalid`` for anything that is not a directory or not the
    sandbox's own."""
    try:
        with box.root() as root_fd:
            entries = safefs.list_dir(root_fd, path, masked=box.masked())
    except (OSError, safefs.PathRefused) as error:
        raise error_for(error, path, Reason.LIST_FAILED) from None
    prefix = path.rstrip("/")
    return [_info(name, f"{prefix}/{name}", status) for name, status in entries]


def _info(name: str, path: str, status: os.stat_result) -> FileInfo:
    return FileInfo(
        name=name,
        path=path,
        type=_type(status.st_mode),
        size=status.st_size,
        mode=stat.S_IMODE(status.st_mode),
        modified=datetime.fromtimestamp(status.st_mtime, timezone.utc),
    )


def _type(mode: int) -> FileType:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def error_for(error: OSError | safefs.PathRefused, path: str, failed: Reason | str) -> Exception:
    """``NotFound(("path", path))`` for nothing there; ``Denied(("path", path))`` where
    the sandbox's user has no right to it (file operations act as that user, see
    :meth:`Box.root`); ``Invalid(("path", code))`` (the refusal's code, e.g.
    ``"not_a_file"``, with its words as ``message``) for a path that cannot be used;
    ``Invalid((failed, path, strerror))`` for any other failure (``failed``:
    ``Reason.READ_FAILED``, ``LIST_FAILED`` or ``WRITE_FAILED``, or its value)."""
    if isinstance(error, FileNotFoundError):
        return NotFound(Reason.PATH, path=path)
    if isinstance(error, PermissionError):
        return Denied(Reason.PATH, path=path)
    if isinstance(error, safefs.PathRefused):
        return Invalid(Reason.PATH, problem=error.reason, message=str(error))
    return Invalid(Reason(failed), path=path, problem=error.strerror)
