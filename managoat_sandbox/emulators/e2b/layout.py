"""Where an emulated sandbox lives on disk, and how sandbox paths map onto it.

::

    <workdir>/<sandbox id>/
      fs/                 the sandbox's file system root: "/x" is fs/x
        home/<user>/      a user's home (root's is fs/root): cwd and HOME of its commands
        tmp/
      procs/<n>/          one process-engine session per started process

Paths given to ``/files`` and a Start request's ``cwd`` are sandbox paths:
absolute ones are taken under ``fs/``, relative and ``~/`` ones under the
user's home. ``..`` never climbs above ``fs/``. Command arguments are not
rewritten: a command that names an absolute path sees the host's file system
(the emulator runs real processes without a chroot).
"""

from __future__ import annotations

import posixpath
from pathlib import Path

__all__ = ["SandboxLayout"]


class SandboxLayout:
    """The directories of one sandbox under the emulator's workdir."""

    def __init__(self, root: Path, users: tuple[str, ...]) -> None:
        self.root = root
        self.fs = root / "fs"
        self.procs = root / "procs"
        for user in users:
            self.home(user).mkdir(parents=True, exist_ok=True)
        (self.fs / "tmp").mkdir(parents=True, exist_ok=True)
        self.procs.mkdir(parents=True, exist_ok=True)

    def home_path(self, user: str) -> str:
        """The sandbox path of ``user``'s home."""
        return "/root" if user == "root" else f"/home/{user}"

    def home(self, user: str) -> Path:
        """The host directory of ``user``'s home."""
        return self.host(self.home_path(user), user)

    def sandbox_path(self, path: str, user: str) -> str:
        """The absolute, normalised sandbox path of ``path`` as ``user`` means it."""
        if path == "~" or path.startswith("~/"):
            path = self.home_path(user) + path[1:]
        elif not path.startswith("/"):
            path = f"{self.home_path(user)}/{path}"
        return posixpath.normpath("/" + path.lstrip("/"))

    def host(self, path: str, user: str) -> Path:
        """The host path behind sandbox path ``path``; never outside ``fs/``."""
        absolute = self.sandbox_path(path, user)
        return self.fs / absolute.lstrip("/") if absolute != "/" else self.fs

    def inside(self, host_path: Path) -> bool:
        """Whether ``host_path`` (symlinks resolved) is still within ``fs/``."""
        return host_path.resolve().is_relative_to(self.fs.resolve())
