"""A Sprites command's end: the reader of its exec WebSocket, and its stdin.

The frames it reads and writes are described in :mod:`.stream`.

The reader thread reports the exit as soon as the exit frame arrives (it does
not wait for the server's close, docs/protocols/sprites.md#exit-before-close)
and then closes its side. A close
or a drop without an exit frame ends the stream through the shared
:class:`~..._streaming.Stream`, which turns it into
``Error(ref, Unavailable("closed_before_exit"))``; frames are read in order, so
an exit frame that arrived before the close always wins. A quiet connection is
pinged every ``keepalive`` seconds and declared dead (``Unavailable("timeout")``)
after three intervals without any message from the server.

Output messages of one stream that have already arrived back to back are
delivered as one frame (:class:`_Batch`, up to :data:`_BATCH_LIMIT` bytes):
after each output message the reader looks, without waiting, whether more
bytes are there, and reads on only if they are. A command that writes and
then pauses gets its output at once; a fast stream costs one delivery per
burst instead of one per message (docs/performance.md).
"""

from __future__ import annotations

import json
import logging
import select
import time
from typing import Any

import attrs
import websocket

from ..._deadline import Deadline
from ..._streaming import Stream
from ...errors import CommandExited, DeadlineExpired, WriteFailed
from ...reasons import Reason
from .stream import (
    EXIT,
    STDERR,
    STDIN,
    STDIN_EOF,
    STDOUT,
    decode_exit,
    is_session_info,
    text_exit_code,
)

__all__ = ["SpritesCommandEnd"]

log = logging.getLogger("managoat_sandbox.providers.sprites")

#: How long a failed stdin send waits for the reader to see the command's end.
_SETTLE = 1.0
#: How long stop_command waits for the reader thread to finish.
_JOIN = 2.0
#: Missed keepalive intervals after which a silent connection is dead.
_DEAD_AFTER = 3
#: The most output bytes of messages that arrived back to back delivered as one frame.
_BATCH_LIMIT = 1024 * 1024


class _Batch:
    """Output of one stream read from consecutive messages, not yet delivered."""

    __slots__ = ("kind", "parts", "size")

    def __init__(self) -> None:
        self.kind: int | None = None
        self.parts: list[bytes | memoryview] = []
        self.size = 0

    def add(self, stream: Stream, kind: int, payload: bytes | memoryview) -> None:
        """Add output of stream ``kind`` (delivering what another stream left first)."""
        if self.kind != kind:
            self.flush(stream)
            self.kind = kind
        self.parts.append(payload)
        self.size += len(payload)

    def flush(self, stream: Stream) -> bool:
        """Deliver what has been gathered, as one frame; whether there was anything."""
        if not self.parts:
            return False
        _deliver(stream, self.kind, b"".join(self.parts))
        self.parts.clear()
        self.size = 0
        return True


def _deliver(stream: Stream, kind: int | None, data: bytes) -> None:
    """Deliver output of stream ``kind`` (stderr, else stdout)."""
    if kind == STDERR:
        stream.stderr(data)
    else:
        stream.stdout(data)


@attrs.define(eq=False)
class SpritesCommandEnd:
    """What a Sprites ``Command.private`` holds: the stream, its socket and the mode.

    ``attached`` commands rejoined a session; once their socket has closed they
    are not connected (``close_stdin`` raises ``CommandExited``), while a
    spawned command whose process exited keeps accepting ``close_stdin`` as a
    no-op.
    """

    stream: Stream
    ws: Any = attrs.field(repr=False)
    tty: bool
    attached: bool
    keepalive: float
    exited: bool = False
    session_id: str | None = None
    #: Messages read before the reader started (by :meth:`read_session_info`).
    early: list[tuple[int, Any]] = attrs.field(factory=list, repr=False)
    #: Asks the socket whether bytes are waiting (made on first use).
    _poller: Any = attrs.field(default=None, init=False, repr=False)

    def start(self) -> None:
        """Start the reader thread; stop_command aborts the socket to interrupt it."""
        self.stream.start(self._pump, on_stop=self.ws.abort)

    def read_session_info(self, timeout: float) -> None:
        """Before :meth:`start`: read until the server's ``session_info`` (the first
        message of every connection), so that :attr:`session_id` is known.

        Messages before it are kept for the reader, in order. Nothing is raised:
        after ``timeout`` seconds, or on a close or a failure (which the reader
        then meets), ``session_id`` stays ``None``.
        """
        ws = self.ws
        deadline = Deadline(timeout)
        while self.session_id is None:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                return
            try:
                ws.settimeout(remaining)
                opcode, data = ws.recv_data(control_frame=True)
            except (websocket.WebSocketException, OSError, ValueError):
                return
            if opcode == websocket.ABNF.OPCODE_TEXT and is_session_info(data):
                self._text(self.stream, data)
                continue
            self.early.append((opcode, data))
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                return

    # -- reader -----------------------------------------------------------

    def _pump(self, stream: Stream) -> None:
        ws = self.ws
        batch = _Batch()
        try:
            for opcode, data in self.early:
                if self._handle(stream, opcode, data):
                    return
            self.early.clear()
            ws.settimeout(self.keepalive)
            # Silence is counted while listening: a delivery that waits for the owner
            # (a full queue: back-pressure) is not the connection going quiet.
            heard = time.monotonic()
            while not stream.stopped.is_set():
                try:
                    opcode, data = ws.recv_data(control_frame=True)
                except websocket.WebSocketTimeoutException:
                    if batch.flush(stream):
                        heard = time.monotonic()
                    if time.monotonic() - heard >= _DEAD_AFTER * self.keepalive:
                        stream.fail(DeadlineExpired(Reason.TIMEOUT))
                        return
                    try:
                        ws.ping()
                    except (websocket.WebSocketException, OSError):
                        return
                    continue
                except (websocket.WebSocketException, OSError, ValueError):
                    return
                output = self._output(opcode, data)
                if output is not None:
                    batch.add(stream, *output)
                    if batch.size >= _BATCH_LIMIT or not self._more_waiting():
                        batch.flush(stream)
                    heard = time.monotonic()
                    continue
                batch.flush(stream)
                heard = time.monotonic()
                if self._handle(stream, opcode, data):
                    return
        finally:
            batch.flush(stream)
            self._close_quietly()

    def _more_waiting(self) -> bool:
        """Whether bytes of a next message have arrived already (never waits)."""
        sock = self.ws.sock
        if sock is None:
            return False
        pending = getattr(sock, "pending", None)
        if pending is not None and pending() > 0:
            return True
        try:
            if self._poller is None:
                if not hasattr(select, "poll"):
                    return bool(select.select([sock], [], [], 0)[0])
                self._poller = select.poll()
                self._poller.register(sock, select.POLLIN)
            return bool(self._poller.poll(0))
        except (OSError, ValueError):
            return False

    def _handle(self, stream: Stream, opcode: int, data: Any) -> bool:
        """Handle one message; ``True`` once the connection is done (a close, an exit)."""
        if opcode == websocket.ABNF.OPCODE_CLOSE:
            return True
        if opcode == websocket.ABNF.OPCODE_BINARY:
            return self._binary(stream, data)
        if opcode == websocket.ABNF.OPCODE_TEXT:
            return self._text(stream, data)
        return False

    def _output(self, opcode: int, data: bytes) -> tuple[int, bytes | memoryview] | None:
        """The stream and bytes of an output message; None for any other message."""
        if opcode != websocket.ABNF.OPCODE_BINARY or not data:
            return None
        if self.tty:
            return STDOUT, data
        if data[0] in (STDOUT, STDERR):
            return data[0], memoryview(data)[1:]
        return None

    def _binary(self, stream: Stream, data: bytes) -> bool:
        """Handle one binary message; ``True`` once the command has exited."""
        output = self._output(websocket.ABNF.OPCODE_BINARY, data)
        if output is not None:
            kind, payload = output
            _deliver(stream, kind, bytes(payload))
            return False
        if data and data[0] == EXIT:
            self._exit(stream, decode_exit(data[1:]))
            return True
        return False

    def _text(self, stream: Stream, data: bytes | str) -> bool:
        """Handle one JSON text message; ``True`` once the command has exited."""
        try:
            message = json.loads(data)
        except ValueError:
            log.debug("sprites: ignoring a text frame that is not JSON")
            return False
        if not isinstance(message, dict):
            return False
        kind = message.get("type")
        if kind == "session_info":
            if isinstance(message.get("tty"), bool):
                self.tty = message["tty"]
            session = message.get("session_id")
            if isinstance(session, (str, int)) and not isinstance(session, bool):
                self.session_id = str(session)
        elif kind == "exit":
            self._exit(stream, text_exit_code(message))
            return True
        return False

    def _exit(self, stream: Stream, code: int) -> None:
        self.exited = True
        stream.exit(code)

    def _close_quietly(self) -> None:
        """Say goodbye if still connected, then drop the socket; never raises."""
        try:
            if self.ws.connected:
                self.ws.send_close()
        except (websocket.WebSocketException, OSError):
            pass
        self.ws.shutdown()

    # -- the local end ----------------------------------------------------

    def write(self, data: bytes) -> None:
        """Send stdin bytes (``0x00`` + data; raw in TTY mode). Total, as the contract says."""
        self.stream.check_writable()
        if not data:
            return
        self._send(data if self.tty else STDIN + data)

    def close_stdin(self) -> None:
        """Send EOF (``0x04``; the EOF keystroke in TTY mode).

        Idempotent while connected, also after the process exited; an attached
        command whose session has ended is not connected (``CommandExited``).
        """
        self.stream.check_stdin()
        if self._exited_while_spawned():
            return
        if self.stream.finished.is_set():
            raise CommandExited(Reason.EXITED)
        try:
            self._send(STDIN_EOF)
        except CommandExited:
            if self._exited_while_spawned():
                return
            raise

    def _exited_while_spawned(self) -> bool:
        """Whether this is a spawned command whose exit frame has arrived."""
        return self.exited and not self.attached

    def _send(self, frame: bytes) -> None:
        try:
            self.ws.send_bytes(frame)
        except (websocket.WebSocketException, OSError) as error:
            if self.stream.stopped.is_set():
                raise CommandExited(Reason.DETACHED) from None
            if self.stream.finished.wait(_SETTLE):
                raise CommandExited(Reason.EXITED) from None
            raise WriteFailed(Reason.TRANSPORT, kind=type(error).__name__) from None

    def stop(self) -> None:
        """Detach this end (the remote process keeps running); idempotent, never raises."""
        self.stream.stop()
        self.stream.join(_JOIN)
