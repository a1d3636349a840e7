"""Cutting a client's connection the two ways a network does: a reset and a close.

``reset`` is an abortive close (``SO_LINGER`` 0): the kernel discards what is
unsent and answers with a TCP RST, so the client's next read fails with
``ECONNRESET``. ``close`` is an orderly close (FIN): the client reads what was
sent, then end-of-file. Either may land in the middle of a body, a chunk or a
protocol message; the faults that use them say where.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct

__all__ = ["close", "reset"]

_LINGER_OFF = struct.pack("ii", 1, 0)


def reset(transport: asyncio.Transport | None) -> None:
    """Abort ``transport`` with a TCP RST (no-op when it is already gone)."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_OFF)
    transport.abort()


def close(transport: asyncio.Transport | None) -> None:
    """Close ``transport`` in order (FIN) once what was written is flushed."""
    if transport is not None:
        transport.close()
