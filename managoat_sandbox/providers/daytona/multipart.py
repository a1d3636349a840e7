"""A streaming reader of ``multipart/form-data`` response bodies
(docs/protocols/daytona.md#reading-and-listing).

The toolbox answers a bulk download with one part per requested file. This
reader walks such a body as it comes off the wire: :func:`parts` yields each
part's headers at once and its content as an iterator of pieces, so a part is
never held whole here and a caller can stop early (closing the response).

It keeps at most one network piece plus the length of the delimiter between
reads. Each part's content must be consumed (or abandoned with the rest of
the body) before the next part is read. A body that ends before its closing
delimiter, whose part headers run past :data:`HEADER_LIMIT`, or that goes on
after its closing delimiter with anything but whitespace raises
:class:`MalformedMultipart` — the last because a server with a fixed boundary
(the Daytona daemon's) sends a file holding ``CRLF--boundary--`` as a body
that seems to end early: refusing the epilogue refuses the short file.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from email.message import Message

import attrs

__all__ = ["HEADER_LIMIT", "MalformedMultipart", "Part", "boundary_of", "parts"]

#: The most bytes of headers one part may carry.
HEADER_LIMIT = 16 * 1024
_CRLF = b"\r\n"
_HEADERS_END = b"\r\n\r\n"


class MalformedMultipart(ValueError):
    """The body is not the multipart body it claims to be; ``reason`` says how."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@attrs.frozen
class Part:
    """One part: its ``headers`` (names lower-cased) and its ``content``, streamed."""

    headers: dict[str, str]
    content: Iterator[bytes] = attrs.field(repr=False)


def boundary_of(content_type: str | None) -> bytes:
    """The boundary of a ``multipart/*`` Content-Type; MalformedMultipart otherwise."""
    message = Message()
    message["Content-Type"] = content_type or ""
    boundary = message.get_param("boundary")
    if (
        message.get_content_maintype() != "multipart"
        or not isinstance(boundary, str)
        or not boundary
        or len(boundary) > 200
    ):
        raise MalformedMultipart("not_multipart")
    try:
        return boundary.encode("ascii")
    except UnicodeEncodeError:
        raise MalformedMultipart("bad_boundary") from None


class _Buffer:
    """The unread bytes of the body and the pieces still to come."""

    def __init__(self, pieces: Iterable[bytes]) -> None:
        self._pieces = iter(pieces)
        self.data = bytearray()

    def fill(self) -> bool:
        """Append the next non-empty piece; False at the end of the body."""
        for piece in self._pieces:
            if piece:
                self.data += piece
                return True
        return False

    def take(self, size: int) -> bytes:
        """Remove and return the first ``size`` bytes."""
        taken = bytes(self.data[:size])
        del self.data[:size]
        return taken

    def find(self, needle: bytes, limit: int) -> int:
        """Where ``needle`` starts, reading more as needed; -1 when it does not start
        within the first ``limit`` bytes; MalformedMultipart if the body ends first."""
        while True:
            found = self.data.find(needle)
            if found >= 0:
                return found if found <= limit else -1
            if len(self.data) > limit:
                return -1
            if not self.fill():
                raise MalformedMultipart("truncated")

    def ensure(self, size: int) -> None:
        """Make at least ``size`` bytes available; MalformedMultipart if the body ends first."""
        while len(self.data) < size:
            if not self.fill():
                raise MalformedMultipart("truncated")


def _headers(block: bytes) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in block.split(_CRLF):
        if not line:
            continue
        name, colon, value = line.partition(b":")
        if not colon or not name.strip():
            raise MalformedMultipart("bad_header")
        headers[name.strip().decode("latin-1").lower()] = value.strip().decode("latin-1")
    return headers


def _content(buffer: _Buffer, delimiter: bytes) -> Iterator[bytes]:
    """A part's content up to ``delimiter`` (``CRLF--boundary``), which stays unread."""
    keep = len(delimiter) - 1
    while True:
        found = buffer.data.find(delimiter)
        if found >= 0:
            if found:
                yield buffer.take(found)
            return
        if len(buffer.data) > keep:
            yield buffer.take(len(buffer.data) - keep)
        if not buffer.fill():
            raise MalformedMultipart("truncated")


def _epilogue(buffer: _Buffer) -> None:
    """Read what follows the closing delimiter; MalformedMultipart unless it is whitespace."""
    while True:
        if buffer.data.strip(b" \t\r\n"):
            raise MalformedMultipart("data_after_close")
        buffer.data.clear()
        if not buffer.fill():
            return


def parts(pieces: Iterable[bytes], boundary: bytes) -> Iterator[Part]:
    """The parts of the multipart body arriving as ``pieces``, in order.

    The preamble before the first delimiter is ignored; after the closing one
    only whitespace may follow.
    """
    buffer = _Buffer(pieces)
    dash = b"--" + boundary
    delimiter = _CRLF + dash
    # The first delimiter may open the body, without the CRLF before it.
    start = buffer.find(dash, limit=HEADER_LIMIT)
    if start < 0 or (start and buffer.data[start - 2 : start] != _CRLF):
        raise MalformedMultipart("no_first_boundary")
    buffer.take(start + len(dash))
    while True:
        buffer.ensure(2)
        if buffer.data[:2] == b"--":
            buffer.take(2)
            _epilogue(buffer)
            return
        end_of_line = buffer.find(_CRLF, limit=HEADER_LIMIT)
        if end_of_line < 0 or buffer.data[:end_of_line].strip(b" \t"):
            raise MalformedMultipart("bad_boundary_line")
        buffer.take(end_of_line)
        # The headers run from this CRLF to the blank line (an empty block is no headers).
        end = buffer.find(_HEADERS_END, limit=HEADER_LIMIT)
        if end < 0:
            raise MalformedMultipart("headers_too_large")
        headers = _headers(buffer.take(end + len(_HEADERS_END)))
        content = _content(buffer, delimiter)
        yield Part(headers, content)
        for _ in content:
            pass
        buffer.take(len(delimiter))
