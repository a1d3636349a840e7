"""The exit code an envd ``end`` event reports, as the contract reports it.

envd ends a process that exited with ``exitCode`` (absent for 0: proto-JSON
omits zero values) and ``status`` ``"exit status N"``. One killed by a signal
ends with ``exitCode`` -1, ``exited`` false and ``status`` ``"signal: <name>"``,
where the name is Go's description of the Linux signal (``killed``,
``terminated``; `` (core dumped)`` is added after a core dump, and a signal Go
has no name for is ``signal N``). The contract reports a signal death as the
shells, the local sandbox and the other providers do: 128 + the signal's
number (137 for SIGKILL). A status naming no signal leaves envd's code as
it is: nothing is guessed.
"""

from __future__ import annotations

from typing import Any

__all__ = ["exit_code"]

#: Go's descriptions of the Linux signals (its ``syscall`` signal table), lowercased.
_SIGNALS = {
    "hangup": 1,
    "interrupt": 2,
    "quit": 3,
    "illegal instruction": 4,
    "trace/breakpoint trap": 5,
    "aborted": 6,
    "bus error": 7,
    "floating point exception": 8,
    "killed": 9,
    "user defined signal 1": 10,
    "segmentation fault": 11,
    "user defined signal 2": 12,
    "broken pipe": 13,
    "alarm clock": 14,
    "terminated": 15,
    "stack fault": 16,
    "child exited": 17,
    "continued": 18,
    "stopped (signal)": 19,
    "stopped": 20,
    "stopped (tty input)": 21,
    "stopped (tty output)": 22,
    "urgent i/o condition": 23,
    "cpu time limit exceeded": 24,
    "file size limit exceeded": 25,
    "virtual timer expired": 26,
    "profiling timer expired": 27,
    "window changed": 28,
    "i/o possible": 29,
    "power failure": 30,
    "bad system call": 31,
}
_SIGNAL_PREFIX = "signal: "
_CORE_DUMPED = " (core dumped)"


def exit_code(end: Any) -> int:
    """The exit code of envd's ``end`` event ``end`` (see the module docstring): its
    ``exitCode`` (0 when absent), or 128 + N for a process that signal N killed."""
    if not isinstance(end, dict):
        return 0
    code = end.get("exitCode", end.get("exit_code", 0))
    if not isinstance(code, int) or isinstance(code, bool):
        code = 0
    signum = _signal_of(end.get("status")) if end.get("exited") is not True else None
    return code if signum is None else 128 + signum


def _signal_of(status: object) -> int | None:
    """The number of the signal a ``"signal: <name>"`` status names, or None."""
    if not isinstance(status, str) or not status.startswith(_SIGNAL_PREFIX):
        return None
    name = status[len(_SIGNAL_PREFIX) :].removesuffix(_CORE_DUMPED).strip().lower()
    if name.startswith("signal "):
        number = name[len("signal ") :]
        return int(number) if number.isdigit() and 0 < int(number) < 128 else None
    return _SIGNALS.get(name)
