"""TTL heartbeats: a sandbox with a live command keeps getting its TTL renewed.

Every running E2B sandbox dies (here: auto-pauses) when its TTL runs out, even
while a command streams. :class:`Heartbeats` keeps one daemon thread per
sandbox that has at least one live command; every ``interval`` seconds it calls
``send(sandbox_id)`` (which renews the TTL). The thread ends as soon as the
last command of its sandbox releases it, so no heartbeat thread outlives the
commands it serves. A failed heartbeat is logged and the next one still goes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import attrs

__all__ = ["Heartbeats"]

log = logging.getLogger("managoat_sandbox.e2b")


@attrs.define(eq=False)
class _Beat:
    holders: int
    stop: threading.Event
    send: Callable[[], None]
    thread: threading.Thread | None = None


class Heartbeats:
    """Per-sandbox heartbeat threads, reference-counted by live commands."""

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._lock = threading.Lock()
        self._beats: dict[str, _Beat] = {}

    def hold(self, sandbox_id: str, send: Callable[[], None]) -> Callable[[], None]:
        """Keep ``sandbox_id`` alive until the returned release is called (once)."""
        with self._lock:
            beat = self._beats.get(sandbox_id)
            if beat is None:
                beat = _Beat(0, threading.Event(), send)
                beat.thread = threading.Thread(
                    target=self._run,
                    args=(sandbox_id, beat),
                    name=f"e2b-heartbeat-{sandbox_id}",
                    daemon=True,
                )
                self._beats[sandbox_id] = beat
                beat.thread.start()
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
                    beat.stop.set()
                    if self._beats.get(sandbox_id) is beat:
                        del self._beats[sandbox_id]

        return release

    def _run(self, sandbox_id: str, beat: _Beat) -> None:
        while not beat.stop.wait(self.interval):
            try:
                beat.send()
            except Exception as error:
                log.warning("e2b: TTL heartbeat for sandbox %s failed: %r", sandbox_id, error)
