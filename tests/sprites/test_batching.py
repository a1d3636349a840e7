"""The Sprites reader joins output messages that have already arrived, and only those
(docs/performance.md): fewer, larger frames for a fast stream, no wait for a slow one.

The socket is a stand-in whose messages "arrive" when the test says so: ``pending()``
(what a TLS socket reports for bytes it already holds) counts the messages that
have arrived and not been read, and a read of one that has not arrived blocks until
it does. So what has arrived at each read is fixed by the test, not by timing.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import websocket

from managoat_sandbox import reasons
from managoat_sandbox._streaming import Stream
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.frames import Error, Exit, Stderr, Stdout
from managoat_sandbox.providers.sprites import end
from managoat_sandbox.providers.sprites.end import SpritesCommandEnd
from managoat_sandbox.testing.mailbox import Mailbox, is_terminal

BINARY = websocket.ABNF.OPCODE_BINARY
WAIT = 10.0


class _Socket:
    """Holds what has arrived itself (``pending``); its descriptor, a pipe nobody
    writes, is never readable."""

    def __init__(self, line: _Line) -> None:
        self.line = line
        self.quiet, self.unused = os.pipe()

    def pending(self) -> int:
        return self.line.arrived_unread()

    def fileno(self) -> int:
        return self.quiet

    def close(self) -> None:
        os.close(self.quiet)
        os.close(self.unused)


class _Line:
    """A WebSocket whose messages arrive when :meth:`arrive` is called."""

    def __init__(self) -> None:
        self.messages: list[tuple[int, bytes]] = []
        self.read = 0
        self.changed = threading.Condition()
        self.sock = _Socket(self)
        self.connected = True

    def arrive(self, *messages: bytes) -> None:
        with self.changed:
            self.messages.extend((BINARY, message) for message in messages)
            self.changed.notify_all()

    def drop(self) -> None:
        with self.changed:
            self.messages.append((-1, b""))
            self.changed.notify_all()

    def arrived_unread(self) -> int:
        with self.changed:
            return len(self.messages) - self.read

    def recv_data(self, control_frame: bool = False) -> tuple[int, bytes]:
        with self.changed:
            if not self.changed.wait_for(lambda: self.read < len(self.messages), WAIT):
                raise websocket.WebSocketTimeoutException("nothing arrived")
            opcode, data = self.messages[self.read]
            self.read += 1
        if opcode == -1:
            raise websocket.WebSocketConnectionClosedException("dropped")
        return opcode, data

    def settimeout(self, seconds: Any) -> None:
        pass

    def send_close(self) -> None:
        self.connected = False

    def shutdown(self) -> None:
        self.connected = False
        self.sock.close()

    def abort(self) -> None:
        self.drop()


def _reading(line: _Line) -> tuple[Stream, Mailbox]:
    box = Mailbox()
    stream = Stream("cmd-1", box, label="sprites-test")
    SpritesCommandEnd(stream, line, tty=False, attached=False, keepalive=WAIT).start()
    return stream, box


def test_output_that_arrived_together_is_one_frame_per_stream_run_in_order() -> None:
    line = _Line()
    line.arrive(b"\x01a", b"\x01b", b"\x02c", b"\x02d", b"\x01e", b"\x03\x04")
    stream, box = _reading(line)
    box.expect(is_terminal("cmd-1"), WAIT)
    assert box.history() == [
        Stdout("cmd-1", b"ab"),
        Stderr("cmd-1", b"cd"),
        Stdout("cmd-1", b"e"),
        Exit("cmd-1", 4),
    ]
    stream.stop()


def test_output_is_delivered_without_waiting_for_what_has_not_arrived() -> None:
    line = _Line()
    line.arrive(b"\x01prompt> ")
    stream, box = _reading(line)
    box.expect(lambda frame: frame == Stdout("cmd-1", b"prompt> "), WAIT)
    line.arrive(b"\x01answer", b"\x03\x00")
    box.expect(is_terminal("cmd-1"), WAIT)
    assert box.history() == [
        Stdout("cmd-1", b"prompt> "),
        Stdout("cmd-1", b"answer"),
        Exit("cmd-1", 0),
    ]
    stream.stop()


def test_a_join_is_bounded_and_a_drop_still_delivers_what_was_read() -> None:
    line = _Line()
    chunk = b"x" * (end._BATCH_LIMIT // 2)
    line.arrive(*(b"\x01" + chunk for _ in range(3)))
    line.drop()
    stream, box = _reading(line)
    box.expect(is_terminal("cmd-1"), WAIT)
    assert box.history() == [
        Stdout("cmd-1", chunk * 2),
        Stdout("cmd-1", chunk),
        Error("cmd-1", Unavailable(reasons.CLOSED_BEFORE_EXIT)),
    ]
    stream.stop()
