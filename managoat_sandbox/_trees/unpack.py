"""A tar stream from a sandbox, written under a local path (``download``'s side).

The stream comes from the sandbox, so it is hostile: whatever runs there may
have replaced its ``tar``. :class:`Extractor` writes each entry under
``target`` and never outside it:

* every entry must be named ``<root>`` or ``<root>/...`` (``root`` being the
  name the sandbox archived); an absolute name, a ``..`` component, or another
  root is refused;
* below ``target``, each directory on the way is opened with ``O_NOFOLLOW``,
  and a file is opened with ``O_NOFOLLOW`` too, so no entry is written through
  a symbolic link — one the stream planted earlier or one already there; such
  an entry is refused. A symbolic link itself is created as a link (its target
  is not checked: creating a link writes nothing through it);
* a hard link must name an entry already written below ``target``;
* permission bits keep only ``rwx`` for user, group and others (no setuid,
  setgid or sticky bit comes from a sandbox), nothing is given another owner,
  and entries that are neither directories, regular files nor links (devices,
  FIFOs) are left out and logged.

A refusal is ``Invalid(("archive_entry", name))`` with a message, raised at that
entry: what came before it stays written, nothing after it is. ``target``
itself is the caller's: it is used as given (a link there is followed).
Directory modes are applied by :meth:`Extractor.finish`, deepest first, so a
read-only directory still receives its entries.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import tarfile
from collections.abc import Iterator
from typing import IO

from ..errors import Invalid
from ..reasons import Reason
from .counter import Counter

__all__ = ["ChunkReader", "Extractor", "unusable"]

log = logging.getLogger("managoat_sandbox")

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
#: The bytes of an entry read from the stream at once.
_READ = 256 * 1024


def _refuse(name: str, why: str) -> Invalid:
    return Invalid(Reason.ARCHIVE_ENTRY, name=name, message=f"archive entry {name!r} {why}")


class ChunkReader:
    """Chunks as a file to read, as ``tarfile``'s stream mode reads an archive: each
    ``read`` returns at most ``size`` bytes (all that is held for a negative one),
    fewer when fewer have arrived — as a pipe does — and ``b""`` at the end."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._held = b""

    def read(self, size: int = -1) -> bytes:
        while not self._held:
            chunk = next(self._chunks, None)
            if chunk is None:
                return b""
            self._held = chunk
        if size < 0:
            size = len(self._held)
        data, self._held = self._held[:size], self._held[size:]
        return data


def unusable(error: tarfile.ReadError) -> Invalid:
    """The error of a sandbox whose ``tar`` sent something that is no tar archive."""
    return Invalid(
        Reason.TRANSFER,
        problem="not a tar archive",
        message=f"the sandbox's tar sent no usable archive: {error}",
    )


class Extractor:
    """Writes the entries of a stream archived as ``root`` to ``target`` (see the
    module docstring), counting them on ``counter``."""

    def __init__(self, target: str, root: str, counter: Counter) -> None:
        self.target = target
        self.root = root
        self.counter = counter
        self._root_fd: int | None = None
        self._dir_modes: list[tuple[tuple[str, ...], int]] = []

    def extract(self, source: ChunkReader | IO[bytes]) -> None:
        """Write every entry of the tar stream ``source``, then apply the directories'
        modes; the target is released whatever happens. ``tarfile.ReadError`` when
        ``source`` holds no tar archive (or stops being one)."""
        try:
            with tarfile.open(fileobj=source, mode="r|") as tar:  # type: ignore[call-overload]
                for member in tar:
                    self.add(member, tar)
            self.finish()
        finally:
            self.close()

    def close(self) -> None:
        """Release the target directory (without applying directory modes)."""
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def finish(self) -> None:
        """Apply the directories' modes, deepest first, then release the target."""
        for parts, mode in sorted(self._dir_modes, key=lambda item: -len(item[0])):
            if not parts:
                os.chmod(self.target, mode)
                continue
            with self._parent(parts, "/".join(parts), create=False) as parent:
                os.chmod(parts[-1], mode, dir_fd=parent, follow_symlinks=False)
        self.close()

    def add(self, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        """Write one entry (its content read from ``tar``)."""
        parts = self._parts(member.name)
        if not parts:
            self._add_root(member, tar)
            return
        if self._root_fd is None:
            raise _refuse(member.name, f"comes before {self.root!r}, the directory it is in")
        if member.isdir():
            self._add_dir(parts, member)
        elif member.isreg():
            with self._parent(parts, member.name, create=True) as parent:
                self._write(parent, parts[-1], member, tar)
        elif member.issym():
            with self._parent(parts, member.name, create=True) as parent:
                self._link(parent, parts[-1], member)
        elif member.islnk():
            self._hard_link(parts, member)
        else:
            log.warning("download leaves out %r: not a file, directory or link", member.name)

    # -- names ------------------------------------------------------------------

    def _parts(self, name: str) -> tuple[str, ...]:
        """The components of ``name`` below the root, checked (module docstring)."""
        if name.startswith("/"):
            raise _refuse(name, "is an absolute path")
        parts = [part for part in name.split("/") if part not in ("", ".")]
        if ".." in parts:
            raise _refuse(name, "has a '..' component")
        if not parts or parts[0] != self.root:
            raise _refuse(name, f"is not under {self.root!r}, the path downloaded")
        return tuple(parts[1:])

    # -- the root ---------------------------------------------------------------

    def _add_root(self, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        if self._root_fd is not None:
            raise _refuse(member.name, "repeats the root")
        if member.isdir():
            os.makedirs(self.target, exist_ok=True)
            self._root_fd = os.open(self.target, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            self._dir_modes.append(((), _mode(member)))
            return
        directory, name = os.path.split(os.path.abspath(self.target))
        parent = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            if member.isreg():
                self._write(parent, name, member, tar)
            elif member.issym():
                self._link(parent, name, member)
            else:
                raise _refuse(member.name, "is not a file, directory or symlink")
        finally:
            os.close(parent)

    # -- below the root -----------------------------------------------------------

    @contextlib.contextmanager
    def _parent(self, parts: tuple[str, ...], name: str, *, create: bool) -> Iterator[int]:
        """The directory holding ``parts[-1]``, reached without following a link
        (missing directories made when ``create``)."""
        assert self._root_fd is not None
        fd = os.dup(self._root_fd)
        for part in parts[:-1]:
            fd = self._enter(fd, part, name, create=create)  # closes the fd it is given
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _enter(fd: int, part: str, name: str, *, create: bool) -> int:
        """The directory ``part`` of ``fd`` (``fd`` is closed), never through a link."""
        try:
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o700, dir_fd=fd)
            entered = os.open(part, _DIR_FLAGS, dir_fd=fd)
        except OSError as error:
            if error.errno in (errno.ELOOP, errno.ENOTDIR):
                raise _refuse(name, "goes through a symlink or a file") from None
            raise
        finally:
            os.close(fd)
        return entered

    def _add_dir(self, parts: tuple[str, ...], member: tarfile.TarInfo) -> None:
        with self._parent(parts, member.name, create=True) as parent:
            os.close(self._enter(os.dup(parent), parts[-1], member.name, create=True))
        self._dir_modes.append((parts, _mode(member)))

    def _write(self, parent: int, name: str, member: tarfile.TarInfo, tar: tarfile.TarFile) -> None:
        fd = self._open_file(parent, name, member.name)
        try:
            source = tar.extractfile(member)
            if source is not None:
                self._copy(source, fd)
            os.fchmod(fd, _mode(member))
            os.utime(fd, (member.mtime, member.mtime))
        finally:
            os.close(fd)
        self.counter.add_file()

    @staticmethod
    def _open_file(parent: int, name: str, entry: str) -> int:
        try:
            return os.open(name, _FILE_FLAGS, 0o600, dir_fd=parent)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
        # A link is there (planted earlier in the stream, or already): replace the
        # link itself, never write through it.
        os.unlink(name, dir_fd=parent)
        try:
            return os.open(name, _FILE_FLAGS | os.O_EXCL, 0o600, dir_fd=parent)
        except FileExistsError:
            raise _refuse(entry, "was replaced while being written") from None

    def _copy(self, source: IO[bytes], fd: int) -> None:
        while chunk := source.read(_READ):
            view = memoryview(chunk)
            while view:
                view = view[os.write(fd, view) :]
            self.counter.add_bytes(len(chunk))

    def _link(self, parent: int, name: str, member: tarfile.TarInfo) -> None:
        with contextlib.suppress(FileNotFoundError):
            info = os.stat(name, dir_fd=parent, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                raise _refuse(member.name, "would replace a directory with a symlink")
            os.unlink(name, dir_fd=parent)
        os.symlink(member.linkname, name, dir_fd=parent)
        self.counter.add_file()

    def _hard_link(self, parts: tuple[str, ...], member: tarfile.TarInfo) -> None:
        source = self._parts(member.linkname)
        if not source:
            raise _refuse(member.name, "is a hard link to the root")
        with (
            self._parent(source, member.name, create=False) as source_parent,
            self._parent(parts, member.name, create=True) as parent,
        ):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(parts[-1], dir_fd=parent)
            os.link(
                source[-1],
                parts[-1],
                src_dir_fd=source_parent,
                dst_dir_fd=parent,
                follow_symlinks=False,
            )
        self.counter.add_file()


def _mode(member: tarfile.TarInfo) -> int:
    """The permission bits an entry gets here: ``rwx`` for each class, nothing more."""
    return member.mode & 0o777
