"""Sessions created ahead for spawns: the next spawn's session exists before it is asked for.

Every spawn runs in a toolbox session of its own (docs/protocols/daytona.md#sessions),
and creating one is a request to the daemon, which starts its shell. Made when
the spawn is asked for, it is one more round trip before the command starts.
So once a spawned command is under way in a sandbox (its first output
arrived, its follow stayed quiet for a polling interval, or it ended: the
creation then does not compete with the command's own start), the session
for the next spawn there is created in the background
(:meth:`SpareSessions.refill`); the next spawn takes it
(:meth:`SpareSessions.take`) and starts its command at once. There is at
most one such *spare* per sandbox, and one creation in flight. A spawn that
finds the creation still in flight waits for it (it has a head start on any
session the spawn could create itself); one that finds neither (the first,
or one of several at once) creates its session itself, as before.

A spare is a session whose shell runs nothing. Its id has the spawns' prefix,
since it becomes a spawn's session and that id its ``Command.session_id``;
``list_sessions`` leaves out sessions that have run no command, so a spare is
never listed, and ``attach`` to one is ``NotFound`` as for any session
without a command. A spare is never leaked:

* taken, it is the spawn's, which deletes it when the command cannot be
  started there;
* lost (the daemon restarted, or someone deleted it), the spawn's request is
  refused before anything ran (:func:`.errors.exec_refused`) and the spawn
  runs in a new session;
* a sandbox destroyed or stopped ends its sessions: its holder is closed
  without a request (:meth:`SpareSessions.close` with ``delete=False``);
* a holder given up for any other reason (the sandbox's toolbox moved)
  deletes its spare;
* a creation that completes after its holder was closed deletes what it made;
* at interpreter exit every holder with a spare is closed and the spare
  deleted, and creations still in flight are waited for (they then delete
  theirs), all within :data:`EXIT_WAIT` seconds (:func:`delete_spares`).
  Holders are kept for that only while they have a spare ready or being
  created.

Creations run on short-lived daemon threads named ``daytona-spare-session``;
each ends after its request (and releases its thread's connections).
"""

from __future__ import annotations

import atexit
import logging
import secrets
import threading
import time

from ...errors import Invalid, SandboxError
from .errors import is_status
from .toolbox import Toolbox

__all__ = ["EXIT_WAIT", "SpareSessions", "delete_spares"]

log = logging.getLogger("managoat_sandbox.daytona")

#: How long, at most, interpreter exit waits for spares to be deleted (in seconds).
EXIT_WAIT = 5.0
_THREAD_NAME = "daytona-spare-session"

#: Every holder with a spare ready or being created (what exit must delete), under
#: ``_open_lock`` (taken inside a holder's own lock, never around it). A holder with
#: nothing pending is not kept here, so that one its adapter dropped can be collected.
_open: set[SpareSessions] = set()
_open_lock = threading.Lock()


class SpareSessions:
    """The session created ahead for the next spawn in one sandbox (``toolbox``), whose
    ids start with ``prefix``. Thread-safe."""

    def __init__(self, toolbox: Toolbox, *, prefix: str) -> None:
        self.toolbox = toolbox
        self.prefix = prefix
        self._ready: str | None = None
        self._creating: threading.Thread | None = None
        #: Whether a taker waits for the creation in flight (one may: it is one session).
        self._awaited = False
        self._closed = False
        self._lock = threading.Lock()

    def new_id(self) -> str:
        """A fresh session id for a spawn."""
        return self.prefix + secrets.token_hex(12)

    def take(self) -> str | None:
        """The spare's session id, which is now the caller's. When none is ready but one
        is being created and no other caller waits for it, it is waited for (as long as
        its creation request may take). None when there is none to have."""
        with self._lock:
            found, self._ready = self._ready, None
            creating = None if found is not None or self._awaited else self._creating
            self._awaited = creating is not None
            self._track()
        if creating is None:
            return found
        try:
            creating.join()
        finally:
            with self._lock:
                self._awaited = False
                found, self._ready = self._ready, None
                self._track()
        return found

    def refill(self) -> None:
        """Create the next spare in the background, unless one is ready or on its way, or
        this holder is closed."""
        with self._lock:
            if self._closed or self._ready is not None or self._creating is not None:
                return
            # Started under the lock, so that a taker never finds it unstarted.
            self._creating = threading.Thread(target=self._create, name=_THREAD_NAME, daemon=True)
            self._creating.start()
            self._track()

    def close(self, *, delete: bool) -> None:
        """Make no more spares. The ready one is deleted when ``delete`` (else left to
        the sandbox, which is being destroyed or stopped and ends it); one still being
        created is deleted by its creation. Failures are only logged."""
        with self._lock:
            self._closed = True
            found, self._ready = self._ready, None
            self._track()
        if found is not None and delete:
            self._delete(found)

    def join(self, timeout: float) -> None:
        """Wait at most ``timeout`` seconds for a creation in flight to end."""
        with self._lock:
            thread = self._creating
        if thread is not None:
            thread.join(timeout)

    def _create(self) -> None:
        """The creation thread: make a spare and keep it, or delete it (closed meanwhile)."""
        session_id: str | None = None
        try:
            session_id = self._made()
        finally:
            with self._lock:
                self._creating = None
                kept = session_id is not None and not self._closed
                if kept:
                    self._ready = session_id
                self._track()
            try:
                if session_id is not None and not kept:
                    self._delete(session_id)
            finally:
                self.toolbox.api.http.release()

    def _track(self) -> None:
        """Keep this holder among those exit cleans up while it has a spare ready or being
        created (and not otherwise). Called under ``self._lock``."""
        with _open_lock:
            if self._ready is not None or self._creating is not None:
                _open.add(self)
            else:
                _open.discard(self)

    def _made(self) -> str | None:
        """A new session's id, or None when it could not be created (logged)."""
        session_id = self.new_id()
        try:
            self.toolbox.create_session(session_id)
        except Invalid as error:
            if not is_status(error, 409):  # 409: a retried create that had succeeded
                log.debug("daytona: creating a spare session failed: %r", error)
                return None
        except SandboxError as error:
            log.debug("daytona: creating a spare session failed: %r", error)
            return None
        return session_id

    def _delete(self, session_id: str) -> None:
        try:
            self.toolbox.delete_session(session_id)
        except SandboxError as error:
            log.debug("daytona: deleting the spare session %s failed: %r", session_id, error)


def delete_spares(wait: float = EXIT_WAIT) -> None:
    """Close every holder with a spare ready or being created, deleting the spare, and
    wait for the creations still in flight (each deletes what it made), all within
    ``wait`` seconds. Runs at
    interpreter exit; the work is done on a daemon thread, so that an unreachable
    daemon cannot hold the exit past ``wait``."""
    with _open_lock:
        holders = list(_open)
    if not holders:
        return
    deadline = time.monotonic() + wait

    def work() -> None:
        for holder in holders:
            holder.close(delete=True)
        for holder in holders:
            holder.join(max(0.0, deadline - time.monotonic()))

    worker = threading.Thread(target=work, name=_THREAD_NAME, daemon=True)
    worker.start()
    worker.join(wait)


atexit.register(delete_spares)
