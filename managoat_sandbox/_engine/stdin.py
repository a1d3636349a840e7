"""Writing a session's stdin through the supervisor's Unix socket.

Protocol: the client sends frames ``[kind: u8][length: u32 big-endian][data]``
(kind 0 = data, 4 = end of input) and the supervisor answers each frame with
one byte once it has taken the frame in: 0 = accepted, 1 = stdin already
closed, 2 = the process has exited. Because every frame is acknowledged,
writes from sequential calls (even over separate connections) reach the child
in call order, and an EOF sent after data is applied after that data.

Sockets whose path would exceed the ``sun_path`` limit are reached through
``/proc/self/fd/N/stdin.sock`` with N an open descriptor of the session
directory (Linux only).
"""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path
from types import TracebackType
from typing import NoReturn

from .errors import EngineError, ProcessExited, StdinNotOpen
from .session import STDIN_SOCK, read_spec, terminal_state

DATA = 0
EOF = 4
REPLY_OK = 0
REPLY_CLOSED = 1
REPLY_EXITED = 2

FRAME_HEADER = struct.Struct(">BI")
MAX_FRAME = 1024 * 1024
_SHORT_PATH = 100


def encode_frame(kind: int, data: bytes = b"") -> bytes:
    """One protocol frame."""
    return FRAME_HEADER.pack(kind, len(data)) + data


def _connect(session_dir: Path, timeout: float | None) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    path = session_dir / STDIN_SOCK
    try:
        if len(os.fsencode(path)) < _SHORT_PATH:
            sock.connect(os.fspath(path))
        else:
            dir_fd = os.open(session_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                sock.connect(f"/proc/self/fd/{dir_fd}/{STDIN_SOCK}")
            finally:
                os.close(dir_fd)
    except BaseException:
        sock.close()
        raise
    return sock


class StdinWriter:
    """A persistent connection to one session's stdin.

    Raises StdinNotOpen if the session was started without stdin,
    ProcessExited if the process has already ended (or its supervisor is gone),
    EngineError for other failures. ``timeout`` bounds each socket operation;
    after a timeout or any failure the writer is closed. Not thread-safe: share
    one between threads only under a lock.
    """

    def __init__(self, session_dir: Path, *, timeout: float | None = None) -> None:
        if not read_spec(session_dir).stdin:
            raise StdinNotOpen(f"session {session_dir} was started without stdin")
        self._session_dir = session_dir
        self._check_running()
        try:
            self._sock: socket.socket | None = _connect(session_dir, timeout)
        except OSError as exc:
            self._sock = None
            self._fail(exc)

    def write(self, data: bytes) -> None:
        """Hand ``data`` to the supervisor, which feeds it to the child in order.

        Returns once the supervisor has taken the data (not when the child has
        read it); blocks while the supervisor's buffer for a child that is not
        reading is full. StdinNotOpen if stdin was closed, ProcessExited if the
        process has ended.
        """
        for start in range(0, len(data), MAX_FRAME):
            reply = self._exchange(DATA, data[start : start + MAX_FRAME])
            if reply == REPLY_CLOSED:
                raise StdinNotOpen(f"stdin of session {self._session_dir} is closed")
            if reply == REPLY_EXITED:
                raise ProcessExited(f"process of session {self._session_dir} has exited")

    def close_stdin(self) -> None:
        """Send end of input after everything written so far; idempotent.

        A no-op if stdin is already closed or the process has ended. Without a
        tty the child's stdin pipe is closed; with a tty the terminal's EOF
        character (Ctrl-D) is sent, which ends input for a program reading in
        canonical mode at the start of a line.
        """
        try:
            self._exchange(EOF, b"")
        except ProcessExited:
            self.close()

    def close(self) -> None:
        """Close the connection (stdin itself stays open); idempotent."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> StdinWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _exchange(self, kind: int, data: bytes) -> int:
        if self._sock is None:
            self._check_running()
            raise EngineError("stdin writer is closed")
        try:
            self._sock.sendall(encode_frame(kind, data))
            reply = self._sock.recv(1)
        except OSError as exc:
            self._fail(exc)
        if not reply:
            self._fail(None)
        return reply[0]

    def _check_running(self) -> None:
        if terminal_state(self._session_dir) is not None:
            raise ProcessExited(f"process of session {self._session_dir} has exited")

    def _fail(self, cause: OSError | None) -> NoReturn:
        self.close()
        self._check_running()
        if isinstance(cause, TimeoutError):
            raise EngineError(f"stdin of session {self._session_dir}: timed out") from cause
        reason = "connection closed by the supervisor" if cause is None else str(cause)
        raise EngineError(f"stdin of session {self._session_dir}: {reason}") from cause


def write_stdin(session_dir: Path, data: bytes, *, timeout: float | None = None) -> None:
    """One-shot :meth:`StdinWriter.write` over a fresh connection."""
    with StdinWriter(session_dir, timeout=timeout) as writer:
        writer.write(data)


def close_stdin(session_dir: Path, *, timeout: float | None = None) -> None:
    """One-shot :meth:`StdinWriter.close_stdin`.

    Never raises because the process has ended or its supervisor is gone (the
    child's stdin is closed then anyway); StdinNotOpen if the session was
    started without stdin; EngineError for other failures.
    """
    try:
        writer = StdinWriter(session_dir, timeout=timeout)
    except ProcessExited:
        return
    with writer:
        writer.close_stdin()
