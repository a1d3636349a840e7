"""One client connection of the agent (:mod:`.agent`): requests in, replies and followed
output out.

A connection handles its requests one at a time and in order: while it
follows a process (a subscription, until the process's end frame is sent) or
waits for room in a process's stdin, the requests after it stay buffered. It
never blocks: its socket is non-blocking, what the socket does not take now
waits in :attr:`Connection.out`, and output it lags behind on is read back
from the session's journal later instead of piling up in memory.
"""

from __future__ import annotations

import json
import os
import selectors
import socket

from . import wire
from .agent_process import Process as ProcessOf
from .errors import EngineError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    class Server(Protocol):
        """What a connection needs from the agent that serves it."""

        @property
        def sel(self) -> selectors.BaseSelector:
            """The agent's selector, in which the connection's socket is registered."""

        def drop(self, conn: Connection) -> None:
            """Close ``conn`` and release whatever it held."""

        def handle(
            self, conn: Connection, header: dict[str, Any], data: bytes
        ) -> dict[str, Any] | None:
            """Answer one request (:class:`Refused` for an error answer); None when the
            answer comes later or was already queued."""

        def pace(self, process: Process) -> None:
            """Read ``process``'s output only while one of its subscribers keeps up."""

        def unsubscribe(self, conn: Connection, process: Process) -> None:
            """``conn`` no longer follows ``process``."""


#: In-memory backlog per subscriber before it is served from the journal instead
#: (or, for an ephemeral process, before its pipes stop being read).
BACKLOG = 256 * 1024
#: The most bytes read at once from a connection or from a command's output.
READ = 64 * 1024


class Refused(Exception):
    """A request the agent answers with an error: ``code`` names it for the client."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Connection:
    """One client connection: requests in, replies and subscribed output out."""

    def __init__(self, agent: Server, sock: socket.socket) -> None:
        sock.setblocking(False)
        self.agent = agent
        self.sock = sock
        self.parser = wire.Parser(kinds=frozenset((wire.REQUEST,)))
        self.out = bytearray()
        self.sub: Process | None = None
        self.offset = 0
        self.waiting: tuple[Process, bytes] | None = None
        self.closed = False
        self._mask = selectors.EVENT_READ

    # -- input -----------------------------------------------------------------

    def on_event(self, mask: int) -> None:
        if mask & selectors.EVENT_READ:
            self._receive()
        if not self.closed and mask & selectors.EVENT_WRITE:
            self.flush()

    def _receive(self) -> None:
        try:
            data = self.sock.recv(READ)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.agent.drop(self)
            return
        self.parser.feed(data)
        self.process()

    def process(self) -> None:
        """Handle buffered requests while the connection is neither subscribed nor waiting."""
        while not self.closed and self.sub is None and self.waiting is None:
            try:
                item = self.parser.next()
            except EngineError:
                self.agent.drop(self)
                return
            if item is None:
                break
            try:
                header, data = wire.parse_message(item[1])
                reply = self.agent.handle(self, header, data)
            except Refused as refusal:
                reply = {"error": refusal.code, "message": str(refusal)}
            except EngineError as exc:
                reply = {"error": "bad_request", "message": str(exc)}
            except (ValueError, TypeError) as exc:
                # A field of an unusable value: refused, never the end of the agent
                # (and of every session it serves).
                reply = {"error": "bad_request", "message": f"malformed request: {exc}"}
            if reply is not None:
                self.send_reply(reply)
        self.flush()

    # -- output ----------------------------------------------------------------

    def send_reply(self, reply: dict[str, Any]) -> None:
        self.out += wire.message(wire.REPLY, reply)

    def subscribe(self, process: Process, offset: int) -> None:
        """Follow ``process`` from journal ``offset`` to its end frame."""
        self.sub = process
        self.offset = offset
        process.subscribers.append(self)

    def offer(self, process: Process, frame: bytes, at: int) -> None:
        """New output frame ``frame`` written at journal offset ``at``.

        Caught-up subscribers take it from memory; one that lags behind by more
        than :data:`BACKLOG` catches up from the journal later. An ephemeral
        process has no journal, so its subscriber always takes it (and the
        process stops being read while the backlog is full:
        :meth:`.agent_output.Pump.pace`).
        """
        if not process.journaled:
            self.out += frame
        elif self.offset == at and len(self.out) < BACKLOG:
            self.out += frame
            self.offset = at + len(frame)

    def flush(self) -> None:
        """Send what the socket takes now, refilling from the journal and ending the
        subscription once the process has ended and everything was sent."""
        while not self.closed:
            if self.out:
                try:
                    sent = self.sock.send(self.out)
                except BlockingIOError:
                    sent = 0
                except OSError:
                    self.agent.drop(self)
                    return
                del self.out[:sent]
                if self.out:
                    break
            if not self._refill():
                break
        if self.closed:
            return
        self._watch()
        if self.sub is not None:
            self.agent.pace(self.sub)
        if self.sub is None and self.waiting is None and self.parser.has_frame():
            self.process()

    def behind(self, process: Process) -> int:
        """How far this subscriber trails ``process`` (which it follows): the bytes
        waiting in its buffer for an ephemeral process, the bytes journaled that it
        has not taken yet for a session."""
        if process.journaled:
            return process.size - self.offset
        return len(self.out)

    def _refill(self) -> bool:
        process = self.sub
        if process is None:
            return False
        if process.journal_fd is not None and self.offset < process.size:
            chunk = os.pread(
                process.journal_fd, min(BACKLOG, process.size - self.offset), self.offset
            )
            if chunk:
                self.out += chunk
                self.offset += len(chunk)
                return True
        if process.end is not None and (not process.journaled or self.offset >= process.size):
            self.out += wire.frame(wire.END, json.dumps(process.end).encode())
            self.sub = None
            self.agent.unsubscribe(self, process)
            return True
        return False

    def _watch(self) -> None:
        if self.closed:
            return
        mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.out else 0)
        if mask != self._mask:
            self.agent.sel.modify(self.sock, mask, self.on_event)
            self._mask = mask


#: A process whose clients are this agent's connections.
Process = ProcessOf[Connection]
