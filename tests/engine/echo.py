"""A TCP echo server for egress tests, on this host's own address.

The proxy never connects to loopback (it is always blocked), so, as the other
egress tests do, the server listens on one of this host's own non-loopback
addresses, reached through a name pinned to it: traffic to it never leaves
this machine, and tests reach no other address.
"""

from __future__ import annotations

import contextlib
import socket
import threading


def host_address() -> str | None:
    """An address of this host that is not loopback, or None (nothing is sent to learn it)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        address = str(probe.getsockname()[0])
    except OSError:
        return None
    finally:
        probe.close()
    return None if address.startswith("127.") else address


class EchoServer:
    """Sends back whatever each connection sends, until that connection ends."""

    def __init__(self, address: str) -> None:
        self._listener = socket.create_server((address, 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._open.append(conn)
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        """Stop accepting and end every connection."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
        self._listener.close()
        with self._lock:
            for conn in self._open:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self._thread.join(10)
