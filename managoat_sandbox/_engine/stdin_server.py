"""The supervisor's side of the stdin protocol described in :mod:`.stdin`."""

from __future__ import annotations

import contextlib
import functools
import os
import selectors
import socket

from .journal import BLOCK
from .session import STDIN_SOCK
from .stdin import (
    DATA,
    EOF,
    FRAME_HEADER,
    MAX_FRAME,
    REPLY_CLOSED,
    REPLY_EXITED,
    REPLY_OK,
)

BUFFER_LIMIT = 1024 * 1024
CTRL_D = b"\x04"


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbox = bytearray()
        self.reading = False


class StdinServer:
    """Accepts stdin clients on ``stdin.sock`` and feeds their data to the child.

    Binds the socket by its relative name, so the supervisor's working
    directory must be the session directory (this sidesteps the ``sun_path``
    length limit). Everything is non-blocking and driven by the supervisor's
    selector: call :meth:`update` before each ``select``. At most about
    ``BUFFER_LIMIT`` bytes are buffered for a child that does not read; beyond
    that clients are not read, which pushes back on their writes.
    """

    def __init__(self, selector: selectors.BaseSelector, target: int, *, tty: bool) -> None:
        self._sel = selector
        self._target: int | None = target
        self._tty = tty
        self._pending = bytearray()
        self._closed = False
        self._exited = False
        self._writing = False
        self._clients: dict[int, _Client] = {}
        os.set_blocking(target, False)
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(STDIN_SOCK)
        self._listener.listen(16)
        self._listener.setblocking(False)
        selector.register(self._listener, selectors.EVENT_READ, self._accept)

    def child_exited(self) -> None:
        """Drop undelivered input, close the child's stdin; clients now get 'exited'."""
        self._exited = True
        self._pending.clear()
        self._close_target()

    def update(self) -> None:
        """Process buffered frames and bring selector registrations up to date."""
        accepting = self._exited or len(self._pending) < BUFFER_LIMIT
        for key, client in list(self._clients.items()):
            if accepting:
                self._process(client)
            if key in self._clients and accepting != client.reading:
                if accepting:
                    callback = functools.partial(self._receive, client)
                    self._sel.register(client.sock, selectors.EVENT_READ, callback)
                else:
                    self._sel.unregister(client.sock)
                client.reading = accepting
        want_write = self._target is not None and bool(self._pending)
        if self._target is not None and want_write != self._writing:
            if want_write:
                self._sel.register(self._target, selectors.EVENT_WRITE, self._feed)
            else:
                self._sel.unregister(self._target)
            self._writing = want_write

    def close(self) -> None:
        """Disconnect all clients, stop listening and remove the socket file."""
        for client in list(self._clients.values()):
            self._drop(client)
        self._sel.unregister(self._listener)
        self._listener.close()
        self._close_target()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(STDIN_SOCK)

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except BlockingIOError:
            return
        sock.setblocking(False)
        self._clients[sock.fileno()] = _Client(sock)

    def _receive(self, client: _Client) -> None:
        try:
            chunk = client.sock.recv(BLOCK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._drop(client)
            return
        client.inbox += chunk
        self._process(client)

    def _process(self, client: _Client) -> None:
        inbox = client.inbox
        while self._exited or len(self._pending) < BUFFER_LIMIT:
            if len(inbox) < FRAME_HEADER.size:
                return
            kind, length = FRAME_HEADER.unpack_from(inbox)
            if kind not in (DATA, EOF) or length > MAX_FRAME:
                self._drop(client)
                return
            end = FRAME_HEADER.size + length
            if len(inbox) < end:
                return
            reply = self._apply(kind, bytes(inbox[FRAME_HEADER.size : end]))
            del inbox[:end]
            try:
                client.sock.send(bytes((reply,)))
            except OSError:
                self._drop(client)
                return

    def _apply(self, kind: int, data: bytes) -> int:
        if self._exited:
            return REPLY_EXITED
        if self._closed:
            return REPLY_CLOSED
        if kind == DATA:
            self._pending += data
            return REPLY_OK
        self._closed = True
        if self._tty:
            self._pending += CTRL_D
        self._close_if_done()
        return REPLY_OK

    def _feed(self) -> None:
        assert self._target is not None
        try:
            written = os.write(self._target, self._pending[:BLOCK])
        except BlockingIOError:
            return
        except OSError:
            self._closed = True
            self._pending.clear()
            self._close_target()
            return
        del self._pending[:written]
        self._close_if_done()

    def _close_if_done(self) -> None:
        if self._closed and not self._pending:
            self._close_target()

    def _close_target(self) -> None:
        if self._target is None:
            return
        if self._writing:
            self._sel.unregister(self._target)
            self._writing = False
        os.close(self._target)
        self._target = None

    def _drop(self, client: _Client) -> None:
        if client.reading:
            self._sel.unregister(client.sock)
        del self._clients[client.sock.fileno()]
        client.sock.close()
