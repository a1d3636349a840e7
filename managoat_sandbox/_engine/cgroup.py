"""A ``pids`` cgroup per sandbox, where the kernel would not apply ``RLIMIT_NPROC``.

The kernel never limits the processes of root, so when the library runs as
root the process limit is enforced with a cgroup v1 ``pids`` controller
instead (root may create cgroups there). Elsewhere this module does nothing:
an unprivileged user's processes are limited by ``RLIMIT_NPROC``, and cgroup
v2 delegation is not attempted.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

BASE = Path("/sys/fs/cgroup/pids/managoat_sandbox")


def create(box_id: str, processes: int) -> Path | None:
    """A fresh ``pids`` cgroup allowing ``processes`` tasks, or None where not applicable."""
    if os.geteuid() != 0 or not (BASE.parent / "cgroup.procs").is_file():
        return None
    path = BASE / box_id
    try:
        path.mkdir(parents=True, exist_ok=True)
        (path / "pids.max").write_text(str(processes))
    except OSError:
        return None
    return path


def join(path: Path) -> None:
    """Move the calling process into ``path`` (its children follow)."""
    (path / "cgroup.procs").write_text(str(os.getpid()))


def remove(box_id: str) -> None:
    """Remove the sandbox's cgroup once its processes are gone; a no-op elsewhere."""
    with contextlib.suppress(OSError):
        (BASE / box_id).rmdir()
