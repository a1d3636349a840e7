"""Where the command line reads and writes: the one object that touches the std streams."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from ..errors import SandboxError, UnknownProvider
from .render import error_document, error_line, json_text, printable

__all__ = ["PROG", "Console"]

PROG = "managoat-sandbox"


class Console:
    """The CLI's standard streams and the only code that writes to them.

    The streams are ``sys.stdin``/``sys.stdout``/``sys.stderr`` as they are
    when the console is made, so tests replace those (pytest's capture, or
    ``monkeypatch``); stdin must have a binary ``.buffer``, as ``sys.stdin``
    does. Bytes go to a stream's binary layer (``.buffer``) after its text
    layer is flushed, so text and bytes keep their order and no byte is
    re-encoded; a stream without a binary layer (an ``io.StringIO``) gets the
    bytes decoded as UTF-8 with replacement. Every write is flushed: streamed
    output appears as it arrives.

    Text (:meth:`line`, :meth:`row`, :meth:`note`, :meth:`document`) is for people and may
    carry names, ids and commands a provider chose: none of it reaches the
    terminal with a control character (see :func:`.render.printable`). Bytes
    (:meth:`out`, :meth:`err`: a command's own output) are written raw.
    """

    def __init__(self, *, json_mode: bool = False) -> None:
        self.json_mode = json_mode
        self._stdin = sys.stdin
        self._stdout = sys.stdout
        self._stderr = sys.stderr
        self._status = False

    # -- writing --------------------------------------------------------------

    def out(self, data: bytes) -> None:
        """Write raw bytes to stdout."""
        _write(self._stdout, data)

    def err(self, data: bytes) -> None:
        """Write raw bytes to stderr."""
        _write(self._stderr, data)

    def line(self, text: str) -> None:
        """Write one line of text to stdout, non-printables (tabs too) escaped."""
        self.out(f"{printable(text)}\n".encode())

    def row(self, *fields: str) -> None:
        """Write one line of tab-separated fields to stdout, each escaped as by :meth:`line`
        (so a tab inside a field cannot shift the columns)."""
        self.out(("\t".join(printable(field) for field in fields) + "\n").encode())

    def note(self, text: str) -> None:
        """Write one ``managoat-sandbox: <text>`` line to stderr, non-printables escaped."""
        self.err(f"{PROG}: {printable(text)}\n".encode())

    def failure(self, error: SandboxError | UnknownProvider, hint: str = "") -> None:
        """Report a failure: ``managoat-sandbox: error: <Class>: <detail><hint>`` on
        stderr, after its ``{"type": "error", ...}`` document on stdout under ``--json``."""
        if self.json_mode:
            self.document(error_document(error))
        self.note(f"error: {error_line(error)}{hint}")

    def stderr_is_terminal(self) -> bool:
        """Whether stderr is a terminal (where a status line may be shown)."""
        isatty = getattr(self._stderr, "isatty", None)
        return bool(isatty is not None and isatty())

    def status(self, text: str) -> None:
        """Show ``text`` as the status line on stderr, replacing the one shown (for a
        terminal only: the caller checks :meth:`stderr_is_terminal`)."""
        self._status = True
        self.err(f"\r{printable(text)}\x1b[K".encode())

    def clear_status(self) -> None:
        """Erase the status line, if one is shown."""
        if self._status:
            self._status = False
            self.err(b"\r\x1b[K")

    def document(self, value: Any) -> None:
        """Write ``value`` as one line of JSON to stdout (non-ASCII kept as UTF-8,
        non-printables as ``\\u`` escapes)."""
        self.line(json_text(value))

    # -- reading --------------------------------------------------------------

    def stdin_reader(self) -> Callable[[int], bytes]:
        """A function reading up to ``n`` bytes of stdin, returning ``b""`` at EOF.

        It returns as soon as *some* input is there, so a terminal's lines are
        forwarded as they are typed. It reads the file descriptor itself when
        there is one: a read blocked in a daemon thread must not hold the lock
        of ``sys.stdin.buffer``, which the interpreter takes at exit (a fatal
        error otherwise). An in-memory stdin is read through its binary
        ``.buffer`` with ``read1``.
        """
        try:
            return functools.partial(os.read, self._stdin.fileno())
        except (OSError, ValueError):  # no descriptor: an in-memory stream
            source: Any = self._stdin.buffer
            reader: Callable[[int], bytes] = source.read1
            return reader

    def read_all(self) -> bytes:
        """All of stdin (its binary ``.buffer``), as bytes."""
        return self._stdin.buffer.read()


def _write(stream: TextIO, data: bytes) -> None:
    binary: Any = getattr(stream, "buffer", None)
    if binary is None:
        stream.write(data.decode("utf-8", errors="replace"))
        stream.flush()
    else:
        stream.flush()
        binary.write(data)
        binary.flush()
