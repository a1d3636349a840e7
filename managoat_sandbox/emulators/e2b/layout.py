"""Where an emulated sandbox lives: one engine box, and how envd's users and paths map into it.

::

    <workdir>/sandboxes/<sandbox id>/    one box (:mod:`managoat_sandbox._engine.box`)
      fs/       the sandbox's files: its ``/`` (``/home/<user>``, ``/root``, ``/tmp``...)
      state/    the engine's records and journals, never visible to commands

Every directory the emulator makes there (and the workdir, when it makes it)
is its user's alone (``0700``, :func:`~managoat_sandbox.emulators._fs.private_dirs`).

Commands run inside the box: isolated under bubblewrap when the host can
(:func:`managoat_sandbox._engine.isolation.support`), so every absolute path
a command uses is the sandbox's own, ``/proc`` shows only its processes and
the pids envd reports are the in-sandbox ones. Without isolation (no
unprivileged user namespaces) commands are plain host processes whose cwd
and ``HOME`` lie under ``fs/``, and an absolute path in a command is then the
host's.

Paths given to ``/files`` and a Start request's ``cwd`` are sandbox paths:
relative and ``~/`` ones are under the requesting user's home, ``..`` never
climbs above ``/``. The emulator reaches them only through
:mod:`~managoat_sandbox._engine.safefs`, which resolves symlinks a command
planted inside the sandbox's root, as a process inside would.

Users: envd accepts the users the emulator was given. A box has exactly one
uid: 1000, named after the first of them that is not ``root`` (``user`` by
default), with its home at ``/home/<name>``. Every other accepted user has a
home of its own (``/root`` for ``root``) and its commands get that ``HOME``,
``USER`` and ``LOGNAME`` but **still run as uid 1000**: a process started
"as root" cannot do what root could (it cannot write the read-only system
directories, for one). Real E2B runs such a process as uid 0.
"""

from __future__ import annotations

import contextlib
import posixpath
import re
from collections.abc import Mapping
from pathlib import Path

from ..._engine import isolation, safefs, trees
from ..._engine.box import Box
from ..._engine.settings import BoxSettings, hostname_for
from .._fs import PRIVATE
from .._input import BadInput

__all__ = ["SandboxBox", "box_user", "check_users"]

BOX_UID = 1000
_DEFAULT_USER = "user"
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}\Z")


def box_user(users: tuple[str, ...]) -> str:
    """The name of the box's one uid: the first accepted user that is not ``root``."""
    return next((user for user in users if user != "root"), _DEFAULT_USER)


def check_users(users: tuple[str, ...]) -> None:
    """ValueError unless ``users`` is a non-empty tuple of Linux user names."""
    if not users:
        raise ValueError("at least one user is needed")
    for user in users:
        if not _USER.match(user):
            raise ValueError(f"bad user name {user!r}")


class SandboxBox:
    """One sandbox's box, the homes of envd's users and host-side access to its files."""

    def __init__(self, box: Box, users: tuple[str, ...]) -> None:
        self.box = box
        self.users = users
        self._masked = box.masked()

    @classmethod
    def create(cls, directory: Path, sandbox_id: str, users: tuple[str, ...]) -> SandboxBox:
        """Make ``directory`` (which must not exist), start its box and lay out every
        user's home (blocking): OSError or EngineError if it cannot, and then nothing
        is left behind."""
        check_users(users)
        name = box_user(users)
        settings = BoxSettings(
            isolated=isolation.support().available,
            hostname=hostname_for(sandbox_id),
            user=name,
            uid=BOX_UID,
            home=f"/home/{name}",
        )
        directory.mkdir(mode=PRIVATE)
        try:
            box = Box.create(directory, settings)
            sandbox = cls(box, users)
            with sandbox.root() as root_fd:
                for user in (*users, "root"):
                    safefs.make_dirs(root_fd, sandbox.home_path(user), masked=sandbox._masked)
        except BaseException:
            with contextlib.suppress(Exception):
                Box(directory, settings).delete()
            trees.discard(directory)
            raise
        return sandbox

    # -- users and paths ---------------------------------------------------------------

    def home_path(self, user: str) -> str:
        """The sandbox path of ``user``'s home (``/root`` for root, else ``/home/<user>``)."""
        return "/root" if user == "root" else f"/home/{user}"

    def sandbox_path(self, path: str, user: str) -> str:
        """The absolute, normalised sandbox path of ``path`` as ``user`` means it;
        :class:`~.._input.BadInput` (a 400) if it holds a NUL, which no path can."""
        if "\0" in path:
            raise BadInput("a path may not hold a NUL character")
        if path == "~" or path.startswith("~/"):
            path = self.home_path(user) + path[1:]
        elif not path.startswith("/"):
            path = f"{self.home_path(user)}/{path}"
        return posixpath.normpath("/" + path.lstrip("/"))

    def command_path(self, path: str, user: str) -> str:
        """The path a command uses for sandbox path ``path`` (itself when isolated)."""
        return self.box.agent_path(self.sandbox_path(path, user))

    def environment(self, user: str, extra: Mapping[str, str], *, tty: bool) -> dict[str, str]:
        """A command's environment for ``user``: the box's base, that user's ``HOME``,
        ``USER`` and ``LOGNAME``, then ``extra``."""
        identity = {
            "HOME": self.command_path(self.home_path(user), user),
            "USER": user,
            "LOGNAME": user,
        }
        return self.box.environment({**identity, **extra}, tty=tty)

    # -- files (sandbox paths, absolute) -------------------------------------------------

    def root(self) -> contextlib.AbstractContextManager[int]:
        """A descriptor of the sandbox's root directory, closed on exit."""
        return self.box.root()

    def read_file(self, path: str) -> bytes:
        """The content of the regular file at ``path``; FileNotFoundError or
        :class:`~managoat_sandbox._engine.safefs.PathRefused` as safefs says."""
        with self.root() as root_fd:
            return safefs.read_file(root_fd, path)

    def write_file(self, path: str, data: bytes, xattrs: Mapping[str, bytes] | None = None) -> None:
        """Replace the file at ``path`` with ``data`` (and the extended attributes
        ``xattrs``), creating its parents (PathRefused ``is_directory``,
        ``read_only``... as safefs says)."""
        with self.root() as root_fd:
            safefs.write_file(root_fd, path, data, masked=self._masked, xattrs=xattrs)

    def make_dirs(self, path: str) -> bool:
        """Create the directory at ``path`` and its parents; False if it already was one
        (PathRefused ``not_a_directory`` for a file there, ``read_only``... as safefs says)."""
        with self.root() as root_fd:
            return safefs.make_dirs(root_fd, path, masked=self._masked)

    def remove(self, path: str) -> None:
        """Remove the file, symlink (itself) or whole directory tree at ``path``
        (FileNotFoundError if nothing is there; PathRefused ``is_root``... as safefs says)."""
        with self.root() as root_fd:
            safefs.remove(root_fd, path, masked=self._masked)

    def rename(self, source: str, target: str) -> None:
        """Move ``source`` (a final symlink itself) to ``target``, creating its parents
        (FileNotFoundError if ``source`` is missing; PathRefused as safefs says)."""
        with self.root() as root_fd:
            safefs.rename(root_fd, source, target, masked=self._masked)

    def exists(self, path: str) -> bool:
        """Whether anything is at ``path`` (a final symlink counts, dangling or not)."""
        with self.root() as root_fd:
            try:
                safefs.stat_path(root_fd, path, follow=False)
            except (FileNotFoundError, safefs.PathRefused):
                return False
            return True

    # -- the end -----------------------------------------------------------------------------

    def destroy(self) -> None:
        """Stop the box (every process of the sandbox ends) and delete its directory."""
        if not self.box.delete():
            trees.discard(self.box.directory)
