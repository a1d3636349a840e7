"""File operations made with a sandbox user's rights, not the caller's.

A root caller's sandbox runs as an unprivileged host uid of its own
(:attr:`.settings.BoxSettings.host_uid`). Reading, listing or writing that
sandbox's files as root would bypass every permission its commands see (a
file ``chmod 000`` inside would still be read whole), so the library's own
file operations on a box switch the calling *thread's* file-system identity
(``setfsuid``/``setfsgid``, which Linux keeps per thread and which drops the
file-system capabilities while it is not 0) to that uid for their duration.
An unprivileged caller needs nothing: its sandbox's user is the caller itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

_calls: dict[str, Callable[[int], int]] = {}


def _call(name: str) -> Callable[[int], int]:
    """libc's ``setfsuid`` or ``setfsgid`` (loaded on first use: only root needs them)."""
    if name not in _calls:
        import ctypes  # noqa: PLC0415 - only a root caller ever switches identity

        function: Any = getattr(ctypes.CDLL(None, use_errno=True), name)
        function.argtypes = [ctypes.c_uint]
        function.restype = ctypes.c_int
        _calls[name] = function
    return _calls[name]


def _switch(name: str, wanted: int) -> int:
    """Set this thread's file-system id through ``name``; the previous one. OSError if
    the kernel did not take it (the call reports the id in force, never an error)."""
    previous = _call(name)(wanted)
    if _call(name)(wanted) != wanted:
        _call(name)(previous)
        raise PermissionError(f"cannot act as {wanted} on files ({name})")
    return previous


@contextlib.contextmanager
def acting_as(host_uid: int | None) -> Iterator[None]:
    """Within the block, this thread's file operations are checked as host uid and gid
    ``host_uid`` (files it creates are theirs); nothing changes for None or for a caller
    that is not root. The block must not wait on other threads' file operations."""
    if host_uid is None or os.geteuid() != 0:
        yield
        return
    group = _switch("setfsgid", host_uid)
    try:
        user = _switch("setfsuid", host_uid)
        try:
            yield
        finally:
            _switch("setfsuid", user)
    finally:
        _switch("setfsgid", group)
