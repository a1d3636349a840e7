"""A ``multipart/form-data`` request body streamed from chunks, for one file part whose
size is never held in memory (a staged transfer's archive).

Iterating a :class:`StreamedForm` yields the text fields, the file part's header,
the file's chunks as they come, and the closing delimiter — again from the start
each time, when its chunks can be iterated again (so a request that is sent again
sends it whole). Field values and the file name are written as they are, so they
must be plain text a quoted header parameter can carry: no quote, backslash, CR,
LF or NUL (``ValueError`` otherwise).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator

import attrs

__all__ = ["StreamedForm"]

_UNSAFE = frozenset('"\\\r\n\0')


def _plain(value: str) -> str:
    if _UNSAFE & set(value):
        raise ValueError(f"{value!r} cannot be carried as it is in a multipart header")
    return value


@attrs.frozen
class StreamedForm:
    """Text ``fields``, then the file part ``file_field`` named ``filename`` holding
    ``chunks``."""

    fields: tuple[tuple[str, str], ...]
    file_field: str
    filename: str
    chunks: Iterable[bytes] = attrs.field(repr=False)
    boundary: str = attrs.field(factory=lambda: "managoat-" + secrets.token_hex(16))

    @property
    def content_type(self) -> str:
        """The request's ``Content-Type`` header value."""
        return f"multipart/form-data; boundary={self.boundary}"

    def __iter__(self) -> Iterator[bytes]:
        head = "".join(
            f"--{self.boundary}\r\nContent-Disposition: form-data; "
            f'name="{_plain(name)}"\r\n\r\n{_plain(value)}\r\n'
            for name, value in self.fields
        )
        head += (
            f"--{self.boundary}\r\nContent-Disposition: form-data; "
            f'name="{_plain(self.file_field)}"; filename="{_plain(self.filename)}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        yield head.encode("utf-8")
        yield from self.chunks
        yield f"\r\n--{self.boundary}--\r\n".encode("ascii")
