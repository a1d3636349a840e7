"""``cp``: a file or a whole tree between this machine and a sandbox, like ``docker cp``.

Exactly one of the two operands is ``BOX:PATH`` (a sandbox name, a colon, an
absolute path in it); the other is a local path (write ``./a:b`` for a local
name holding a colon: an operand is remote only when a colon comes before any
``/``). ``BOX:PATH`` as the source downloads, as the destination uploads; the
destination becomes the copy. On a terminal, a progress line on stderr
(rewritten in place, cleared at the end); nothing when stderr is not a
terminal. Under ``--json``: one document with the totals.
"""

from __future__ import annotations

import argparse
import os
from typing import NamedTuple

from .. import facade as sandbox
from ..errors import SandboxError
from ..types import TransferProgress
from . import exits
from .console import Console

__all__ = ["Remote", "run_cp", "split_remote"]


class Remote(NamedTuple):
    """A ``BOX:PATH`` operand."""

    name: str
    path: str


def split_remote(operand: str) -> Remote | None:
    """``BOX:PATH`` as a :class:`Remote`, or ``None`` for a local path (no colon before
    the first ``/``, or nothing before the colon)."""
    name, colon, path = operand.partition(":")
    if not colon or not name or "/" in name:
        return None
    return Remote(name, path)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def progress_text(done: TransferProgress) -> str:
    """One progress line: bytes and files so far, and a bar when the total is known."""
    text = f"{_size(done.bytes)}, {done.files} file{'s' if done.files != 1 else ''}"
    if done.bytes_total:
        share = min(done.bytes / done.bytes_total, 1.0)
        filled = int(share * 20)
        text = f"[{'#' * filled}{'.' * (20 - filled)}] {share:4.0%}  {text}"
        text += f" of {_size(done.bytes_total)}"
    return text


def run_cp(args: argparse.Namespace, console: Console) -> int:
    """Copy between ``args.source`` and ``args.destination`` (module docstring)."""
    source, destination = split_remote(args.source), split_remote(args.destination)
    if (source is None) == (destination is None):
        console.note("error: cp needs exactly one BOX:PATH operand (the other is a local path)")
        return exits.USAGE
    shown = console.status if console.stderr_is_terminal() and not console.json_mode else None
    report = None if shown is None else (lambda done: shown(progress_text(done)))
    local = args.source if destination is not None else args.destination
    try:
        if destination is not None:
            handle = sandbox.build_handle(args.provider, destination.name)
            action = "upload"
            done = sandbox.upload(
                handle, local, destination.path, progress=report, timeout=args.timeout
            )
        else:
            assert source is not None
            handle = sandbox.build_handle(args.provider, source.name)
            action = "download"
            done = sandbox.download(
                handle, source.path, local, progress=report, timeout=args.timeout
            )
    except SandboxError:
        raise  # the CLI's one-line error (a DeadlineExpired is an OSError too)
    except OSError as error:  # the local side: a path that cannot be read or written
        console.clear_status()
        console.note(f"error: {error.filename or local}: {error.strerror or error}")
        return exits.ERROR
    finally:
        console.clear_status()
    if console.json_mode:
        console.document(
            {
                "ok": True,
                "action": action,
                "provider": handle.provider,
                "name": handle.name,
                "local": os.fspath(local),
                "files": done.files,
                "bytes": done.bytes,
            }
        )
    return exits.OK
