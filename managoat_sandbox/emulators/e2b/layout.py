"""Where an emulated sandbox lives on disk, and how sandbox paths map onto it.

::

    <workdir>/<sandbox id>/
      fs/                 the sandbox's file system root: "/x" is fs/x
        home/<user>/      a user's home (root's is fs/root): cwd and HOME of its commands
        tmp/
      procs/<n>/          one process-engine session per started process

Paths given to ``/files`` and a Start request's ``cwd`` are sandbox paths:
absolute ones are taken under ``fs/``, relative and ``~/`` ones under the
user's home. ``..`` never climbs above ``fs/``.

Commands see those paths in one of two ways:

* mapped (the default, portable): commands run on the host file system with
  their cwd and ``HOME`` set to the host directory of the user's home, so
  relative paths agree with ``/files`` but an absolute ``/tmp/x`` in a
  command is the host's ``/tmp/x``;
* isolated (``isolated=True``; needs root and ``unshare``): each command runs
  in its own mount namespace where ``fs/home``, ``fs/root`` and ``fs/tmp``
  are bind-mounted on ``/home``, ``/root`` and ``/tmp``, so ``/home/user``
  and ``/tmp`` mean the same to a command and to ``/files``, as in a real
  sandbox (other absolute paths are still the host's, read-write).
"""

from __future__ import annotations

import os
import posixpath
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

__all__ = ["SandboxLayout", "isolation_available"]

_BOUND = ("/home", "/root", "/tmp")
#: Run inside ``unshare --mount``: bind the sandbox's directories, enter the cwd, exec argv.
_ISOLATE = (
    'fs=$1; cwd=$2; shift 2; mount --bind "$fs/home" /home && mount --bind "$fs/root" /root'
    ' && mount --bind "$fs/tmp" /tmp && cd "$cwd" && exec "$@"'
)


def isolation_available() -> bool:
    """Whether commands can get a private mount namespace here (root and ``unshare``)."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "true"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10, check=False)
    return probe.returncode == 0


class SandboxLayout:
    """The directories of one sandbox under the emulator's workdir."""

    def __init__(self, root: Path, users: tuple[str, ...], *, isolated: bool = False) -> None:
        self.root = root
        self.fs = root / "fs"
        self.procs = root / "procs"
        self.isolated = isolated
        for user in (*users, "root"):
            self.home(user).mkdir(parents=True, exist_ok=True)
        (self.fs / "tmp").mkdir(parents=True, exist_ok=True)
        (self.fs / "tmp").chmod(0o1777)
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

    def command(self, argv: Sequence[str], cwd: str, user: str) -> tuple[list[str], Path, str]:
        """The argv to run, the host cwd to start it in and its ``HOME``.

        ``argv`` is run as envd does, through ``/bin/sh -c 'exec "$@"'``;
        ``cwd`` is a sandbox path.
        """
        host_cwd = self.host(cwd, user)
        if not self.isolated:
            return ["/bin/sh", "-c", 'exec "$@"', "--", *argv], host_cwd, str(self.home(user))
        inner = self.sandbox_path(cwd, user)
        if not any(inner == top or inner.startswith(top + "/") for top in _BOUND):
            inner = str(host_cwd)
        wrapped = ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", _ISOLATE,
                   "--", str(self.fs), inner, *argv]
        return wrapped, host_cwd, self.home_path(user)
