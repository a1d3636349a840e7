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
from .errors import DeadlineExpired, Invalid, SandboxError
from .reasons import Reason
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

    ``timeout`` bounds the wait for *each* frame, in seconds from 0 to
    ``threading.TIMEOUT_MAX`` (``None`` or ``inf``: no bound; ``0``: only what is
    already queued). A wait that expires raises
    ``DeadlineExpired(("frame_timeout", timeout))`` — an ``Unavailable`` and a
    ``TimeoutError``, like every expired deadline. The arguments are checked
    when ``iter_frames`` is called, before anything is read: a negative or NaN
    ``timeout`` is ``Invalid(("timeout", ...))`` naming the allowed range, and a
    ``Command`` whose frames go to a callback is ``Invalid(("owner", ...))``. A
    command stopped with ``stop_command`` never gets a terminal frame: iterate with
    a timeout when you might stop it.
    """
    if isinstance(source, Command):
        if source.frames is None:
            raise Invalid(Reason.OWNER, problem="this command delivers to a callback, not a queue")
        frames: _Gettable = source.frames
    elif callable(getattr(source, "get", None)):
        frames = source
    else:
        raise TypeError("iter_frames takes a Command or a queue")
    return _frames(frames, optional_seconds(timeout), timeout)


def _frames(frames: _Gettable, wait: float | None, timeout: float | None) -> Iterator[Frame]:
    """The frames of ``frames`` to the first terminal one, each waited for at most
    ``wait`` seconds (``None``: unbounded); ``timeout`` is the caller's, for the error."""
    while True:
        try:
            frame = frames.get(timeout=wait)
        except queue.Empty:
            raise DeadlineExpired(Reason.FRAME_TIMEOUT, seconds=timeout) from None
        yield frame
        if frame.terminal:
            return
