"""The agent's framing: incremental, bounded, and the same for socket and journal."""

from __future__ import annotations

import pytest

from managoat_sandbox._engine import wire
from managoat_sandbox._engine.errors import EngineError


def test_frames_arrive_whole_whatever_the_chunking() -> None:
    stream = (
        wire.frame(wire.OUT, b"hello")
        + wire.frame(wire.ERR, b"")
        + wire.message(wire.REPLY, {"ok": True}, b"\x00blob")
    )
    for size in (1, 2, 3, 7, len(stream)):
        parser = wire.Parser()
        got = []
        for start in range(0, len(stream), size):
            parser.feed(stream[start : start + size])
            got.extend(parser.frames())
        assert got[:2] == [(wire.OUT, b"hello"), (wire.ERR, b"")]
        assert wire.parse_message(got[2][1]) == ({"ok": True}, b"\x00blob")
        assert parser.pending == 0


def test_has_frame_is_true_only_once_a_whole_frame_is_buffered() -> None:
    frame = wire.frame(wire.OUT, b"x" * 100)
    parser = wire.Parser()
    for cut in (0, 1, wire.HEADER.size, len(frame) - 1):
        parser = wire.Parser()
        parser.feed(frame[:cut])
        assert not parser.has_frame()
    parser.feed(frame[len(frame) - 1 :])
    assert parser.has_frame()
    parser.next()
    assert not parser.has_frame()


def test_unknown_kinds_and_oversized_frames_are_refused_before_buffering() -> None:
    parser = wire.Parser(kinds=frozenset((wire.OUT,)))
    parser.feed(wire.frame(wire.ERR, b"x"))
    with pytest.raises(EngineError):
        parser.next()
    parser = wire.Parser(limit=10)
    parser.feed(wire.HEADER.pack(wire.OUT, 11))
    with pytest.raises(EngineError):
        parser.next()


@pytest.mark.parametrize(
    "payload", [b"", b"\x00\x00\x00\x09{}", b"\x00\x00\x00\x02[]", b"\x00\x00\x00\x02{x"]
)
def test_malformed_messages_are_engine_errors(payload: bytes) -> None:
    with pytest.raises(EngineError):
        wire.parse_message(payload)
