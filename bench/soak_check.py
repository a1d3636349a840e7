"""The soak's judge: what a command must deliver, and a tally of every way it did not.

A cycle states its :class:`Expect` (the exact stdout and stderr, the real exit
code, and which taxonomy errors are an accepted end because a fault was
injected or scripted), records what was delivered with a :class:`Recorder`,
and hands both to :class:`Tally`, which counts problems by kind:

* ``lost`` — output missing before an ``Exit``, or no terminal frame at all;
* ``duplicated`` — a second terminal frame, anything after the terminal frame,
  or output longer than the command wrote (bytes delivered twice);
* ``late`` — frames delivered after ``stop_command`` returned;
* ``misordered`` — output that is not a prefix of what the command wrote;
* ``wrong_exit`` — an ``Exit`` (or ``ExecResult``) whose code is not the real
  one, or any ``Exit`` where only an error was possible;
* ``bad_end`` — an error that is not one of the accepted taxonomy errors
  (including any non-taxonomy exception);
* ``leaked_threads`` — counted by :func:`leaked_threads` per adapter.

Every count must be zero. A count is of commands (or threads), not of
frames: chunk boundaries are not promised, so a command with bytes missing
counts once. Stdout and stderr are judged separately: the contract promises
each stream's bytes in order, not their interleaving.
"""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from managoat_sandbox.frames import Error, Exit, Frame, Stderr, Stdout
from managoat_sandbox.types import Command, ExecResult

PROBLEMS = ("lost", "duplicated", "late", "misordered", "wrong_exit", "bad_end", "leaked_threads")
#: Bound, in seconds, on any wait of a cycle (a frame, a stop, a replay).
WAIT = 20.0


@dataclass(frozen=True)
class Expect:
    """What a command must deliver.

    ``code`` is the real exit code (``None``: the command can never exit,
    e.g. a scripted drop). ``errors`` are the taxonomy error classes that may
    end it instead; with ``errors`` empty only the exact result is right.
    ``err`` ``None`` leaves stderr unchecked (``exec`` collects stdout only).
    """

    out: bytes
    code: int | None
    errors: tuple[type[BaseException], ...] = ()
    err: bytes | None = b""


class Recorder:
    """An owner callback keeping every frame; optionally stops its command from inside.

    With ``stop_after=k`` the callback, on the k-th frame, calls ``stop`` (the
    command is handed over with :meth:`ready`, since frames may arrive before
    ``spawn`` returns) and records :attr:`at_stop`, the frames delivered by then.
    """

    def __init__(
        self, stop: Callable[[Command], None] | None = None, stop_after: int | None = None
    ) -> None:
        self.frames: list[Frame] = []
        self.at_stop: int | None = None
        self.missed_stop = False
        self._changed = threading.Condition()
        self._stop = stop
        self._stop_after = stop_after
        self._command: Command | None = None
        self._ready = threading.Event()
        self._stop_done = threading.Event()

    def ready(self, command: Command) -> None:
        """The command this recorder's frames belong to (for a stop from inside)."""
        self._command = command
        self._ready.set()

    def __call__(self, frame: Frame) -> None:
        with self._changed:
            self.frames.append(frame)
            count = len(self.frames)
            self._changed.notify_all()
        if self._stop is not None and count == self._stop_after:
            if self._ready.wait(WAIT) and self._command is not None:
                self._stop(self._command)
                with self._changed:
                    self.at_stop = len(self.frames)
            else:
                self.missed_stop = True
            self._stop_done.set()

    def wait(self, count: int, timeout: float = WAIT) -> bool:
        """Wait until ``count`` frames or a terminal frame arrived; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.frames) < count and not any(f.terminal for f in self.frames):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_terminal(self, timeout: float = WAIT) -> bool:
        """Wait for a terminal frame; False on timeout."""
        return self.wait(sys.maxsize, timeout)

    def stop_reached(self, after: int) -> bool:
        """Whether the callback's stop fired (it did once ``after`` frames came); waits
        (bounded) for that stop to return."""
        with self._changed:
            reached = len(self.frames) >= after
        return reached and self._stop_done.wait(WAIT)

    def stopped(self, stop: Callable[[], None]) -> None:
        """Stop from this (another) thread and record :attr:`at_stop`."""
        stop()
        with self._changed:
            self.at_stop = len(self.frames)

    def snapshot(self) -> list[Frame]:
        with self._changed:
            return list(self.frames)


def _judge_bytes(got: bytes, want: bytes) -> str | None:
    """``None`` if equal, else ``partial``, ``duplicated`` or ``misordered``."""
    if got == want:
        return None
    if want.startswith(got):
        return "partial"
    if got.startswith(want) or want in got:
        return "duplicated"
    return "misordered"


class Tally:
    """Per-adapter counts: cycles, injected faults, ``errors`` (ends in an accepted
    taxonomy error: an injected fault or a scripted drop that struck), and problems."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.counts: Counter[str] = Counter()
        self.examples: list[str] = []
        #: What is running now (named in the examples of problems).
        self.context = ""

    @property
    def problems(self) -> int:
        return sum(self.counts[kind] for kind in PROBLEMS)

    def problem(self, kind: str, detail: str) -> None:
        self.counts[kind] += 1
        if len(self.examples) < 10:
            self.examples.append(f"{kind} in {self.context}: {detail}")

    def fault(self) -> None:
        self.counts["faults"] += 1

    def stream(self, frames: list[Frame], expect: Expect, at_stop: int | None = None) -> None:
        """Judge one command's delivered frames (``at_stop``: frames when stop returned)."""
        if at_stop is not None:
            if len(frames) > at_stop:
                self.problem("late", f"frames after the stop: {frames[at_stop:]}")
            frames = frames[:at_stop]
        ends = [i for i, f in enumerate(frames) if f.terminal]
        if len(frames) > (ends[0] + 1 if ends else len(frames)):
            self.problem("duplicated", f"frames after the terminal one: {frames[ends[0] :]}")
        body = frames[: ends[0]] if ends else frames
        terminal = frames[ends[0]] if ends else None
        out = b"".join(f.data for f in body if isinstance(f, Stdout))
        err = b"".join(f.data for f in body if isinstance(f, Stderr))
        verdicts = [_judge_bytes(out, expect.out)]
        if expect.err is not None:
            verdicts.append(_judge_bytes(err, expect.err))
        for verdict in verdicts:
            if verdict in ("duplicated", "misordered"):
                self.problem(verdict, f"output {out!r} / {err!r}, expected {expect}")
        partial = "partial" in verdicts
        if terminal is None:
            if at_stop is None:
                self.problem("lost", f"no terminal frame after {len(frames)} frames")
        elif isinstance(terminal, Exit):
            self._exit(terminal.code, expect)
            if partial:
                self.problem("lost", f"Exit after partial output {out!r}, expected {expect}")
        elif isinstance(terminal, Error):
            self._error(terminal.reason, expect)

    def outcome(self, result: ExecResult | BaseException, expect: Expect) -> None:
        """Judge what ``exec`` returned or raised."""
        if isinstance(result, BaseException):
            self._error(result, expect)
            return
        self._exit(result.exit_code, expect)
        verdict = _judge_bytes(result.output, expect.out)
        if verdict is not None:
            kind = "lost" if verdict == "partial" else verdict
            self.problem(kind, f"exec output {result.output!r}, expected {expect}")

    def _exit(self, code: int, expect: Expect) -> None:
        if code != expect.code:
            self.problem("wrong_exit", f"exit {code}, expected {expect}")

    def _error(self, error: BaseException, expect: Expect) -> None:
        if isinstance(error, expect.errors):
            self.counts["errors"] += 1
        else:
            self.problem("bad_end", f"{error!r}, expected {expect}")


def leaked_threads(baseline: set[int | None], timeout: float = 15.0) -> list[str]:
    """Names of threads not in ``baseline`` still alive after up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while True:
        extra = [t.name for t in threading.enumerate() if t.ident not in baseline and t.is_alive()]
        if not extra or time.monotonic() >= deadline:
            return extra
        pause.wait(0.05)
