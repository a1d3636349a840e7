"""How many finished sessions, and how many of their bytes, the agent keeps on disk.

A journaled session's directory (``sessions/<id>/``: spec, journal, exit
record) is what ``list_sessions`` lists and ``attach`` replays. Without a
bound, every session ever spawned would stay until the sandbox is destroyed.
:class:`Retention` keeps at most ``bound`` *finished* sessions (those with an
exit record), whose files take at most ``byte_bound`` bytes together, and
removes the ones that finished longest ago first until both bounds hold (so a
finished session larger than ``byte_bound`` on its own is removed too); a
session that has not finished is never removed, nor counted. A bound of None
does not limit.

The agent calls :meth:`Retention.finished` when it records an end, before it
sends the end to any subscriber, so a client that has seen a session's end
also sees the sessions it displaced gone. The order of sessions that finished
under an earlier agent comes from their exit records' modification times; a
session's size is that of its files (:func:`session_bytes`) when it finished,
or when the agent found it finished.

Removal works from the state directory's descriptor and never follows a
link: the spec is removed first (from then on the session is neither listed
nor attachable), then the journal and the exit record, then the directory.
A subscriber still streaming a removed session from the agent keeps reading
the journal through the descriptor the agent holds.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque

from .agent_process import EXIT, SESSIONS, SPEC

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def finished_on_disk(state_fd: int) -> list[str]:
    """Ids of the sessions under ``state_fd`` that have an exit record, oldest end first."""
    try:
        sessions = os.open(SESSIONS, _DIR, dir_fd=state_fd)
    except OSError:
        return []
    try:
        ended: list[tuple[int, str]] = []
        for sid in os.listdir(sessions):
            try:
                moment = os.stat(f"{sid}/{EXIT}", dir_fd=sessions, follow_symlinks=False)
            except OSError:
                continue
            ended.append((moment.st_mtime_ns, sid))
    finally:
        os.close(sessions)
    return [sid for _, sid in sorted(ended)]


def session_bytes(state_fd: int, sid: str) -> int:
    """The bytes the files of ``sessions/<sid>`` take (apparent sizes; 0 if unreadable)."""
    try:
        directory = os.open(f"{SESSIONS}/{sid}", _DIR, dir_fd=state_fd)
    except OSError:
        return 0
    try:
        total = 0
        for name in os.listdir(directory):
            with contextlib.suppress(OSError):
                total += os.stat(name, dir_fd=directory, follow_symlinks=False).st_size
        return total
    finally:
        os.close(directory)


def remove_session(state_fd: int, sid: str) -> None:
    """Remove ``sessions/<sid>`` (spec first); whatever cannot be removed is left."""
    path = f"{SESSIONS}/{sid}"
    try:
        directory = os.open(path, _DIR, dir_fd=state_fd)
    except FileNotFoundError:
        return
    except OSError:
        # Not a directory (a link put in its place, say): remove the entry itself.
        with contextlib.suppress(OSError):
            os.unlink(path, dir_fd=state_fd)
        return
    try:
        names = sorted(os.listdir(directory), key=lambda name: name != SPEC)
        for name in names:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=directory)
    finally:
        os.close(directory)
    with contextlib.suppress(OSError):
        os.rmdir(path, dir_fd=state_fd)


def _checked(bound: int | None, what: str) -> int | None:
    if bound is not None and (isinstance(bound, bool) or not isinstance(bound, int) or bound < 0):
        raise ValueError(f"the {what} must be an int >= 0 or None, got {bound!r}")
    return bound


class Retention:
    """The finished sessions of one state directory, oldest end first, and their bounds."""

    def __init__(self, state_fd: int) -> None:
        self._state = state_fd
        self._finished: deque[tuple[str, int]] = deque(
            (sid, session_bytes(state_fd, sid)) for sid in finished_on_disk(state_fd)
        )
        self._bytes = sum(size for _, size in self._finished)
        self.bound: int | None = None
        self.byte_bound: int | None = None

    def set_bound(self, bound: int | None, byte_bound: int | None = None) -> None:
        """Keep at most ``bound`` finished sessions taking at most ``byte_bound`` bytes
        from now on (None: no limit); prunes at once. ValueError for a bound that is
        not an int >= 0 or None (neither bound is then changed)."""
        bound = _checked(bound, "retention bound")
        self.byte_bound = _checked(byte_bound, "retention byte bound")
        self.bound = bound
        self.prune()

    def finished(self, sid: str) -> None:
        """Session ``sid`` has just ended (its exit recorded); prunes."""
        size = session_bytes(self._state, sid)
        self._finished.append((sid, size))
        self._bytes += size
        self.prune()

    def prune(self) -> None:
        """Remove the sessions that finished longest ago until both bounds hold."""
        while self._finished and (
            (self.bound is not None and len(self._finished) > self.bound)
            or (self.byte_bound is not None and self._bytes > self.byte_bound)
        ):
            sid, size = self._finished.popleft()
            self._bytes -= size
            remove_session(self._state, sid)
