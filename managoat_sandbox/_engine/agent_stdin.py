"""Commands' stdin in the agent (:mod:`.agent`): what connections write, fed without blocking.

Each process started with stdin has a :class:`.stdin_feed.StdinFeed`; a
:class:`StdinPump` watches its target for writability in the agent's
selector only while input is pending, and releases the target once input has
ended. A write that finds the feed full is not answered: its connection
waits (:attr:`.agent_connection.Connection.waiting`, with its requests after
it buffered) until the process has taken enough, or has ended.
"""

from __future__ import annotations

import selectors

from .agent_connection import Connection, Process
from .stdin_feed import FULL, LIMIT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class StdinPump:
    """Feeds the stdin of the agent's processes, registered in the agent's selector ``sel``."""

    def __init__(self, sel: selectors.BaseSelector) -> None:
        self.sel = sel

    def offer(self, conn: Connection, process: Process, data: bytes) -> dict[str, Any]:
        """Hand ``data`` from ``conn`` to ``process``'s stdin; the reply, or an empty one
        when ``conn`` now waits for room (it is answered once there is)."""
        feed = process.stdin
        if feed is None:
            return {"status": "not_open"}
        status = feed.offer(data)
        if status == FULL:
            conn.waiting = (process, data)
            process.stdin_waiters.append(conn)
            return {}
        self.sync(process)
        return {"status": status}

    def end_of_input(self, process: Process) -> dict[str, Any]:
        """End ``process``'s input after what is pending; the reply."""
        if process.stdin is None:
            return {"status": "not_open"}
        status = process.stdin.end_of_input()
        self.sync(process)
        return {"status": status}

    def exited(self, process: Process) -> None:
        """``process`` has exited: its pending input is dropped, its stdin released."""
        if process.stdin is not None:
            process.stdin.process_exited()
            self.sync(process)

    def ended(self, process: Process) -> None:
        """``process`` has ended: as :meth:`exited`, and every waiting writer is told so."""
        self.exited(process)
        for conn in list(process.stdin_waiters):
            conn.waiting = None
            conn.send_reply({"status": "exited"})
            conn.process()
        process.stdin_waiters.clear()

    def sync(self, process: Process) -> None:
        """Watch the stdin target while input is pending; release it once input is done."""
        feed = process.stdin
        if feed is None:
            return
        target = feed.target
        if target is None:
            return
        registered = self.sel.get_map().get(target) is not None
        if feed.wants_write() and not registered:
            self.sel.register(target, selectors.EVENT_WRITE, lambda mask: self._feed(process))
        elif not feed.wants_write() and registered:
            self.sel.unregister(target)
        if feed.done:
            if self.sel.get_map().get(target) is not None:
                self.sel.unregister(target)
            feed.release()

    def _feed(self, process: Process) -> None:
        feed = process.stdin
        if feed is None:
            return
        feed.feed()
        self.sync(process)
        while process.stdin_waiters and len(feed.pending) < LIMIT:
            conn = process.stdin_waiters.pop(0)
            waiting, conn.waiting = conn.waiting, None
            if waiting is not None:
                reply = self.offer(conn, process, waiting[1])
                if reply:
                    conn.send_reply(reply)
            conn.process()
