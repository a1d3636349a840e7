"""bubblewrap mounts, and the host system directories every isolated sandbox gets."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Mount:
    """One bubblewrap mount: ``kind`` is ro-bind, symlink, proc, dev or tmpfs.

    For ``symlink``, ``source`` is the link's target.
    """

    kind: str
    dest: str
    source: str = ""

    def args(self) -> list[str]:
        if self.kind in ("ro-bind", "symlink"):
            return [f"--{self.kind}", self.source, self.dest]
        return [f"--{self.kind}", self.dest]

    def node(self) -> str:
        """What may already be at ``dest`` under the new root: dir, file or symlink."""
        if self.kind == "symlink":
            return "symlink"
        if self.kind == "ro-bind" and not os.path.isdir(self.source):
            return "file"
        return "dir"


def system_mounts() -> list[Mount]:
    """The host's ``/usr`` and its top-level aliases (``/bin``, ``/lib``…) as the host has
    them, read-only."""
    found = [Mount("ro-bind", "/usr", "/usr")]
    for name in ("bin", "sbin", "lib", "lib32", "lib64", "libx32"):
        host = Path("/") / name
        if host.is_symlink():
            found.append(Mount("symlink", f"/{name}", os.readlink(host)))
        elif host.is_dir():
            found.append(Mount("ro-bind", f"/{name}", str(host)))
    return found


def args(mounts: list[Mount]) -> list[str]:
    """The bubblewrap arguments for ``mounts``, in order."""
    return [arg for mount in mounts for arg in mount.args()]
