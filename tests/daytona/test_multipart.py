"""The streaming multipart reader the Daytona adapter parses bulk downloads with."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise

import pytest

from managoat_sandbox.providers.daytona.multipart import (
    HEADER_LIMIT,
    MalformedMultipart,
    boundary_of,
    parts,
)

BOUNDARY = b"DAYTONA-FILE-BOUNDARY"
#: Content that looks like the delimiter without being it, and binary bytes.
TRICKY = (
    b"--DAYTONA-FILE-BOUNDARY in a line\r\n--DAYTONA-FILE-BOUNDAR\r\n"
    + bytes(range(256))
    + b"\r\n-"
)


def body(*sections: tuple[bytes, bytes], preamble: bytes = b"", epilogue: bytes = b"") -> bytes:
    """A multipart body of ``(headers, content)`` sections, as Go's multipart writer lays
    one out (headers as raw lines, each ending in CRLF)."""
    out = preamble + (b"\r\n" if preamble else b"")
    for index, (headers, content) in enumerate(sections):
        out += (b"\r\n" if index else b"") + b"--" + BOUNDARY + b"\r\n" + headers + b"\r\n"
        out += content
    return out + b"\r\n--" + BOUNDARY + b"--\r\n" + epilogue


FILE = (
    b'Content-Disposition: form-data; name="file"; filename="/tmp/a"\r\n'
    b"Content-Type: application/octet-stream\r\n",
    TRICKY,
)
ERROR = (b'Content-Disposition: form-data; name="error"; filename="/tmp/b"\r\n', b'{"x": 1}')


def read(pieces: list[bytes]) -> list[tuple[dict[str, str], bytes]]:
    return [(part.headers, b"".join(part.content)) for part in parts(pieces, BOUNDARY)]


def split_at(data: bytes, *cuts: int) -> list[bytes]:
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in pairwise(edges)]


def test_parts_are_the_same_however_the_body_is_cut_into_pieces() -> None:
    data = body(FILE, ERROR, preamble=b"ignored", epilogue=b"\r\n \t\r\n")
    expected = [
        (
            {
                "content-disposition": 'form-data; name="file"; filename="/tmp/a"',
                "content-type": "application/octet-stream",
            },
            TRICKY,
        ),
        ({"content-disposition": 'form-data; name="error"; filename="/tmp/b"'}, b'{"x": 1}'),
    ]
    assert read([data]) == expected
    assert read([bytes([byte]) for byte in data]) == expected
    for cut in range(1, len(data)):
        assert read(split_at(data, cut)) == expected, cut


def test_a_part_without_headers_and_an_empty_part_are_parts() -> None:
    assert read([body((b"", b"content"), (b"X-A: 1\r\n", b""))]) == [
        ({}, b"content"),
        ({"x-a": "1"}, b""),
    ]


def test_a_body_cut_before_its_closing_delimiter_is_malformed_wherever_it_is_cut() -> None:
    data = body(FILE, ERROR)
    closing = data.rindex(b"--" + BOUNDARY + b"--") + len(BOUNDARY) + 4
    for cut in range(closing):
        with pytest.raises(MalformedMultipart) as caught:
            read([data[:cut]])
        assert caught.value.reason in ("truncated", "no_first_boundary"), cut


def test_content_streams_before_the_body_has_arrived() -> None:
    """A part's first bytes come out while the rest of the body is still unread."""
    pulled: list[int] = []

    def pieces() -> Iterator[bytes]:
        head = b"--" + BOUNDARY + b'\r\nContent-Disposition: form-data; name="file"\r\n\r\n'
        for index, piece in enumerate(
            [head, b"x" * 4096, b"y" * 4096, b"z" * 4096, b"\r\n--" + BOUNDARY + b"--\r\n"]
        ):
            pulled.append(index)
            yield piece

    part = next(parts(pieces(), BOUNDARY))
    first = next(part.content)
    assert first.startswith(b"x") and len(pulled) < 5


def test_data_after_the_closing_delimiter_is_malformed() -> None:
    """A file holding ``CRLF--boundary--`` seems to end the body early: what follows
    is refused, so the short file is never taken for the whole one."""
    with pytest.raises(MalformedMultipart, match="data_after_close"):
        read([body((b"", b"start")), b"rest of the file"])


def test_oversized_headers_and_garbage_are_malformed() -> None:
    huge = b"X-Big: " + b"a" * (HEADER_LIMIT + 10) + b"\r\n"
    with pytest.raises(MalformedMultipart, match="headers_too_large"):
        read([body((huge, b"x"))])
    with pytest.raises(MalformedMultipart, match="bad_header"):
        read([body((b"no colon here\r\n", b"x"))])
    with pytest.raises(MalformedMultipart, match="no_first_boundary"):
        read([b"x" * (HEADER_LIMIT + 10)])


def test_boundary_of_reads_the_content_type_parameter() -> None:
    assert boundary_of("multipart/form-data; boundary=DAYTONA-FILE-BOUNDARY") == BOUNDARY
    assert boundary_of('multipart/form-data; boundary="a b:c"') == b"a b:c"
    for bad in (None, "", "application/json", "multipart/form-data", "text/plain; boundary=x"):
        with pytest.raises(MalformedMultipart):
            boundary_of(bad)
