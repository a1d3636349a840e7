"""The agent's end of egress (:mod:`.agent`): the proxy port inside the sandbox, and the
channel to the keeper (:mod:`.keeper`) that runs the proxy on the host.

The agent hands each connection a command makes to the proxy port to the
keeper over the channel (``c``, the connection's descriptor attached), and
notices of policy changes (``p``), which the keeper confirms (``a``, one per
notice, in order) once it has cut every relayed connection the policy now in
force does not permit.
"""

from __future__ import annotations

import contextlib
import selectors
import socket

from .agent_connection import Connection, Refused
from .options import EGRESS_PORT

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_KEEPER_GONE = "the sandbox's egress proxy (its keeper) is not running"


class Bridge:
    """The proxy port inside the sandbox, and the agent's state of its channel to the keeper.

    ``sock`` is bound to ``127.0.0.1:3128`` as the agent starts and stays bound
    for the agent's whole life, so no command can ever bind the port, whatever
    the policy. While egress is open it listens, with ``SO_REUSEADDR`` (the
    ``TIME_WAIT`` of connections it accepted never keeps it from listening
    again; while it listens nothing else may bind the port). Under deny-all it
    is bound without listening and without ``SO_REUSEADDR`` — nothing can
    share the port, and a connection to it is refused. Reopening sets the
    option back and listens, two calls apart: a command that binds and
    listens in between makes that reopening fail (``egress_failed``), never
    the agent.

    ``channel``: the non-blocking socket to the keeper; ``waiters``:
    connections awaiting the keeper's confirmation of a policy change, in
    order, each with whether that change opened the port; ``unsent``: policy
    notices not written to the channel yet; ``gone``: the keeper has exited.
    Both sockets are watched in the agent's selector ``sel``.
    """

    def __init__(
        self, sel: selectors.BaseSelector, channel: socket.socket, sock: socket.socket
    ) -> None:
        self.sel = sel
        self.channel = channel
        self.sock = sock
        self.listening = False
        self.waiters: list[tuple[Connection, bool]] = []
        self.unsent = 0
        self.gone = False

    @classmethod
    def bind(cls, sel: selectors.BaseSelector, channel: socket.socket, *, open_: bool) -> Bridge:
        """Bind the proxy port and start watching ``channel`` (made non-blocking), as the
        agent starts and before any command runs; then open the port or keep it closed
        (:meth:`set_open`).

        Refused (``egress_failed``) when the port cannot be bound, or put in the
        state ``open_`` asks for.
        """
        channel.setblocking(False)
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind(("127.0.0.1", EGRESS_PORT))
            except OSError:
                sock.close()
                raise
            sock.setblocking(False)
            bridge = cls(sel, channel, sock)
            sel.register(channel, selectors.EVENT_READ, bridge._on_keeper)
        except OSError as exc:
            raise _failed(open_, exc) from None
        bridge.set_open(open_)
        return bridge

    def set_open(self, open_: bool) -> None:
        """Listen on the proxy port, or stop listening (deny all) while keeping it bound.

        Refused (``egress_failed``) when the port cannot be listened on again or
        closed; the agent serves on either way.
        """
        try:
            if open_ and not self.listening:
                try:
                    self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    self.sock.listen(64)
                except OSError:
                    with contextlib.suppress(OSError):
                        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
                    raise
                self.sel.register(self.sock, selectors.EVENT_READ, self._on_bridge)
                self.listening = True
            elif not open_ and self.listening:
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 0)
                self.sock.shutdown(socket.SHUT_RD)
                self.sel.unregister(self.sock)
                self.listening = False
        except OSError as exc:
            raise _failed(open_, exc) from None

    def confirm(self, conn: Connection, open_: bool) -> dict[str, Any] | None:
        """Have the keeper confirm the change to the policy now in force (``open_``: it
        opened the port) to ``conn``: the reply, or None when it comes once the keeper
        has confirmed (``conn`` sends nothing more meanwhile).

        Refused (``egress_failed``) when the change opened the port and the keeper
        is gone; a change that closed it is in force without the keeper (with it
        gone, no connection is left to cut).
        """
        if self.gone:
            if open_:
                raise Refused("egress_failed", _KEEPER_GONE)
            return {"ok": True}
        self.waiters.append((conn, open_))
        self.unsent += 1
        self._write_keeper()
        return None

    def _on_bridge(self, mask: int) -> None:
        try:
            client, _ = self.sock.accept()
        except OSError:
            return
        with client, contextlib.suppress(OSError):
            socket.send_fds(self.channel, [b"c"], [client.fileno()])

    def _on_keeper(self, mask: int) -> None:
        """The channel to the keeper: its confirmations (one ``a`` per policy notice),
        its end, and room for the notices not written yet."""
        if mask & selectors.EVENT_WRITE:
            self._write_keeper()
        if not mask & selectors.EVENT_READ or self.gone:
            return
        try:
            data = self.channel.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._keeper_gone()
            return
        for _ in range(data.count(b"a")):
            if not self.waiters:
                break
            conn, _ = self.waiters.pop(0)
            if not conn.closed:
                conn.send_reply({"ok": True})
                conn.flush()

    def _write_keeper(self) -> None:
        """Write the policy notices not sent yet (``p``); the rest waits for room."""
        while self.unsent and not self.gone:
            try:
                sent = self.channel.send(b"p" * self.unsent)
            except BlockingIOError:
                break
            except OSError:
                self._keeper_gone()
                return
            self.unsent -= sent
        if not self.gone:
            mask = selectors.EVENT_READ | (selectors.EVENT_WRITE if self.unsent else 0)
            self.sel.modify(self.channel, mask, self._on_keeper)

    def _keeper_gone(self) -> None:
        """The keeper has exited, and every connection it relayed with it. A waiting
        change that closed the port is in force; one that opened it cannot be."""
        self.gone = True
        self.unsent = 0
        with contextlib.suppress(KeyError, ValueError):
            self.sel.unregister(self.channel)
        while self.waiters:
            conn, opened = self.waiters.pop(0)
            if conn.closed:
                continue
            if opened:
                conn.send_reply({"error": "egress_failed", "message": _KEEPER_GONE})
            else:
                conn.send_reply({"ok": True})
            conn.flush()


def _failed(open_: bool, exc: OSError) -> Refused:
    """The refusal of a policy change (``open_``: one that opens the port) that failed."""
    state = "opened" if open_ else "closed"
    return Refused("egress_failed", f"the proxy port cannot be {state}: {exc.strerror or exc}")
