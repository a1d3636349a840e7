"""Reading files back: one collector for every adapter's ``read_file``.

:func:`collect` turns the pieces of a file, as they arrive from a provider,
into one ``bytes`` without holding the file twice: pieces go into a
``BytesIO`` whose buffer becomes the result without a copy, and each piece is
dropped once written. It enforces ``max_bytes`` as the pieces arrive, so a
file over the limit is refused before it is read to the end.

:func:`denied` is every adapter's answer to a path the sandbox's user may not
read, list or write, and :func:`refused` tells a provider's message that says
so (the hosted providers' file daemons are written in Go and word the
refusal as Go words ``EACCES`` and ``EPERM``).
"""

from __future__ import annotations

import io
from collections.abc import Iterable

from .errors import Denied, Truncated
from .reasons import Reason

__all__ = ["REFUSALS", "collect", "denied", "refused", "truncated"]

#: Go's text for ``EACCES`` and for ``EPERM``: how a provider's file daemon words a
#: refusal by file permissions (``open /p: permission denied``).
REFUSALS = ("permission denied", "operation not permitted")


def truncated(max_bytes: int) -> Truncated:
    """The error of a file holding more than ``max_bytes`` bytes."""
    return Truncated(Reason.MAX_BYTES, limit=max_bytes)


def denied(path: str) -> Denied:
    """``Denied(("path", path))``: the error of a path the sandbox's user may not read,
    list or write (file operations act as that user, on every adapter)."""
    return Denied(Reason.PATH, path=path)


def refused(text: object) -> bool:
    """Whether ``text`` (a provider's error message; anything else is not one) reports a
    refusal by file permissions: it holds one of :data:`REFUSALS`, in any case."""
    return isinstance(text, str) and any(words in text.lower() for words in REFUSALS)


def collect(
    pieces: Iterable[bytes], max_bytes: int | None = None, *, size: int | None = None
) -> bytes:
    """The concatenation of ``pieces``; ``Truncated(("max_bytes", n))`` once more than
    ``max_bytes`` bytes have arrived (no further piece is read), or at once when the
    provider announced a ``size`` over the limit."""
    if max_bytes is not None and size is not None and size > max_bytes:
        raise truncated(max_bytes)
    buffer = io.BytesIO()
    for piece in pieces:
        buffer.write(piece)
        if max_bytes is not None and buffer.tell() > max_bytes:
            raise truncated(max_bytes)
    return buffer.getvalue()
