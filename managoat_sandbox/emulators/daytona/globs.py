"""The daemon's file-name globs (``GET /files/search``): ``doublestar`` patterns.

The daemon matches each file's path relative to the searched directory with
the Go ``doublestar`` library, whose language is:

* ``*`` any run of characters but ``/``; ``?`` one character but ``/``;
* ``**`` as a whole path component, any number of directories (none
  included): ``**/x`` matches ``x`` and ``a/b/x``, ``a/**`` matches ``a``
  and everything under it;
* ``[abc]``, ``[a-z]``, ``[!abc]`` or ``[^abc]`` one character of (or not of,
  and then never ``/``) the class;
* ``{a,b}`` either alternative (alternatives may hold any of the above and
  nest);
* ``\\`` makes the next character literal.

A pattern is translated into a regular expression run by RE2 (the
``emulators`` extra's ``google-re2``), whose time is linear in the path, so
no pattern can pin the emulator. :func:`compile_glob` answers None for a
pattern the language refuses (an unclosed ``[`` or ``{``, a trailing ``\\``),
or one longer than :data:`MAX_LENGTH`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

__all__ = ["MAX_LENGTH", "compile_glob"]

#: The longest glob accepted, in characters.
MAX_LENGTH = 4096
#: Memory RE2 may use for one compiled glob, in bytes.
_MAX_MEMORY = 8 << 20
_DIRECTORIES = "(?:.*/)?"


class _BadGlob(ValueError):
    """A pattern outside the glob language."""


class _Translation:
    """One pass over a glob, building the equivalent regular expression."""

    def __init__(self, glob: str) -> None:
        self.glob = glob
        self.at = 0
        self.braces = 0
        self.out: list[str] = []

    def run(self) -> str:
        while self.at < len(self.glob):
            self._step()
        if self.braces:
            raise _BadGlob("unclosed {")
        return "".join(self.out)

    def _starts_component(self) -> bool:
        return self.at == 0 or self.glob[self.at - 1] in "/{,"

    def _step(self) -> None:
        char = self.glob[self.at]
        if char == "*":
            self._star()
        elif char == "/" and self.glob[self.at + 1 :] == "**":
            self.out.append("(?:/.*)?")
            self.at = len(self.glob)
        else:
            self.at += 1
            self._plain(char)

    def _star(self) -> None:
        double = self.glob.startswith("**", self.at)
        after = self.at + 2
        whole = double and self._starts_component() and self.glob[after : after + 1] in ("", "/")
        if whole and after < len(self.glob):
            self.out.append(_DIRECTORIES)
            self.at = after + 1
        elif whole:
            self.out.append(".*")
            self.at = after
        else:
            self.out.append("[^/]*")
            self.at = after if double else self.at + 1

    def _plain(self, char: str) -> None:
        handlers: dict[str, Callable[[], None]] = {
            "?": lambda: self.out.append("[^/]"),
            "[": self._class,
            "{": self._open_brace,
            "}": self._close_brace,
            ",": self._comma,
            "\\": self._escape,
        }
        handler = handlers.get(char)
        if handler is None:
            self.out.append(re.escape(char))
        else:
            handler()

    def _class(self) -> None:
        end = self.glob.find("]", self.at + 1)
        if end < 0:
            raise _BadGlob("unclosed [")
        body = self.glob[self.at : end]
        self.at = end + 1
        negated = body[:1] in ("!", "^")
        members = body[1:] if negated else body
        if not members:
            raise _BadGlob("empty class")
        escaped = "".join("-" if c == "-" else re.escape(c) for c in members)
        self.out.append(f"[^/{escaped}]" if negated else f"(?:[{escaped}])")

    def _open_brace(self) -> None:
        self.braces += 1
        self.out.append("(?:")

    def _close_brace(self) -> None:
        if not self.braces:
            self.out.append(re.escape("}"))
            return
        self.braces -= 1
        self.out.append(")")

    def _comma(self) -> None:
        self.out.append("|" if self.braces else ",")

    def _escape(self) -> None:
        if self.at >= len(self.glob):
            raise _BadGlob("trailing backslash")
        self.out.append(re.escape(self.glob[self.at]))
        self.at += 1


def _options() -> object:
    options = re2.Options()
    options.log_errors = False
    options.max_mem = _MAX_MEMORY
    options.dot_nl = True
    return options


def compile_glob(glob: str) -> Callable[[str], bool] | None:
    """A test of whether a relative path matches ``glob`` as a whole; None for a
    pattern outside the language (or longer than :data:`MAX_LENGTH`)."""
    if len(glob) > MAX_LENGTH:
        return None
    try:
        compiled = re2.compile(f"^(?:{_Translation(glob).run()})$", options=_options())
    except (_BadGlob, re2.error):
        return None
    return lambda path: compiled.search(path) is not None
