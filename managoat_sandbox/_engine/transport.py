"""The library's connections to a box's agent: requests sent, replies read, connections pooled.

A request is one REQUEST message (:mod:`.wire`), its reply exactly one REPLY
frame (nothing after it is read, so a subscription can follow on the same
connection). An error reply is raised as :class:`Refused`; no agent at all,
as :class:`AgentDown`. Every wait is bounded by the caller's deadline.
A :class:`Pool` keeps a few idle connections to the agent; a
:class:`Channel` is one caller's connection of its own.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from . import wire
from .errors import EngineError
from .launch import SUN_PATH
from .options import SOCKET

START_TIMEOUT = 30.0
_POOL = 8
_RESETS = 6
_RESET_BACKOFF = 0.002


class AgentDown(EngineError):
    """The agent is not running (nothing was sent to it)."""


class Refused(EngineError):
    """The agent refused a request; ``code`` names why (``unknown``, ``bad_cwd``…)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Starter(Protocol):
    """Starts the agent unless one serves, within ``timeout`` seconds; EngineError if not."""

    def __call__(self, *, timeout: float) -> None: ...


def _recv_exact(sock: socket.socket, size: int, deadline: float | None) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("the agent did not answer in time")
            sock.settimeout(remaining)
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise EngineError("the agent closed the connection")
        chunks += chunk
    return bytes(chunks)


def read_reply(sock: socket.socket, deadline: float | None) -> dict[str, Any]:
    """Exactly one REPLY frame (nothing after it is read); EngineError/TimeoutError."""
    kind, length = wire.HEADER.unpack(_recv_exact(sock, wire.HEADER.size, deadline))
    if kind != wire.REPLY or length > wire.MAX_FRAME:
        raise EngineError(f"unexpected frame from the agent (kind {kind})")
    header, _ = wire.parse_message(_recv_exact(sock, length, deadline))
    return header


def _reply(
    sock: socket.socket, deadline: float | None, checkin: Callable[[socket.socket], None]
) -> dict[str, Any]:
    """The reply on ``sock``: given back to ``checkin`` on a refusal. TimeoutError,
    OSError (the connection failed) or EngineError (the agent ended it)."""
    reply = read_reply(sock, deadline)
    if "error" in reply:
        checkin(sock)
        raise Refused(str(reply["error"]), str(reply.get("message", "")))
    return reply


def _close_all(sockets: list[socket.socket]) -> None:
    while sockets:
        sockets.pop().close()


class Pool:
    """Connections to the agent whose control socket is in the state directory ``state``;
    thread-safe. Idle connections are closed with the pool, or at exit while it lives on.
    """

    def __init__(self, state: Path) -> None:
        self._state = state
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        weakref.finalize(self, _close_all, self._idle)
        sock_path = state / SOCKET
        self._address = str(sock_path) if len(os.fsencode(sock_path)) < SUN_PATH else None

    def connect(self) -> socket.socket:
        """A new connection to the agent; AgentDown if none runs."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            if self._address is not None:
                sock.connect(self._address)
            else:
                state_fd = os.open(self._state, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    sock.connect(f"/proc/self/fd/{state_fd}/{SOCKET}")
                finally:
                    os.close(state_fd)
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.ENOENT, errno.ECONNREFUSED):
                raise AgentDown("the sandbox's agent is not running") from None
            raise EngineError(f"cannot reach the sandbox's agent: {exc.strerror}") from None
        return sock

    def _checkout(self, *, start: Starter | None, deadline: float) -> socket.socket:
        """A connection: an idle one, else a new one (starting the agent with ``start``
        if given and none runs)."""
        with self._lock:
            if self._idle:
                return self._idle.pop()
        try:
            return self.connect()
        except AgentDown:
            if start is None:
                raise
        start(timeout=max(deadline - time.monotonic(), 0.1))
        return self.connect()

    def checkin(self, sock: socket.socket) -> None:
        """Give back a connection that is idle (its last exchange complete)."""
        sock.settimeout(None)
        with self._lock:
            if len(self._idle) < _POOL:
                self._idle.append(sock)
                return
        sock.close()

    def close(self) -> None:
        """Close the idle connections."""
        with self._lock:
            idle = self._idle[:]
            self._idle.clear()
        _close_all(idle)

    def exchange(
        self, header: dict[str, Any], data: bytes, *, start: Starter | None, timeout: float | None
    ) -> tuple[socket.socket, dict[str, Any]]:
        """Send one request and read its reply; the connection stays checked out.
        ``start``, when given, starts the agent if none runs.

        A connection that breaks (EPIPE) or is reset (ECONNRESET) was closed by
        its agent with the request unread — never acted upon — so the request
        is sent again on a fresh connection, after a short pause (the pool,
        whose connections all went to the same agent, is dropped). An agent
        that is dying still has its socket open for a moment; once it is
        gone, the connection is refused and a new agent starts. Any other
        failure, end of file included, is an error: the agent may have acted
        on the request.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        message = wire.message(wire.REQUEST, header, data)
        for attempt in range(_RESETS):
            if attempt:
                time.sleep(_RESET_BACKOFF * 2 ** (attempt - 1))
            sock = self._checkout(
                start=start, deadline=time.monotonic() + (timeout or START_TIMEOUT)
            )
            try:
                sock.settimeout(
                    None if deadline is None else max(deadline - time.monotonic(), 0.001)
                )
                sock.sendall(message)
                return sock, _reply(sock, deadline, self.checkin)
            except Refused:
                raise
            except TimeoutError:
                sock.close()
                raise
            except (BrokenPipeError, ConnectionResetError) as exc:
                sock.close()
                if attempt == _RESETS - 1:
                    raise EngineError(f"lost the sandbox's agent: {exc}") from None
                # Every pooled connection went to the agent that just went away.
                self.close()
            except (OSError, EngineError) as exc:
                sock.close()
                raise EngineError(f"lost the sandbox's agent: {exc}") from None
        raise AssertionError("unreachable")


class Channel:
    """A connection of its own for one caller's requests (a command's stdin).

    :meth:`close` may be called from any thread and makes a request blocked in
    it (a write to a process that does not read) fail at once.
    """

    def __init__(self, pool: Pool) -> None:
        self._pool = pool
        self._sock: socket.socket | None = None
        self._closed = False
        self._lock = threading.Lock()

    def request(
        self, header: dict[str, Any], data: bytes = b"", *, timeout: float | None = None
    ) -> dict[str, Any]:
        """One request and its reply; EngineError once closed."""
        with self._lock:
            if self._closed:
                raise EngineError("the channel is closed")
            sock = self._sock
        if sock is None:
            sock = self._pool.connect()
            with self._lock:
                if self.is_closed():
                    sock.close()
                    raise EngineError("the channel is closed")
                self._sock = sock
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            sock.settimeout(timeout)
            sock.sendall(wire.message(wire.REQUEST, header, data))
        except OSError as exc:
            self._drop(sock)
            raise EngineError(f"lost the sandbox's agent: {exc}") from None
        try:
            return _reply(sock, deadline, lambda _: None)
        except (OSError, EngineError) as exc:
            if not isinstance(exc, Refused):
                self._drop(sock)
            raise

    def is_closed(self) -> bool:
        """Whether :meth:`close` was called (a call, read afresh: another thread may close
        the channel while this one connects)."""
        return self._closed

    def _drop(self, sock: socket.socket) -> None:
        with self._lock:
            if self._sock is sock:
                self._sock = None
        sock.close()

    def close(self) -> None:
        """Close the connection, interrupting a request in flight; idempotent."""
        with self._lock:
            self._closed = True
            sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
