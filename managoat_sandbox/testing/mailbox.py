"""A thread-safe frame owner with selective receive, for tests.

:class:`Mailbox` is an owner callable: pass it as ``owner=`` to ``spawn`` or
``attach`` and it records every frame it is given. Tests then take frames out
the way Elixir's ``assert_receive`` does — :meth:`Mailbox.expect` scans for the
first frame matching a predicate, leaves every other frame in place, and waits
on a condition until one arrives or the timeout passes — and assert silence
with :meth:`Mailbox.refute`, a genuine bounded wait for a matching frame.

Predicates are plain callables taking a frame; the helpers below
(:func:`is_stdout`, :func:`is_exit`, …) also describe themselves, so a failed
expectation says what it was waiting for and lists what it saw instead.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable

from ..frames import Error, Exit, Frame, Stderr, Stdout

__all__ = [
    "Mailbox",
    "Predicate",
    "has_ref",
    "is_error",
    "is_exit",
    "is_stderr",
    "is_stdout",
    "is_terminal",
]

_SHOWN_FRAMES = 20
_SHOWN_BYTES = 60


class Predicate:
    """A frame test with a description for failure messages."""

    __slots__ = ("_test", "description")

    def __init__(self, description: str, test: Callable[[Frame], bool]) -> None:
        self.description = description
        self._test = test

    def __call__(self, frame: Frame) -> bool:
        return self._test(frame)

    def __repr__(self) -> str:
        return self.description


def has_ref(ref: Hashable) -> Predicate:
    """Any frame of the command ``ref``."""
    return Predicate(f"any frame of {ref!r}", lambda frame: frame.ref == ref)


def is_stdout(ref: Hashable) -> Predicate:
    """A ``Stdout`` frame of ``ref``."""
    return Predicate(
        f"Stdout of {ref!r}", lambda frame: isinstance(frame, Stdout) and frame.ref == ref
    )


def is_stderr(ref: Hashable) -> Predicate:
    """A ``Stderr`` frame of ``ref``."""
    return Predicate(
        f"Stderr of {ref!r}", lambda frame: isinstance(frame, Stderr) and frame.ref == ref
    )


def is_exit(ref: Hashable, code: int | None = None) -> Predicate:
    """An ``Exit`` frame of ``ref`` (with exactly ``code``, if given)."""
    suffix = "" if code is None else f" with code {code}"
    return Predicate(
        f"Exit of {ref!r}{suffix}",
        lambda frame: (
            isinstance(frame, Exit) and frame.ref == ref and (code is None or frame.code == code)
        ),
    )


def is_error(ref: Hashable) -> Predicate:
    """An ``Error`` frame of ``ref``."""
    return Predicate(
        f"Error of {ref!r}", lambda frame: isinstance(frame, Error) and frame.ref == ref
    )


def is_terminal(ref: Hashable) -> Predicate:
    """A terminal frame (``Exit`` or ``Error``) of ``ref``."""
    return Predicate(
        f"terminal frame of {ref!r}", lambda frame: frame.terminal and frame.ref == ref
    )


def _describe(predicate: Callable[[Frame], bool]) -> str:
    return getattr(predicate, "description", None) or repr(predicate)


def _show(frame: Frame) -> str:
    if isinstance(frame, (Stdout, Stderr)) and len(frame.data) > _SHOWN_BYTES:
        data = frame.data[:_SHOWN_BYTES]
        return f"{type(frame).__name__}(ref={frame.ref!r}, data={data!r}… {len(frame.data)} B)"
    return repr(frame)


def _show_all(frames: list[Frame]) -> str:
    if not frames:
        return "nothing"
    shown = ", ".join(_show(frame) for frame in frames[:_SHOWN_FRAMES])
    more = len(frames) - _SHOWN_FRAMES
    return f"[{shown}{f', … {more} more' if more > 0 else ''}]"


class Mailbox:
    """Records frames delivered to it; thread-safe; selective receive.

    ``pending`` frames are those not yet taken by :meth:`expect`;
    :meth:`history` keeps every frame ever delivered, in arrival order, for
    ordering checks (for example "the terminal frame came last").
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._pending: list[Frame] = []
        self._history: list[Frame] = []
        self._takes = 0  # bumped whenever a frame leaves ``_pending``

    def __call__(self, frame: Frame) -> None:
        """Record ``frame`` (the owner-callback entry point)."""
        with self._changed:
            self._pending.append(frame)
            self._history.append(frame)
            self._changed.notify_all()

    def expect(self, predicate: Callable[[Frame], bool], timeout: float) -> Frame:
        """Take and return the first pending frame matching ``predicate``.

        Waits up to ``timeout`` seconds for one to arrive; other frames stay
        pending. Raises ``AssertionError`` naming what was awaited and listing
        the pending frames otherwise.
        """
        with self._changed:
            index = self._wait_for(predicate, time.monotonic() + timeout)
            if index is None:
                raise AssertionError(
                    f"expected {_describe(predicate)} within {timeout} s; "
                    f"pending: {_show_all(self._pending)}"
                )
            self._takes += 1
            return self._pending.pop(index)

    def refute(self, predicate: Callable[[Frame], bool], within: float) -> None:
        """Fail if a frame matching ``predicate`` is pending or arrives within ``within`` s.

        A real wait on the mailbox's condition for the whole window; pending
        frames are left in place.
        """
        with self._changed:
            index = self._wait_for(predicate, time.monotonic() + within)
            if index is not None:
                raise AssertionError(
                    f"expected no {_describe(predicate)} within {within} s, "
                    f"got {_show(self._pending[index])}"
                )

    def _wait_for(self, predicate: Callable[[Frame], bool], deadline: float) -> int | None:
        """Index of the first pending match, waiting until ``deadline``; lock held.

        Frames already scanned are not tested again unless a take shifted the
        pending list meanwhile.
        """
        scanned, takes = 0, self._takes
        while True:
            if takes != self._takes:
                scanned, takes = 0, self._takes
            for index in range(scanned, len(self._pending)):
                if predicate(self._pending[index]):
                    return index
            scanned = len(self._pending)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._changed.wait(remaining)

    def clear(self) -> list[Frame]:
        """Take every pending frame (they stay in :meth:`history`)."""
        with self._changed:
            taken, self._pending = self._pending, []
            self._takes += 1
            return taken

    def history(self, ref: Hashable | None = None) -> list[Frame]:
        """Every frame delivered so far (of ``ref`` only, if given), in arrival order."""
        with self._changed:
            return [frame for frame in self._history if ref is None or frame.ref == ref]
