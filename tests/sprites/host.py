"""What the host sees of a sprite's processes (for tests that look from outside the box).

A sprite's processes may live in their own PID namespace, so their pids inside
mean nothing here; tests find them by a marker in their command line instead.
"""

from __future__ import annotations

import os


def host_pids(marker: str) -> list[int]:
    """Host pids of the live processes whose command line contains ``marker`` (a child
    forked but not yet executing its program still shows its parent's)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if marker.encode() in cmdline.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def marked_process(marker: str) -> int | None:
    """The host pid of the one process whose command line contains ``marker`` and whose
    parent's does not (None if there is no such process)."""
    pids = host_pids(marker)
    roots = [pid for pid in pids if _parent(pid) not in pids]
    return roots[0] if len(roots) == 1 else None


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def process_state(pid: int) -> str:
    """The state letter of host process ``pid`` (``T`` when stopped); FileNotFoundError if gone."""
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0]
