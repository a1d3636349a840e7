"""TTL heartbeats: a sandbox with a live command keeps getting its TTL renewed.

Every running E2B sandbox dies (here: auto-pauses) when its TTL runs out, even
while a command streams. :class:`Heartbeats` keeps one daemon thread per
sandbox that has at least one live command; every ``interval`` seconds it calls
``send(sandbox_id)`` (which renews the TTL) while the sandbox has a live
command, and never once the last one has released it. The thread itself
lingers a moment (``linger`` seconds, by default :data:`LINGER`) before it
ends, so that commands run one after another share one thread instead of
starting one each (a thread start is a fair part of a
short command's cost); a command held while it lingers restarts the schedule
(the first renewal comes ``interval`` after it). A failed heartbeat is logged
and the next one still goes.

The thread is woken only when its current wait would end too late: for a
renewal due before it (a command held while it lingers, with an ``interval``
shorter than the linger) or for a linger that ends before it (the last command
released while it waits for a renewal). Commands run one after another while it
lingers wake it not at all (a wakeup costs the command's thread as much as the
thread's): it wakes when its linger ends, and waits again for whatever is then
due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import attrs

__all__ = ["LINGER", "Heartbeats"]

log = logging.getLogger("managoat_sandbox.e2b")

#: Seconds a sandbox's heartbeat thread waits for a new command after the last one ended.
LINGER = 1.0


@attrs.define(eq=False)
class _Beat:
    """One sandbox's schedule; its fields are guarded by the ``Heartbeats`` lock.

    ``wakes_at`` is when the thread's current wait ends (0 until it first waits).
    """

    send: Callable[[], None]
    due: float
    holders: int = 0
    idle_until: float = 0.0
    wakes_at: float = 0.0
    wake: threading.Event = attrs.field(factory=threading.Event)

    def wake_by(self, when: float) -> None:
        """Wake the thread if its current wait ends after ``when``."""
        if self.wakes_at > when:
            self.wake.set()


class Heartbeats:
    """Per-sandbox heartbeat threads, reference-counted by live commands."""

    def __init__(self, interval: float, *, linger: float = LINGER) -> None:
        self.interval = interval
        self._linger = linger
        self._lock = threading.Lock()
        self._beats: dict[str, _Beat] = {}

    def hold(self, sandbox_id: str, send: Callable[[], None]) -> Callable[[], None]:
        """Keep ``sandbox_id`` alive until the returned release is called (once)."""
        with self._lock:
            due = time.monotonic() + self.interval
            beat = self._beats.get(sandbox_id)
            if beat is None:
                beat = _Beat(send, due)
                self._beats[sandbox_id] = beat
                threading.Thread(
                    target=self._run,
                    args=(sandbox_id, beat),
                    name=f"e2b-heartbeat-{sandbox_id}",
                    daemon=True,
                ).start()
            elif beat.holders == 0:
                beat.send, beat.due = send, due
                beat.wake_by(due)
            beat.holders += 1
        released = False

        def release() -> None:
            nonlocal released
            with self._lock:
                if released:
                    return
                released = True
                beat.holders -= 1
                if beat.holders == 0:
                    beat.idle_until = time.monotonic() + self._linger
                    beat.wake_by(beat.idle_until)

        return release

    def _run(self, sandbox_id: str, beat: _Beat) -> None:
        while True:
            send = None
            with self._lock:
                # Cleared under the lock, before the schedule is read: a wake set after
                # this is for the schedule as it is now, and is kept for the next wait.
                beat.wake.clear()
                now = time.monotonic()
                if beat.holders == 0:
                    if now >= beat.idle_until:
                        del self._beats[sandbox_id]
                        return
                    wait = beat.idle_until - now
                else:
                    if now >= beat.due:
                        send, beat.due = beat.send, now + self.interval
                    wait = beat.due - now
                beat.wakes_at = now + wait
            if send is not None:
                try:
                    send()
                except Exception as error:
                    log.warning("e2b: TTL heartbeat for sandbox %s failed: %r", sandbox_id, error)
            beat.wake.wait(wait)
