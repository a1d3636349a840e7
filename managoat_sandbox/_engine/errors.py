"""Exceptions raised by the process engine.

Every engine failure is an :class:`EngineError` (adapters translate it into their
public exception types).
"""

from __future__ import annotations


class EngineError(Exception):
    """An engine operation failed; the message says why."""
