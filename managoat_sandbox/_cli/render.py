"""How results look: the one-line error, session lines, and the ``--json`` documents.

JSON encoding of output frames (one object per line)::

    {"type": "stdout", "data_b64": "aGk=", "text": "hi"}
    {"type": "stderr", "data_b64": "/w=="}
    {"type": "exit", "code": 3}
    {"type": "error", "error": "Unavailable", "detail": "closed_before_exit", "transient": true}

``data_b64`` (standard base64) is always there and is the exact bytes of the
chunk; ``text`` is a convenience, present only when the chunk is valid UTF-8
(a chunk may split a multi-byte character, so concatenate ``data_b64``, never
``text``, to rebuild the stream).
"""

from __future__ import annotations

import base64
import contextlib
import json
from datetime import datetime
from typing import Any

from ..errors import ProviderError, SandboxError, UnknownProvider
from ..frames import Exit, Stderr, Stdout
from ..types import FileInfo, Session

__all__ = [
    "error_document",
    "error_line",
    "file_document",
    "file_fields",
    "frame_document",
    "json_text",
    "printable",
    "session_document",
    "session_fields",
    "session_state",
]

#: Longest detail an error line shows (an HTTP body can be 64 KiB).
MAX_DETAIL = 1000


def printable(text: str) -> str:
    """``text`` safe to show on a terminal: every character that is not printable
    (``str.isprintable``) is written as a Python escape.

    That covers the C0 controls (ESC, CR, BEL, ...), DEL, the C1 controls, bidi
    overrides and other format characters, and line or paragraph separators, so
    a name, session id or command from a provider can neither rewrite the
    terminal nor disguise itself. Escapes read ``\\xHH``, ``\\uHHHH`` or
    ``\\UHHHHHHHH``; printable text (any script) is left as it is.
    """
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _escape(char) for char in text)


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def json_text(value: Any) -> str:
    """``value`` as one line of JSON, non-ASCII kept as UTF-8 but every character
    that is not printable written as a JSON ``\\u`` escape (the same data, safe on a
    terminal)."""
    text = json.dumps(value, ensure_ascii=False)
    if text.isprintable():
        return text
    return "".join(char if char.isprintable() else _json_escape(char) for char in text)


def _json_escape(char: str) -> str:
    code = ord(char)
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000  # outside the BMP: a UTF-16 surrogate pair, as JSON spells it
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def error_line(error: SandboxError | UnknownProvider) -> str:
    """``<Class>: <detail>`` on one bounded line (just the class when no detail), the
    class being the error's taxonomy class (a ``DeadlineExpired`` is an ``Unavailable``).

    An :class:`UnknownProvider` is its own message, which names the
    configured providers. Details never hold credentials (a library promise).
    """
    if isinstance(error, UnknownProvider):
        return str(error)
    text = " ".join(str(error).splitlines())
    if len(text) > MAX_DETAIL:
        text = text[:MAX_DETAIL] + "…"
    text = printable(text)
    name = error.taxonomy().__name__
    return f"{name}: {text}" if text else name


def error_document(error: SandboxError | UnknownProvider) -> dict[str, Any]:
    """The ``{"type": "error", ...}`` document for a failure."""
    if isinstance(error, UnknownProvider):
        return {
            "type": "error",
            "error": type(error).__name__,
            "detail": str(error),
            "configured": list(error.configured),
        }
    doc: dict[str, Any] = {"type": "error", "error": error.taxonomy().__name__}
    doc["detail"] = _plain(error.detail)
    doc["transient"] = error.transient
    if isinstance(error, ProviderError):
        doc["provider"] = error.provider
    return doc


def frame_document(frame: Stdout | Stderr | Exit) -> dict[str, Any]:
    """The JSON document of an output or exit frame (see the module docstring)."""
    if isinstance(frame, Exit):
        return {"type": "exit", "code": frame.code}
    doc: dict[str, Any] = {
        "type": "stdout" if isinstance(frame, Stdout) else "stderr",
        "data_b64": base64.b64encode(frame.data).decode("ascii"),
    }
    with contextlib.suppress(UnicodeDecodeError):
        doc["text"] = frame.data.decode("utf-8")
    return doc


def session_document(session: Session) -> dict[str, Any]:
    """A session as JSON; timestamps in ISO 8601, absent values ``null``."""
    return {
        "id": session.id,
        "command": session.command,
        "created_at": _iso(session.created_at),
        "last_activity_at": _iso(session.last_activity_at),
        "tty": session.tty,
        "ended": session.ended,
        "exit_code": session.exit_code,
    }


def session_state(session: Session) -> str:
    """What a session's line says of its command: ``running``, ``exited N``, ``ended``
    (with no exit code known), or ``-`` where the provider does not say."""
    if session.ended is None:
        return "-"
    if not session.ended:
        return "running"
    return "ended" if session.exit_code is None else f"exited {session.exit_code}"


def session_fields(session: Session) -> tuple[str, str, str, str]:
    """``(ID, STATE, CREATED, COMMAND)`` of a session's line (:func:`session_state`),
    ``-`` for what the provider did not say (the console escapes and tab-separates
    them)."""
    created = _iso(session.created_at) or "-"
    return session.id, session_state(session), created, session.command or "-"


def file_document(entry: FileInfo) -> dict[str, Any]:
    """A listing entry as JSON: every :class:`~managoat_sandbox.types.FileInfo` field,
    ``mode`` as a number (the permission bits), ``modified`` in ISO 8601, absent values
    ``null``."""
    return {
        "name": entry.name,
        "path": entry.path,
        "type": entry.type,
        "size": entry.size,
        "mode": entry.mode,
        "modified": _iso(entry.modified),
    }


def file_fields(entry: FileInfo) -> tuple[str, str, str, str, str]:
    """``(TYPE, MODE, SIZE, MODIFIED, NAME)`` of a listing line: the mode in four octal
    digits, ``-`` for what the provider did not say (the console escapes and
    tab-separates them)."""
    mode = "-" if entry.mode is None else f"{entry.mode:04o}"
    return entry.type, mode, str(entry.size), _iso(entry.modified) or "-", entry.name


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (tuples become lists, the unknown its ``repr``)."""
    try:
        return json.loads(json.dumps(value, default=repr))
    except (TypeError, ValueError):
        return repr(value)
