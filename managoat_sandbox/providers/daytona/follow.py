"""The WebSocket follow of a command's log: ``GET …/logs?follow=true``.

See docs/protocols/daytona.md#log-follow.

The daemon replays the journal from byte zero, then tails it, in binary
frames of at most 1024 bytes, and closes with 1000 about a second after the
command's exit code is recorded (1011 on a read error). Its end is not
trustworthy (it may close early, or replay only a prefix), so a
:class:`LogSocket` only carries bytes: what they mean, and whether the log is
complete, is decided by the reader (:mod:`.stream`).

The connection is opened by the shared :func:`~..._http.open_websocket`
(through the transport given, else websocket-client's: handshake, TLS, no
proxy, no redirect), which maps a refused upgrade by Daytona's
:data:`.api.POLICY` as any answer is; the frames are then read straight off
its socket, many per ``recv``, because at 1024 bytes a frame the per-frame
cost of a generic reader would bound the throughput. Server frames are
unmasked; data frames (binary, text, continuation) are payload bytes in order,
pings are answered, a Close is answered and ends the follow.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from typing import Any

import websocket

from ..._http import open_websocket, transport_error
from ..._transport import Transport
from .api import POLICY

__all__ = ["LogSocket"]

log = logging.getLogger("managoat_sandbox.daytona")

_RECV = 256 * 1024
_DATA = frozenset({0x0, 0x1, 0x2})
_CLOSE = 0x8
_PING = 0x9


def _unmask(payload: memoryview, key: bytes) -> bytes:
    size = len(payload)
    mask = int.from_bytes((key * (size // 4 + 1))[:size], "big")
    return (int.from_bytes(payload, "big") ^ mask).to_bytes(size, "big")


class LogSocket:
    """One open WebSocket follow; :meth:`read` it until it returns None."""

    def __init__(self, ws: Any, url: str) -> None:
        self._ws = ws
        self._url = url
        self._sock: socket.socket = ws.sock
        self._pending = b""
        self.closed = False

    @classmethod
    def open(
        cls,
        url: str,
        headers: Mapping[str, str],
        *,
        timeout: float,
        transport: Transport | None = None,
    ) -> LogSocket:
        """Connect to ``url`` (``ws://``/``wss://``) through ``transport`` (default: the
        websocket-client one); a refused upgrade is raised as its taxonomy error, a
        timeout as ``DeadlineExpired("timeout")``, any other failure as ``Unavailable``."""
        return cls(
            open_websocket(url, headers, policy=POLICY, timeout=timeout, transport=transport), url
        )

    def read(self, timeout: float) -> bytes | None:
        """The payload bytes of the frames that arrive next (``b""`` if only control
        frames did); None once the follow has ended (a Close, or the connection
        closed). ``TimeoutError`` when nothing arrived within ``timeout`` seconds;
        ``Unavailable`` when the connection failed."""
        if self.closed:
            return None
        try:
            self._sock.settimeout(timeout)
            chunk = self._sock.recv(_RECV)
        except TimeoutError:
            raise
        except OSError as error:
            self.closed = True
            raise transport_error(error, self._url) from None
        if not chunk:
            self.closed = True
            return None
        return self._frames(self._pending + chunk if self._pending else chunk)

    def _frames(self, data: bytes) -> bytes:
        """Parse the complete frames of ``data``, keep the rest; their payload bytes."""
        view = memoryview(data)
        parts: list[Any] = []
        position, size = 0, len(data)
        try:
            while size - position >= 2:
                first, second = data[position], data[position + 1]
                length, head = second & 0x7F, 2
                if length == 126:
                    head = 4
                elif length == 127:
                    head = 10
                mask_at = position + head
                if second & 0x80:
                    head += 4
                if size - position < head:
                    break
                if length >= 126:
                    length = int.from_bytes(data[position + 2 : mask_at], "big")
                end = position + head + length
                if end > size:
                    break
                payload = view[position + head : end]
                if second & 0x80:
                    payload = memoryview(_unmask(payload, data[mask_at : mask_at + 4]))
                opcode = first & 0x0F
                position = end
                if opcode in _DATA:
                    parts.append(payload)
                elif opcode == _PING:
                    self._control(lambda body=bytes(payload): self._ws.pong(body))
                elif opcode == _CLOSE:
                    self.closed = True
                    self._control(self._ws.send_close)
                    break
            found = b"".join(parts)
        finally:
            parts.clear()
            view.release()
        self._pending = b"" if self.closed else data[position:]
        return found

    def _control(self, send: Any) -> None:
        try:
            send()
        except (websocket.WebSocketException, OSError) as error:
            log.debug("daytona: a log follow control frame was not sent: %r", error)

    def ping(self) -> None:
        """Ask the server for a sign of life (a pong); a failure shows on the next read."""
        self._control(self._ws.ping)

    def close(self) -> None:
        """Say goodbye if still open, then drop the connection; never raises."""
        if not self.closed:
            self.closed = True
            self._control(self._ws.send_close)
        self._ws.shutdown()

    def abort(self) -> None:
        """Unblock a :meth:`read` in another thread (the connection is shut down)."""
        self._ws.abort()
