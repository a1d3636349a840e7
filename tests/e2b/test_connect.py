"""The Connect envelope codec: layout, split and merged reads, trailers, refusals."""

from __future__ import annotations

import pytest

from managoat_sandbox.providers.e2b import connect
from managoat_sandbox.providers.e2b.connect import CodecError, Decoder, Envelope, encode

START = {"event": {"start": {"pid": 42}}}
DATA = {"event": {"data": {"stdout": "aGVsbG8K"}}}
END0 = {"event": {"end": {"exited": True, "status": "exit status 0"}}}


def test_encode_matches_the_reference_bytes() -> None:
    assert encode(START) == b"\x00\x00\x00\x00\x1e" + b'{"event":{"start":{"pid":42}}}'
    assert encode({}, end_stream=True) == b"\x02\x00\x00\x00\x02{}"
    request = {
        "process": {"cmd": "bash", "args": ["-lc", "echo hi"], "envs": {}},
        "tag": "fountain-7",
    }
    assert encode(request)[:5] == b"\x00\x00\x00\x00\x50"


def test_a_message_round_trips() -> None:
    assert Decoder().feed(encode(DATA)) == [Envelope(False, DATA)]


def test_several_envelopes_in_one_chunk_decode_in_order() -> None:
    chunk = encode(START) + encode(DATA) + encode(END0) + encode({}, end_stream=True)
    assert Decoder().feed(chunk) == [
        Envelope(False, START),
        Envelope(False, DATA),
        Envelope(False, END0),
        Envelope(True, {}),
    ]


def test_an_envelope_split_across_chunks_is_held_until_whole() -> None:
    wire = encode(START) + encode(DATA)
    decoder = Decoder()
    out: list[Envelope] = []
    for byte in wire:
        out += decoder.feed(bytes([byte]))
    assert out == [Envelope(False, START), Envelope(False, DATA)]
    assert decoder.pending == b""


def test_header_split_from_its_body() -> None:
    wire = encode(DATA)
    decoder = Decoder()
    assert decoder.feed(wire[:5]) == []
    assert decoder.pending == wire[:5]
    assert decoder.feed(wire[5:]) == [Envelope(False, DATA)]


def test_two_messages_and_a_partial_third_keep_the_remainder() -> None:
    third = encode(END0)
    decoder = Decoder()
    assert decoder.feed(encode(START) + encode(DATA) + third[:3]) == [
        Envelope(False, START),
        Envelope(False, DATA),
    ]
    assert decoder.pending == third[:3]


def test_empty_and_short_input_decode_to_nothing() -> None:
    decoder = Decoder()
    assert decoder.feed(b"") == []
    assert decoder.feed(b"\x00\x00") == []
    assert decoder.pending == b"\x00\x00"


def test_end_of_stream_trailer_and_error_trailer() -> None:
    error = {"error": {"code": "not_found", "message": "process with pid 9 not found"}}
    wire = encode(error, end_stream=True)
    assert wire[:5] == b"\x02\x00\x00\x00\x47"
    assert Decoder().feed(wire) == [Envelope(True, error)]
    assert Decoder().feed(b"\x02\x00\x00\x00\x00") == [Envelope(True, {})]


def test_a_compressed_envelope_is_refused() -> None:
    with pytest.raises(CodecError, match="compressed"):
        Decoder().feed(b"\x01\x00\x00\x00\x02{}")


def test_unknown_flags_are_refused() -> None:
    with pytest.raises(CodecError, match="flags"):
        Decoder().feed(b"\x80\x00\x00\x00\x02{}")


def test_malformed_json_is_refused() -> None:
    with pytest.raises(CodecError, match="JSON"):
        Decoder().feed(b"\x00\x00\x00\x00\x03{x}")


@pytest.mark.parametrize(
    "payload",
    [
        b'{"a":"\xff"}',  # not UTF-8
        "\ufeff{}".encode(),  # a byte order mark
        '{"a":1}'.encode("utf-16"),  # JSON, but not UTF-8
    ],
)
def test_a_payload_that_is_not_utf8_json_is_refused(payload: bytes) -> None:
    with pytest.raises(CodecError, match="JSON"):
        Decoder().feed(b"\x00" + len(payload).to_bytes(4, "big") + payload)


def test_utf8_text_in_a_payload_decodes() -> None:
    payload = '{"path":"/tmp/ü"}'.encode()
    envelope = b"\x00" + len(payload).to_bytes(4, "big") + payload
    assert [e.message for e in Decoder().feed(envelope)] == [{"path": "/tmp/ü"}]


def test_an_oversized_envelope_is_refused_before_it_is_buffered() -> None:
    header = b"\x00" + (connect.MAX_ENVELOPE + 1).to_bytes(4, "big")
    with pytest.raises(CodecError, match="exceeds"):
        Decoder().feed(header)
