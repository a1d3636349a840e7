"""Path patterns for faults: a small regular-expression language matched in linear time.

A fault's ``path`` is searched in the request path, as ``re.search`` would,
but with a matcher that cannot backtrack: the pattern is compiled to a
Thompson automaton and every position of the path is visited once, with the
set of live states (at most one per pattern element). So a pattern such as
``(.|.)*Z`` costs ``len(path) * len(pattern)`` steps, never an exponential
number, and a bad pattern can never pin the emulator's event loop.

The language (a subset of Python's ``re``, with the same meaning):

* a literal character; ``\\`` before a punctuation character makes it literal;
* ``.`` (any character), ``\\d`` ``\\w`` ``\\s`` and their negations ``\\D`` ``\\W`` ``\\S``;
* ``[...]`` and ``[^...]`` sets of characters, ranges (``a-z``) and the classes above;
* grouping ``(...)`` and ``(?:...)``, alternation ``|``;
* the quantifiers ``*`` ``+`` ``?`` (a trailing ``?`` making them lazy is accepted:
  whether a path matches does not depend on it);
* ``^`` (start of the path) and ``$`` (its end).

Anything else (counted repetition ``{m,n}``, back-references, look-arounds,
flags) is refused with :class:`PatternError`, as is a pattern longer than
:data:`MAX_LENGTH` characters.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["MAX_LENGTH", "PathPattern", "PatternError"]

#: The longest pattern accepted, in characters.
MAX_LENGTH = 256

_CLASSES: dict[str, Callable[[str], bool]] = {
    "d": str.isdigit,
    "w": lambda c: c.isalnum() or c == "_",
    "s": str.isspace,
}
_SPECIAL = frozenset("\\.^$*+?()[]{}|")


class PatternError(ValueError):
    """A path pattern outside the language; the message says where."""


# Node kinds of the automaton.
_CHAR, _SPLIT, _BEGIN, _END, _MATCH, _JUMP = range(6)


@attrs.define
class _Node:
    kind: int
    test: Callable[[str], bool] | None = None
    out: int = -1
    alt: int = -1


@attrs.frozen
class _Fragment:
    start: int
    ends: tuple[tuple[int, str], ...]  # (node, "out" or "alt") left dangling


class _Parser:
    """Recursive descent over the pattern, emitting automaton nodes as it goes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0
        self.nodes: list[_Node] = []

    # -- building -------------------------------------------------------------------

    def _node(self, kind: int, test: Callable[[str], bool] | None = None) -> int:
        self.nodes.append(_Node(kind, test))
        return len(self.nodes) - 1

    def _patch(self, ends: tuple[tuple[int, str], ...], target: int) -> None:
        for index, field in ends:
            setattr(self.nodes[index], field, target)

    def _empty(self) -> _Fragment:
        jump = self._node(_JUMP)
        return _Fragment(jump, ((jump, "out"),))

    def finish(self) -> int:
        """Parse the whole pattern; the index of its first state."""
        fragment = self.alternation()
        if self.at != len(self.text):
            raise self.fail("unbalanced )")
        self._patch(fragment.ends, self._node(_MATCH))
        return fragment.start

    # -- grammar ----------------------------------------------------------------------

    def fail(self, message: str) -> PatternError:
        return PatternError(f"{message} at offset {self.at} of the pattern")

    def peek(self) -> str | None:
        return self.text[self.at] if self.at < len(self.text) else None

    def alternation(self) -> _Fragment:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        fragment = branches[0]
        for branch in branches[1:]:
            split = self._node(_SPLIT)
            self.nodes[split].out = fragment.start
            self.nodes[split].alt = branch.start
            fragment = _Fragment(split, fragment.ends + branch.ends)
        return fragment

    def sequence(self) -> _Fragment:
        pieces: list[_Fragment] = []
        while self.peek() not in (None, "|", ")"):
            pieces.append(self.quantified())
        if not pieces:
            return self._empty()
        fragment = pieces[0]
        for piece in pieces[1:]:
            self._patch(fragment.ends, piece.start)
            fragment = _Fragment(fragment.start, piece.ends)
        return fragment

    def quantified(self) -> _Fragment:
        atom = self.atom()
        quantifier = self.peek()
        if quantifier == "{":
            raise self.fail("counted repetition {m,n} is not supported")
        if quantifier not in ("*", "+", "?"):
            return atom
        self.at += 1
        if self.peek() == "?":
            self.at += 1
        if self.peek() in ("*", "+", "?", "{"):
            raise self.fail("a quantifier may not follow a quantifier")
        split = self._node(_SPLIT)
        self.nodes[split].out = atom.start
        if quantifier == "?":
            return _Fragment(split, (*atom.ends, (split, "alt")))
        self._patch(atom.ends, split)
        if quantifier == "*":
            return _Fragment(split, ((split, "alt"),))
        return _Fragment(atom.start, ((split, "alt"),))

    def atom(self) -> _Fragment:
        char = self.text[self.at]
        self.at += 1
        if char == "(":
            if self.text.startswith("?:", self.at):
                self.at += 2
            elif self.peek() == "?":
                raise self.fail("group extensions (?...) other than (?:...) are not supported")
            inner = self.alternation()
            if self.peek() != ")":
                raise self.fail("missing )")
            self.at += 1
            return inner
        if char in "*+?{":
            raise self.fail(f"nothing to repeat before {char}")
        if char == ")":
            raise self.fail("unbalanced )")
        if char in "^$":
            node = self._node(_BEGIN if char == "^" else _END)
            return _Fragment(node, ((node, "out"),))
        if char == ".":
            test: Callable[[str], bool] = _any
        elif char == "[":
            test = self.char_set()
        elif char == "\\":
            test = self.escape()
        else:
            test = char.__eq__
        node = self._node(_CHAR, test)
        return _Fragment(node, ((node, "out"),))

    def escape(self) -> Callable[[str], bool]:
        char = self.peek()
        if char is None:
            raise self.fail("a trailing backslash")
        self.at += 1
        if char.lower() in _CLASSES:
            test = _CLASSES[char.lower()]
            return test if char.islower() else _negate(test)
        if char.isalnum():
            raise self.fail(f"the escape \\{char} is not supported")
        return char.__eq__

    def char_set(self) -> Callable[[str], bool]:
        negated = self.peek() == "^"
        if negated:
            self.at += 1
        tests: list[Callable[[str], bool]] = []
        first = True
        while True:
            char = self.peek()
            if char is None:
                raise self.fail("missing ]")
            if char == "]" and not first:
                self.at += 1
                break
            first = False
            low = self.set_member()
            if isinstance(low, str) and self.peek() == "-" and self.text[self.at + 1:self.at + 2] \
                    not in ("]", ""):
                self.at += 1
                high = self.set_member()
                if not isinstance(high, str) or high < low:
                    raise self.fail("a bad range in [...]")
                tests.append(_between(low, high))
            elif isinstance(low, str):
                tests.append(low.__eq__)
            else:
                tests.append(low)
        member = _union(tuple(tests))
        return _negate(member) if negated else member

    def set_member(self) -> str | Callable[[str], bool]:
        char = self.text[self.at]
        self.at += 1
        if char != "\\":
            if char == "[" and self.peek() in (":", "=", "."):
                raise self.fail("POSIX classes in [...] are not supported")
            return char
        escaped = self.peek()
        if escaped is None:
            raise self.fail("a trailing backslash")
        self.at += 1
        if escaped.lower() in _CLASSES:
            test = _CLASSES[escaped.lower()]
            return test if escaped.islower() else _negate(test)
        if escaped.isalnum():
            raise self.fail(f"the escape \\{escaped} is not supported")
        return escaped


def _any(char: str) -> bool:
    return True


def _negate(test: Callable[[str], bool]) -> Callable[[str], bool]:
    return lambda char: not test(char)


def _between(low: str, high: str) -> Callable[[str], bool]:
    return lambda char: low <= char <= high


def _union(tests: tuple[Callable[[str], bool], ...]) -> Callable[[str], bool]:
    return lambda char: any(test(char) for test in tests)


def _passes(kind: int, position: int, last: int) -> bool:
    """Whether an epsilon state of ``kind`` lets the automaton through at ``position``."""
    return kind == _JUMP or (kind == _BEGIN and position == 0) or (
        kind == _END and position == last)


@attrs.frozen
class PathPattern:
    """A compiled pattern; :meth:`search` tells whether it occurs in a path."""

    source: str
    _nodes: tuple[_Node, ...] = attrs.field(repr=False, eq=False)
    _start: int = attrs.field(repr=False, eq=False)

    @classmethod
    def compile(cls, source: str) -> PathPattern:
        """Compile ``source``; :class:`PatternError` if it is outside the language."""
        if len(source) > MAX_LENGTH:
            raise PatternError(f"the pattern is longer than {MAX_LENGTH} characters")
        parser = _Parser(source)
        start = parser.finish()
        return cls(source, tuple(parser.nodes), start)

    def search(self, text: str) -> bool:
        """Whether the pattern matches somewhere in ``text`` (``len(text) * len(pattern)``
        steps at most)."""
        last = len(text)
        live: set[int] = set()
        for position in range(last + 1):
            self._close(self._start, position, last, live)
            if any(self._nodes[index].kind == _MATCH for index in live):
                return True
            if position == last:
                break
            char = text[position]
            following: set[int] = set()
            for index in live:
                node = self._nodes[index]
                if node.kind == _CHAR and node.test is not None and node.test(char):
                    self._close(node.out, position + 1, last, following)
            live = following
        return False

    def _close(self, index: int, position: int, last: int, into: set[int]) -> None:
        """Add ``index`` and every state reachable from it without reading a character."""
        pending = [index]
        while pending:
            current = pending.pop()
            if current in into:
                continue
            into.add(current)
            node = self._nodes[current]
            if node.kind == _SPLIT:
                pending.extend((node.out, node.alt))
            elif _passes(node.kind, position, last):
                pending.append(node.out)
