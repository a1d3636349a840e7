"""One sandbox's files as the emulator reaches them: sandbox paths, through :mod:`safefs`.

Every path here is a path *inside* the sandbox (absolute, or relative to the
sandbox user's home). Nothing is opened through a plain host path: each
operation resolves from a descriptor of the box's ``fs/`` one component at a
time, so a symlink a command planted resolves inside the sandbox and never
leads the emulator out of it.

Two kinds of files:

* **the user's files** (the toolbox's file endpoints): symlinks are followed
  inside the sandbox, as the daemon inside would follow them;
* **the daemon's own files** (a command's ``output.log``, ``exit_code`` and
  stdin FIFO): a final symlink is never followed, a log must be a regular
  file (a FIFO put in its place is refused, never opened for reading, so it
  cannot block the emulator), and the stdin FIFO is opened for writing
  without blocking — a FIFO with no reader is an error, not a wait.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Callable

import attrs

from managoat_sandbox._engine import safefs
from managoat_sandbox._engine.box import Box
from managoat_sandbox._engine.trees import MAX_DEPTH, remove_entry

from .._input import BadInput

__all__ = ["SandboxFiles", "Walked", "go_join"]

_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_WRITE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_PATH_FLAGS = os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC


def go_join(base: str, name: str) -> str:
    """``base`` and ``name`` joined and cleaned as Go's ``filepath.Join`` does."""
    joined = posixpath.normpath(f"{base}/{name}")
    return "/" + joined.lstrip("/") if joined.startswith("//") else joined


def _regular(fd: int, path: str) -> int:
    """``fd`` if it is a regular file's; else it is closed and PathRefused ``not_a_file``."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise safefs.PathRefused("not_a_file", f"{path!r} is not a regular file")
    return fd


@attrs.frozen
class Walked:
    """One entry met by :meth:`SandboxFiles.walk`: ``path`` as the daemon names it (the
    walk's root as given, joined with the names below it), ``relative`` to the root
    (``"."`` for the root itself) and ``info``, its own status (a link unfollowed).
    Valid only during the visit that receives it."""

    path: str
    relative: str
    info: os.stat_result
    _parent: int
    _name: str

    def open(self) -> int:
        """A read descriptor of this entry if it is (still) a regular file, never
        through a link and never blocking; PathRefused ``not_a_file`` otherwise."""
        return _regular(os.open(self._name, _READ_FLAGS, dir_fd=self._parent), self.path)


_APPEND_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_FIFO_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class SandboxFiles:
    """The files of the sandbox in ``box``; thread-safe (each call opens its own root).

    Raises FileNotFoundError for a missing path, :class:`safefs.PathRefused`
    for one that cannot be used (a directory where a file is wanted, a FIFO or
    symlink where the daemon keeps a file, a read-only system path), OSError
    otherwise.
    """

    def __init__(self, box: Box) -> None:
        self._box = box
        self._masked = box.masked()
        self.home = box.settings.home

    def absolute(self, path: str) -> str:
        """``path`` as an absolute sandbox path (a relative one is under the home);
        :class:`~.._input.BadInput` (a 400) if it holds a NUL, which no path can."""
        if "\0" in path:
            raise BadInput("a path may not hold a NUL character")
        return path if path.startswith("/") else f"{self.home.rstrip('/')}/{path}"

    # -- the user's files ---------------------------------------------------------------

    def read(self, path: str, *, limit: int | None = None) -> bytes:
        """The content of the regular file at ``path``."""
        with self._box.root() as root:
            return safefs.read_file(root, self.absolute(path), limit=limit)

    def open(self, path: str) -> int:
        """A read descriptor of the regular file at ``path`` (FileNotFoundError if nothing
        is there; PathRefused ``is_directory`` for a directory, ``not_a_file`` for a FIFO,
        socket or device, which is never opened)."""
        with self._box.root() as root:
            return safefs.open_file(root, self.absolute(path))

    def listing(self, path: str) -> list[tuple[str, os.stat_result, bool]]:
        """The entries of the directory at ``path``, by name, as ``(name, status,
        linked)``: the status of what the entry names — a symlink (``linked``) is
        followed inside the sandbox, as the daemon's stat follows it, and left out when
        it leads nowhere. PathRefused ``not_a_directory`` for a path that is not a
        directory."""
        target = self.absolute(path)
        with self._box.root() as root:
            entries = []
            for name, own in safefs.list_dir(root, target):
                linked = stat.S_ISLNK(own.st_mode)
                try:
                    info = safefs.stat_path(root, f"{target.rstrip('/')}/{name}") if linked else own
                except (OSError, safefs.PathRefused):
                    continue
                entries.append((name, info, linked))
            return entries

    def write(self, path: str, data: bytes) -> str:
        """Replace the file at ``path`` with ``data`` (parents made); its absolute path."""
        target = self.absolute(path)
        with self._box.root() as root:
            safefs.write_file(root, target, data, masked=self._masked)
        return target

    def make_dirs(self, path: str) -> None:
        """Create the directory at ``path`` and its parents."""
        with self._box.root() as root:
            safefs.make_dirs(root, self.absolute(path), masked=self._masked)

    def remove(self, path: str) -> None:
        """Remove the file or tree at ``path``; nothing if it is already gone."""
        with self._box.root() as root, contextlib.suppress(FileNotFoundError):
            safefs.remove(root, self.absolute(path), masked=self._masked)

    def status(self, path: str) -> os.stat_result:
        """The status of what ``path`` names (links followed inside the sandbox)."""
        with self._box.root() as root:
            return safefs.stat_path(root, self.absolute(path))

    def make_folder(self, path: str, mode: int) -> None:
        """Create the directory at ``path`` and each missing parent with ``mode`` (less
        the umask), as Go's ``os.MkdirAll``; an existing directory is success.
        NotADirectoryError if a component exists and is not a directory."""
        target = self.absolute(path)
        names = [part for part in target.split("/") if part not in ("", ".")]
        with self._box.root() as root:
            for end in range(1, len(names) + 1):
                where = safefs.resolve(root, "/" + "/".join(names[:end]), masked=self._masked)
                try:
                    _make_directory(where, mode)
                finally:
                    where.close()

    def delete(self, path: str, *, recursive: bool) -> None:
        """Remove the entry at ``path`` itself (a final link is not followed): with
        ``recursive`` a whole tree, else a file, link or empty directory only."""
        with self._box.root() as root:
            where = safefs.resolve(root, self.absolute(path), follow=False, masked=self._masked)
            try:
                if where.name == ".":
                    raise safefs.PathRefused("is_root", f"{path!r} is the sandbox's root")
                if recursive:
                    remove_entry(where.parent, where.name)
                    return
                try:
                    os.unlink(where.name, dir_fd=where.parent)
                except IsADirectoryError:
                    os.rmdir(where.name, dir_fd=where.parent)
            finally:
                where.close()

    def move(self, source: str, target: str) -> None:
        """Rename ``source`` (a final link itself) to ``target``."""
        with self._box.root() as root:
            safefs.rename(root, self.absolute(source), self.absolute(target), masked=self._masked)

    def change_mode(self, path: str, mode: int) -> None:
        """``chmod`` what ``path`` names (links followed inside the sandbox) to ``mode``."""
        self._on_entry(path, lambda handle: os.chmod(handle, mode))

    def change_owner(self, path: str, uid: int, gid: int) -> None:
        """``chown`` what ``path`` names to ``uid``/``gid`` (-1: unchanged)."""
        self._on_entry(path, lambda handle: os.chown(handle, uid, gid))

    def _on_entry(self, path: str, change: Callable[[str], None]) -> None:
        """Apply ``change`` to the entry ``path`` resolves to, through its descriptor's
        ``/proc/self/fd`` name, so that a link swapped in meanwhile is never followed
        out of the sandbox (PathRefused ``loop`` for a link there)."""
        with self._box.root() as root:
            where = safefs.resolve(root, self.absolute(path), masked=self._masked)
            try:
                handle = os.open(where.name, _PATH_FLAGS, dir_fd=where.parent)
            finally:
                where.close()
            try:
                if stat.S_ISLNK(os.fstat(handle).st_mode):
                    raise safefs.PathRefused("loop", f"{path!r} changed into a link")
                change(f"/proc/self/fd/{handle}")
            finally:
                os.close(handle)

    def overwrite(self, path: str, data: bytes) -> None:
        """Replace the content of the existing regular file at ``path`` with ``data`` in
        place (its inode, mode and owner kept), as Go's ``os.WriteFile`` does to a file
        that exists: the sandbox user must be allowed to write the file itself."""
        with self._box.root() as root:
            where = safefs.resolve(root, self.absolute(path), masked=self._masked)
            try:
                fd = _regular(os.open(where.name, _WRITE_FLAGS, dir_fd=where.parent), path)
            finally:
                where.close()
            try:
                os.ftruncate(fd, 0)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)

    def walk(self, path: str, visit: Callable[[Walked], None]) -> None:
        """Visit ``path`` and, if it is a directory, everything under it, depth first and
        by name, as Go's ``filepath.Walk`` does: no link is followed (the root's own
        last component included), an entry that cannot be read is passed over, and so
        is a missing root. Entries under the sandbox's system mounts and below
        :data:`~managoat_sandbox._engine.trees.MAX_DEPTH` levels are left out.
        ``visit`` runs with the sandbox user's rights; what it raises ends the walk."""
        with self._box.root() as root:
            try:
                where = safefs.resolve(
                    root,
                    self.absolute(path),
                    follow=False,
                    masked=self._masked,
                    masked_as="system_mount",
                )
            except (OSError, safefs.PathRefused):
                return
            try:
                info = os.stat(where.name, dir_fd=where.parent, follow_symlinks=False)
            except OSError:
                where.close()
                return
            try:
                self._walk_tree(
                    Walked(path, ".", info, where.parent, where.name), where.path, visit
                )
            finally:
                where.close()

    def _walk_tree(self, entry: Walked, full: str, visit: Callable[[Walked], None]) -> None:
        """Visit ``entry`` (at sandbox path ``full``), then the tree under it."""
        visit(entry)
        depth = 0 if entry.relative == "." else entry.relative.count("/") + 1
        if not stat.S_ISDIR(entry.info.st_mode) or depth >= MAX_DEPTH:
            return
        try:
            folder = os.open(entry._name, _DIR_FLAGS, dir_fd=entry._parent)
        except OSError:
            return
        try:
            for name in _names(folder):
                below = go_join(full, name)
                if self._is_masked(below):
                    continue
                try:
                    info = os.lstat(name, dir_fd=folder)
                except OSError:
                    continue
                relative = name if entry.relative == "." else f"{entry.relative}/{name}"
                child = Walked(go_join(entry.path, name), relative, info, folder, name)
                self._walk_tree(child, below, visit)
        finally:
            os.close(folder)

    def _is_masked(self, full: str) -> bool:
        return any(full == top or full.startswith(top.rstrip("/") + "/") for top in self._masked)

    # -- the daemon's own files ---------------------------------------------------------

    def _open_own(self, path: str, flags: int, kind: int) -> int:
        """Open the daemon file at ``path`` if it is of file type ``kind`` (a
        :mod:`stat` ``S_IF*`` value), checked before opening — so a FIFO where a
        regular file belongs is never opened — and again on the descriptor."""
        with self._box.root() as root:
            where = safefs.resolve(root, self.absolute(path), follow=False)
            try:
                mode = os.stat(where.name, dir_fd=where.parent, follow_symlinks=False).st_mode
                if stat.S_IFMT(mode) != kind:
                    raise safefs.PathRefused("not_a_file", f"{path!r} is not the daemon's file")
                fd = os.open(where.name, flags, dir_fd=where.parent)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise safefs.PathRefused("not_a_file", f"{path!r} is a symbolic link") from None
                raise
            finally:
                where.close()
        if stat.S_IFMT(os.fstat(fd).st_mode) != kind:
            os.close(fd)
            raise safefs.PathRefused("not_a_file", f"{path!r} is not the daemon's file")
        return fd

    def open_own(self, path: str) -> int:
        """A read descriptor of the daemon file at ``path`` (regular, not through a
        final symlink)."""
        return self._open_own(path, _READ_FLAGS, stat.S_IFREG)

    def read_own(self, path: str, *, limit: int | None = None) -> bytes:
        """The content of the daemon file at ``path`` (at most ``limit`` bytes)."""
        fd = self.open_own(path)
        try:
            chunks: list[bytes] = []
            size = 0
            while limit is None or size < limit:
                chunk = os.read(fd, 1024 * 1024 if limit is None else limit - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks)
        finally:
            os.close(fd)

    def append_own(self, path: str, data: bytes) -> None:
        """Append ``data`` to the daemon file at ``path`` (which must exist)."""
        fd = self._open_own(path, _APPEND_FLAGS, stat.S_IFREG)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    def exists_own(self, path: str) -> bool:
        """Whether anything is at ``path`` (a final symlink counts, unfollowed)."""
        with self._box.root() as root:
            try:
                safefs.stat_path(root, self.absolute(path), follow=False)
            except (OSError, safefs.PathRefused):
                return False
        return True

    def make_fifos(self, directory: str, names: tuple[str, ...]) -> None:
        """Make the FIFOs ``names`` (owner-only, the sandbox user's like every file made
        through the box) in the existing daemon directory ``directory``;
        FileExistsError if one of them exists."""
        with self._box.root() as root:
            where = safefs.resolve(root, self.absolute(directory), follow=False)
            try:
                folder = os.open(
                    where.name,
                    os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                    dir_fd=where.parent,
                )
            finally:
                where.close()
            try:
                for name in names:
                    os.mkfifo(name, 0o600, dir_fd=folder)
            finally:
                os.close(folder)

    def open_fifo(self, path: str) -> int:
        """A non-blocking write descriptor of the FIFO at ``path``.

        OSError ENXIO when no process has it open for reading (the open never
        waits for one); PathRefused if it is not a FIFO.
        """
        return self._open_own(path, _FIFO_FLAGS, stat.S_IFIFO)


def _make_directory(where: safefs.Resolved, mode: int) -> None:
    """``mkdir`` the resolved ``where`` with ``mode`` unless it is a directory already."""
    if where.name == ".":
        return
    try:
        os.mkdir(where.name, mode, dir_fd=where.parent)
    except FileExistsError:
        if not stat.S_ISDIR(os.stat(where.name, dir_fd=where.parent).st_mode):
            raise NotADirectoryError(errno.ENOTDIR, "not a directory", where.path) from None


def _names(folder: int) -> list[str]:
    """The names in the open directory ``folder``, sorted; none if it cannot be read."""
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []
