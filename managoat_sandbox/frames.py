"""Frames: what a streaming command delivers to its owner.

Every frame carries the ``ref`` of the command it belongs to. A command
delivers any number of ``Stdout``/``Stderr`` frames and then exactly one
terminal frame, ``Exit`` (the real exit code) or ``Error`` (a transport
failure; no ``Exit`` follows).
"""

from __future__ import annotations

import queue
from collections.abc import Hashable, Iterator
from typing import Any, ClassVar, Protocol

import attrs

from ._args import optional_seconds
from .errors import Invalid, SandboxError
from .types import Command

__all__ = ["Error", "Exit", "Frame", "Stderr", "Stdout", "iter_frames"]


@attrs.frozen
class Stdout:
    """Output bytes from the command's standard output (or its terminal)."""

    ref: Hashable
    data: bytes
    terminal: ClassVar[bool] = False


@attrs.frozen
class Stderr:
    """Output bytes from the command's standard error; never sent in tty mode."""

    ref: Hashable
    data: bytes
    terminal: ClassVar[bool] = False


@attrs.frozen
class Exit:
    """The command exited with this real exit code. Terminal."""

    ref: Hashable
    code: int
    terminal: ClassVar[bool] = True


@attrs.frozen
class Error:
    """The transport failed; the command's fate is unknown. Terminal."""

    ref: Hashable
    reason: SandboxError
    terminal: ClassVar[bool] = True


Frame = Stdout | Stderr | Exit | Error


class _Gettable(Protocol):
    def get(self, block: bool = ..., timeout: float | None = ...) -> Any: ...


def iter_frames(source: Command | _Gettable, *, timeout: float | None = None) -> Iterator[Frame]:
    """Yield frames from a command's queue (or a queue) up to the first terminal one.

    ``timeout`` bounds the wait for *each* frame (``None`` or ``inf``: no
    bound); expiry raises ``TimeoutError``. A ``Command`` whose frames go to a callback is
    ``Invalid(("owner", ...))``. A command stopped with ``stop_command`` never gets a
    terminal frame: iterate with a timeout when you might stop it.
    """
    if isinstance(source, Command):
        if source.frames is None:
            raise Invalid(("owner", "this command delivers to a callback, not a queue"))
        frames: _Gettable = source.frames
    elif callable(getattr(source, "get", None)):
        frames = source
    else:
        raise TypeError("iter_frames takes a Command or a queue")
    timeout = optional_seconds(timeout)
    while True:
        try:
            frame = frames.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no frame within {timeout} s") from None
        yield frame
        if frame.terminal:
            return
