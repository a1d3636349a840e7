"""Signalling every process of a sandbox.

Inside its own PID namespace the agent is process 1 and ``kill(-1, sig)``
reaches exactly the sandbox's other processes: the kernel confines ``-1`` to
the namespace and handles a concurrent fork (the child inherits the pending
signal). Without a PID namespace (``isolation="off"``) the agent is a child
subreaper instead, so every descendant that is orphaned is re-parented to it,
and its descendants are found through ``/proc`` (``ps`` where there is none). :func:`signal_sandbox`
picks the right one and refuses ``kill(-1)`` anywhere but process 1, where it
would reach every process of the user.
"""

from __future__ import annotations

import contextlib
import os
import subprocess

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

_ROUNDS = 20


def _parent_map() -> dict[int, int]:
    if not os.path.isdir("/proc/self"):
        return _parent_map_from_ps()
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                text = stat.read(4096)
        except OSError:
            continue
        # The command name may contain spaces and parentheses: the fields
        # after the last ")" are "state ppid ...".
        fields = text[text.rfind(b")") + 2 :].split()
        if len(fields) >= 2:
            parents[int(entry)] = int(fields[1])
    return parents


def _parent_map_from_ps() -> dict[int, int]:
    """Where there is no ``/proc`` (macOS): ``ps`` lists every process and its parent."""
    listing = subprocess.run(
        ["ps", "-A", "-o", "pid=,ppid="], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    parents: dict[int, int] = {}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            parents[int(fields[0])] = int(fields[1])
    return parents


def descendants(root: int) -> list[int]:
    """Every live descendant of process ``root`` (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parent_map().items():
        children.setdefault(parent, []).append(pid)
    found: list[int] = []
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child in children.get(pid, ()):
            found.append(child)
            frontier.append(child)
    return found


def send(pids: Iterable[int], sig: int) -> int:
    """Send ``sig`` to each of ``pids``; how many were sent (gone or foreign ones are not)."""
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def signal_sandbox(sig: int, *, namespace: bool) -> None:
    """Send ``sig`` to every process of the sandbox but the calling agent.

    ``namespace``: the agent is process 1 of the sandbox's own PID namespace.
    Otherwise descendants are signalled until a round finds none that was not
    signalled yet (bounded), so processes forked meanwhile are caught too.
    """
    if namespace:
        if os.getpid() != 1:
            raise RuntimeError("kill(-1) outside a PID namespace would reach the whole user")
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, sig)
        return
    seen: set[int] = set()
    for _ in range(_ROUNDS):
        fresh = [pid for pid in descendants(os.getpid()) if pid not in seen]
        if not fresh:
            return
        send(fresh, sig)
        seen.update(fresh)


def start_time(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks since boot), or None if it does not exist.

    With the pid, it identifies a process across pid reuse.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read(4096)
    except OSError:
        return None
    fields = text[text.rfind(b")") + 2 :].split()
    return int(fields[19]) if len(fields) > 19 else None
