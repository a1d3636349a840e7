"""Exceptions raised by the process engine.

Every engine failure is an :class:`EngineError`; the two subclasses name the
conditions a caller usually handles on its own (adapters translate them into
their public exception types).
"""

from __future__ import annotations


class EngineError(Exception):
    """An engine operation failed; the message says why."""


class ProcessExited(EngineError):
    """The process has exited, or its supervisor is gone, so it takes no more input."""


class StdinNotOpen(EngineError):
    """The session was started without stdin, or its stdin was already closed."""
