"""Finding and ending the processes one emulator started, by the marker they carry.

Every process an emulator starts for a sandbox carries ``<MARKER_ENV>=<marker>``
in its environment, the marker being unique to that emulator instance. When
the emulator stops, after each sandbox's own shutdown, :func:`end_marked`
looks in ``/proc`` for processes (of this user: others' environments cannot
be read) that still carry it and kills them, so that nothing the emulator
started outlives it even if a sandbox's shutdown missed something. A command
that scrubs its own environment escapes this net; the sandbox's shutdown
(its process namespace, or the agent's tree walk) still applies to it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

__all__ = ["end_marked", "marked_processes"]

_PROC = "/proc"
_SETTLE = 5.0


def _carries(pid: int, needle: bytes) -> bool:
    try:
        with open(f"{_PROC}/{pid}/environ", "rb") as file:
            environ = file.read()
    except OSError:
        return False
    return needle in environ.split(b"\0")


def marked_processes(name: str, marker: str) -> list[int]:
    """Pids of this user's processes whose environment holds ``name=marker``."""
    needle = f"{name}={marker}".encode()
    me = os.getpid()
    found = []
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit() and int(entry) != me and _carries(int(entry), needle):
            found.append(int(entry))
    return found


def end_marked(name: str, marker: str) -> list[int]:
    """Kill (SIGKILL) every process carrying ``name=marker`` and wait, bounded, until
    none is left; the pids that were killed. Each is re-checked through a pidfd
    before the signal, so a pid reused meanwhile is never hit."""
    needle = f"{name}={marker}".encode()
    killed: list[int] = []
    deadline = time.monotonic() + _SETTLE
    while time.monotonic() < deadline:
        alive = marked_processes(name, marker)
        if not alive:
            break
        for pid in alive:
            if _kill_if_marked(pid, needle):
                killed.append(pid)
        time.sleep(0.01)
    return killed


def _kill_if_marked(pid: int, needle: bytes) -> bool:
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False
    try:
        if not _carries(pid, needle):
            return False
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(handle, signal.SIGKILL)
            return True
        return False
    finally:
        os.close(handle)
