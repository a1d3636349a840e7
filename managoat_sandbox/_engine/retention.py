"""How many finished sessions the agent keeps on disk.

A journaled session's directory (``sessions/<id>/``: spec, journal, exit
record) is what ``list_sessions`` lists and ``attach`` replays. Without a
bound, every session ever spawned would stay until the sandbox is destroyed.
:class:`Retention` keeps at most ``bound`` *finished* sessions (those with an
exit record) and removes the ones that finished longest ago first; a session
that has not finished is never removed. ``bound`` None keeps every session.

The agent calls :meth:`Retention.finished` when it records an end, before it
sends the end to any subscriber, so a client that has seen a session's end
also sees the sessions it displaced gone. The order of sessions that finished
under an earlier agent comes from their exit records' modification times.

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


class Retention:
    """The finished sessions of one state directory, oldest end first, and their bound."""

    def __init__(self, state_fd: int) -> None:
        self._state = state_fd
        self._finished: deque[str] = deque(finished_on_disk(state_fd))
        self.bound: int | None = None

    def set_bound(self, bound: int | None) -> None:
        """Keep at most ``bound`` finished sessions from now on (None: all); prunes at once."""
        if bound is not None and (
            isinstance(bound, bool) or not isinstance(bound, int) or bound < 0
        ):
            raise ValueError(f"the retention bound must be an int >= 0 or None, got {bound!r}")
        self.bound = bound
        self.prune()

    def finished(self, sid: str) -> None:
        """Session ``sid`` has just ended (its exit recorded); prunes."""
        self._finished.append(sid)
        self.prune()

    def prune(self) -> None:
        """Remove the sessions that finished longest ago until at most ``bound`` remain."""
        if self.bound is None:
            return
        while len(self._finished) > self.bound:
            remove_session(self._state, self._finished.popleft())
