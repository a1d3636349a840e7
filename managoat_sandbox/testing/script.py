"""The Fake's script vocabulary: each argument of a command is one instruction.

========================  ==================================================
``out:<data>``            emit ``<data>`` (UTF-8) on stdout
``err:<data>``            emit ``<data>`` on stderr
``exit:<n>``              exit with ``n`` (0-255)
``sleep:<seconds>``       pause
``deaf:<seconds>``        pause, deaf to a graceful termination (as a process that
                          ignores SIGTERM); a forced one ends it. Terminated
                          gracefully meanwhile, it exits 143 when the pause ends
``stay``                  echo each stdin write as ``echo:<data>``; EOF exits 0
``drop``                  the transport closes with no exit frame
========================  ==================================================

A script is parsed whole before anything runs; an unknown instruction is
``Invalid(("fake_instruction", arg))``. Instructions after the first terminal
one (``exit``, ``stay``, ``drop``) never run; a script without one exits 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import attrs

from ..errors import Invalid
from ..reasons import Reason

__all__ = ["Deaf", "Drop", "Emit", "ExitWith", "Instruction", "Sleep", "Stay", "parse"]


@attrs.frozen
class Emit:
    """Write ``data`` to ``stream`` (1 = stdout, 2 = stderr)."""

    stream: int
    data: bytes


@attrs.frozen
class Sleep:
    """Pause for ``seconds``."""

    seconds: float


@attrs.frozen
class Deaf:
    """Pause for ``seconds``, ignoring a graceful termination (a forced one ends it)."""

    seconds: float


@attrs.frozen
class ExitWith:
    """Exit with ``code``. Terminal."""

    code: int


@attrs.frozen
class Stay:
    """Echo stdin until EOF, then exit 0. Terminal."""


@attrs.frozen
class Drop:
    """Close the transport without an exit. Terminal."""


Instruction = Emit | Sleep | Deaf | ExitWith | Stay | Drop
TERMINAL = (ExitWith, Stay, Drop)


def _bad(arg: str) -> Invalid:
    return Invalid(Reason.FAKE_INSTRUCTION, problem=arg)


def _instruction(arg: str) -> Instruction:
    if arg == "stay":
        return Stay()
    if arg == "drop":
        return Drop()
    kind, sep, value = arg.partition(":")
    if not sep:
        raise _bad(arg)
    if kind == "out":
        return Emit(1, value.encode("utf-8"))
    if kind == "err":
        return Emit(2, value.encode("utf-8"))
    if kind == "exit":
        if not value.isdigit() or not 0 <= int(value) <= 255:
            raise _bad(arg)
        return ExitWith(int(value))
    if kind in ("sleep", "deaf"):
        try:
            seconds = float(value)
        except ValueError:
            raise _bad(arg) from None
        if math.isnan(seconds) or math.isinf(seconds) or seconds < 0:
            raise _bad(arg)
        return Sleep(seconds) if kind == "sleep" else Deaf(seconds)
    raise _bad(arg)


def parse(args: Sequence[str]) -> tuple[Instruction, ...]:
    """Parse a whole script, cut after its first terminal instruction.

    A script without a terminal instruction gets an implicit ``exit:0``.
    """
    program: list[Instruction] = [_instruction(arg) for arg in args]
    for index, instruction in enumerate(program):
        if isinstance(instruction, TERMINAL):
            return tuple(program[: index + 1])
    return (*program, ExitWith(0))
