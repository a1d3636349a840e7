"""Path patterns for faults: regular expressions matched in linear time, by RE2.

A fault's ``path`` is searched in the request path, as ``re.search`` would,
but by RE2 (the ``google-re2`` package of the ``emulators`` extra), which runs
in time linear in the path and never backtracks: a pattern such as
``(.|.)*Z`` cannot pin the emulator's event loop. The language is RE2's: what
Python's ``re`` writes, except back-references and look-arounds, which RE2
refuses, as it refuses any malformed pattern, with :class:`PatternError`; so
is a pattern longer than :data:`MAX_LENGTH` characters. ``\\d``, ``\\w`` and
``\\s`` are ASCII classes (request paths are ASCII).
"""

from __future__ import annotations

from typing import Any

import attrs
import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["MAX_LENGTH", "PathPattern", "PatternError"]

#: The longest pattern accepted, in characters.
MAX_LENGTH = 256

#: Memory RE2 may use for one compiled pattern, in bytes.
_MAX_MEMORY = 1 << 20


class PatternError(ValueError):
    """A pattern RE2 refuses, or one that is too long; the message says why."""


def _options() -> Any:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEMORY
    return options


@attrs.frozen
class PathPattern:
    """A compiled path pattern."""

    source: str
    _compiled: Any = attrs.field(repr=False, eq=False)

    @classmethod
    def compile(cls, source: str) -> PathPattern:
        """Compile ``source``, or raise :class:`PatternError` saying what is wrong."""
        if len(source) > MAX_LENGTH:
            raise PatternError(f"longer than {MAX_LENGTH} characters")
        try:
            compiled = re2.compile(source, options=_options())
        except re2.error as error:
            reason = error.args[0] if error.args else "malformed"
            if isinstance(reason, bytes):
                reason = reason.decode("utf-8", "replace")
            raise PatternError(f"not a pattern RE2 accepts: {reason}") from None
        return cls(source, compiled)

    def search(self, path: str) -> bool:
        """Whether the pattern matches anywhere in ``path`` (as ``re.search``)."""
        return self._compiled.search(path) is not None
