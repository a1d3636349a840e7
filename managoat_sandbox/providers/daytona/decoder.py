"""A command's journal, decoded incrementally — in one read, or across replays from byte zero.

The journal is the recorded output attach replays
(docs/protocols/contract.md#attach-replays-from-byte-zero); here, the
daemon's log of a session command.

The daemon journals a session command as one append-only byte stream in which
each line is preceded by a 3-byte channel marker (``01 01 01`` stdout,
``02 02 02`` stderr). Every way of reading it — the WebSocket follow, a plain
snapshot, the answer of a synchronous exec — starts at byte zero; a read may
end early, and a flaky server may serve a stale, shorter prefix.

:class:`JournalDecoder` remembers, per channel, how many of that channel's bytes it
has consumed. Each read is a :class:`JournalRead` that demultiplexes the bytes
it is fed and passes on only the bytes past that count, so a replay, a later
snapshot or a stale prefix yields only what is new: no byte twice, none lost.
Demultiplexing is prefix-stable: bytes before the first marker belong to
stdout (so does a journal from a daemon that strips its markers), a lone
``01``/``02`` followed by other bytes is content, and a trailing ``01``,
``0101``, ``02`` or ``0202`` is held back until the next bytes show whether
it starts a marker — so the channels of a journal prefix are prefixes of the
channels of the whole.

A channel of a command run by our shim (:mod:`.shim`) is *framed*: each line
``:<base64>`` carries raw output bytes, the empty frame ``:`` ends the stream,
and on stdout, after its end, ``!<code>`` carries the command's exit code.
An exec's shim that cannot enter the command's working directory writes the
line :data:`NO_DIR` on stdout instead: :attr:`JournalDecoder.no_dir`.
Only complete lines are decoded; any other line (an error printed by the shim
itself) passes through as text. The journal is complete (:attr:`JournalDecoder.complete`) once
both streams have ended and the code is known: everything the command wrote
has been consumed, and its exit code with it. A channel not framed by our shim
(a session someone else made) yields its bytes as journaled and never
completes on its own.
"""

from __future__ import annotations

import base64
import binascii
import re

__all__ = ["NO_DIR", "STDERR", "STDOUT", "Event", "JournalDecoder", "JournalRead"]

STDOUT = 1
STDERR = 2
#: One piece of decoded output: ``(STDOUT | STDERR, bytes)``, in journal order.
Event = tuple[int, bytes]

_MARKER = re.compile(rb"\x01\x01\x01|\x02\x02\x02")
_STDOUT_MARK = b"\x01\x01\x01"
_PARTIAL_MARKS = (b"\x01\x01", b"\x02\x02", b"\x01", b"\x02")
_END_FRAME = b":"
#: What an exec's shim writes on stdout, instead of any frame, when it cannot enter
#: the command's working directory: the command never started.
NO_DIR = b"?dir"


class _Channel:
    """One stream of the journal: what was consumed of it, and its frame decoder."""

    def __init__(self, *, framed: bool, stdout: bool) -> None:
        self.framed = framed
        self.stdout = stdout
        #: How many of this channel's journal bytes have been consumed.
        self.seen = 0
        self.ended = False
        self.code: int | None = None
        self.no_dir = False
        self._line = bytearray()

    def take(self, data: bytes) -> bytes:
        """Consume ``data`` (new bytes of this channel); the output bytes it completes."""
        self.seen += len(data)
        if not self.framed:
            return data
        line = self._line
        line += data
        if b"\n" not in data:
            return b""
        end = line.rfind(b"\n") + 1
        complete = bytes(line[:end])
        del line[:end]
        return b"".join(self._frame(body) for body in complete.split(b"\n")[:-1])

    def _frame(self, body: bytes) -> bytes:
        if body == NO_DIR and self.stdout and not self.ended:
            self.no_dir = True
            return b""
        if body == _END_FRAME:
            self.ended = True
            return b""
        if self.ended and self.stdout and self.code is None and body[:1] == b"!":
            digits = body[1:]
            if digits.isdigit() and digits.isascii():
                self.code = int(digits)
                return b""
        if body[:1] == _END_FRAME:
            try:
                return base64.b64decode(body[1:], validate=True)
            except binascii.Error:
                pass
        return body + b"\n"


class JournalDecoder:
    """The decoder of one command's journal: what has been consumed of it, across every
    read of it."""

    def __init__(self, *, framed: bool) -> None:
        self.framed = framed
        self.channels = (
            _Channel(framed=framed, stdout=True),
            _Channel(framed=framed, stdout=False),
        )

    @property
    def consumed(self) -> int:
        """Journal bytes consumed so far (both channels); grows with every new byte."""
        return self.channels[0].seen + self.channels[1].seen

    @property
    def complete(self) -> bool:
        """Whether both framed streams ended and the exit code is known."""
        out, err = self.channels
        return self.framed and out.ended and err.ended and out.code is not None

    @property
    def no_dir(self) -> bool:
        """Whether the shim said the command's working directory could not be entered
        (the command never started)."""
        return self.channels[0].no_dir

    @property
    def code(self) -> int | None:
        """The exit code the shim wrote into the journal, once consumed."""
        return self.channels[0].code

    def read(self) -> JournalRead:
        """A new read of the journal, starting at byte zero."""
        return JournalRead(self)

    def split_read(self, stdout: bytes, stderr: bytes) -> list[Event]:
        """The new output of a read whose channels came already apart (the JSON shape)."""
        events: list[Event] = []
        for kind, data in ((STDOUT, stdout), (STDERR, stderr)):
            read = self.read()
            read.route(kind, data, events)
        return events


class JournalRead:
    """One pass over the journal from byte zero: feed it the bytes in order."""

    def __init__(self, decoder: JournalDecoder) -> None:
        self._decoder = decoder
        self._target = STDOUT
        self._held = b""
        self._positions = [0, 0]

    def feed(self, chunk: bytes) -> list[Event]:
        """Demultiplex the next bytes of this read; the new output they complete."""
        data = self._held + chunk if self._held else chunk
        events: list[Event] = []
        position = 0
        for found in _MARKER.finditer(data):
            self.route(self._target, data[position : found.start()], events)
            self._target = STDOUT if found.group() == _STDOUT_MARK else STDERR
            position = found.end()
        tail = data[position:] if position else data
        keep = next((len(p) for p in _PARTIAL_MARKS if tail.endswith(p)), 0)
        self._held = tail[len(tail) - keep :] if keep else b""
        self.route(self._target, tail[: len(tail) - keep] if keep else tail, events)
        return events

    def finish(self) -> list[Event]:
        """The read is the whole journal: bytes held back as a possible marker are content."""
        held, self._held = self._held, b""
        events: list[Event] = []
        self.route(self._target, held, events)
        return events

    def route(self, kind: int, data: bytes, events: list[Event]) -> None:
        """Pass the part of ``data`` (the next bytes of channel ``kind`` in this read) not
        consumed before to its channel, adding the output it completes to ``events``."""
        if not data:
            return
        index = kind - 1
        start = self._positions[index]
        self._positions[index] = start + len(data)
        channel = self._decoder.channels[index]
        known = channel.seen - start
        if known >= len(data):
            return
        output = channel.take(data[known:] if known > 0 else data)
        if output:
            events.append((kind, output))
