"""A ``pids`` cgroup per sandbox, where the kernel would not apply ``RLIMIT_NPROC``.

The kernel never limits the processes of root, so when the library runs as
root the process limit is enforced with a cgroup v1 ``pids`` controller
instead (root may create cgroups there). Elsewhere this module does nothing:
an unprivileged user's processes are limited by ``RLIMIT_NPROC``, and cgroup
v2 delegation is not attempted.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

BASE = Path("/sys/fs/cgroup/pids/managoat_sandbox")
_RETRY = 0.01


def create(box_id: str, processes: int) -> Path | None:
    """A fresh ``pids`` cgroup allowing ``processes`` tasks, or None where not applicable.

    Each start of a sandbox gets its own cgroup (the keeper of the previous one
    may still be removing its own).
    """
    if os.geteuid() != 0 or not (BASE.parent / "cgroup.procs").is_file():
        return None
    path = BASE / f"{box_id}-{secrets.token_hex(4)}"
    try:
        path.mkdir(parents=True)
        (path / "pids.max").write_text(str(processes))
    except OSError:
        return None
    return path


def join(path: Path, pid: int) -> None:
    """Move process ``pid`` into ``path`` (its children are born there); OSError if the
    kernel refuses. For a process held before it runs anything (see :mod:`.launch`)."""
    (path / "cgroup.procs").write_text(str(pid))


def remove_when_empty(path: Path, *, timeout: float = 10.0) -> None:
    """Remove ``path`` once its last process has gone (bounded; the keeper calls this
    when its sandbox's agent has exited, and bubblewrap follows it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(_RETRY)


def process_limit_enforced(isolated: bool) -> bool:
    """Whether a sandbox's ``processes`` limit binds here: isolated, and either not root
    (``RLIMIT_NPROC`` in its user namespace) or root with a ``pids`` hierarchy."""
    if not isolated:
        return False
    return os.geteuid() != 0 or (BASE.parent / "cgroup.procs").is_file()
