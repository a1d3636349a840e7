"""Where local sandboxes live on disk, and how their names are checked.

::

    <root>/                      config ``local.root`` (default: the user's state dir)
      <name>/                    one sandbox (a box: see managoat_sandbox._engine.box)
        meta.json                {"name", "instance_id", "created_at"}
        suspended                present while the sandbox is suspended
        fs/                      the sandbox's files: its "/" when isolated
        state/                   session journals, exit records, the agent's socket
        checkpoints/<id>/fs/     a snapshot of fs/
      .new-<random>/             a sandbox being created (renamed into place when ready)
      .trash-<random>/           a destroyed sandbox being removed

A name is a single path component: never empty, ``.``/``..``, hidden (leading
dot), containing ``/`` or NUL, or longer than 200 bytes — so it can never
escape the root. Anything else is ``Invalid`` before the disk is touched.
Nothing a command can write is under the root but ``fs/``.
"""

from __future__ import annotations

import json
import os
import secrets
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import attrs

from ... import _args
from ..._engine import records
from ..._engine.errors import EngineError
from ...errors import Invalid, NotFound
from ...reasons import Reason
from . import settings

MAX_NAME_BYTES = 200
META = "meta.json"
SUSPENDED = "suspended"
FS = "fs"
CHECKPOINTS = "checkpoints"


def default_root() -> Path:
    """``$XDG_STATE_HOME/managoat_sandbox/local``, else ``~/.local/state/...``."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return Path(state) / "managoat_sandbox" / "local"


def configured_root() -> Path:
    """The root ``local.root`` names now (absolute), without touching the disk."""
    return Path(settings.root() or default_root()).expanduser().absolute()


def root() -> Path:
    """The configured root, created if missing; a root its rule refuses (a NUL, a lone
    surrogate) is ``Invalid(("config", "local", "root"))``; one that cannot be made, or
    is not a directory, ``Invalid(("root", <what is wrong>))``."""
    path = configured_root()
    if os.path.isdir(path):
        return path
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise Invalid(
            Reason.ROOT,
            problem=f"cannot be created: {error.strerror}",
            message=f"cannot create the local sandbox root {path}: {error.strerror}",
        ) from None
    if not path.is_dir():
        raise Invalid(
            Reason.ROOT,
            problem="is not a directory",
            message=f"the local sandbox root {path} is not a directory",
        )
    return path


@attrs.frozen
class Located:
    """What a local ``Handle.private`` holds: the root its sandbox was created (or its
    handle built) under, so that the handle reaches that sandbox whatever ``local.root``
    is when it is used. A handle without it (``private`` None) uses the configured root."""

    root: Path


def check_name(name: object) -> str:
    """A sandbox name that is exactly one safe path component, else
    ``Invalid(("name", <what is wrong>))``."""
    name = _args.sandbox_name(name)
    if "/" in name or name in (".", "..") or name.startswith("."):
        raise Invalid(
            Reason.NAME,
            problem="must be one path component, not hidden",
            message=f"local sandbox name {name!r} must be one path component, not hidden",
        )
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise Invalid(
            Reason.NAME,
            problem=f"is longer than {MAX_NAME_BYTES} bytes",
            message=f"local sandbox name is longer than {MAX_NAME_BYTES} bytes",
        )
    return name


def sandbox_dir(name: str, base: Path | None = None) -> Path:
    """The directory of sandbox ``name`` (which may not exist) under ``base``, the root a
    handle carries; ``None`` is the configured :func:`root`. A carried root is never
    created: a sandbox under a root that is gone does not exist."""
    return (root() if base is None else base) / check_name(name)


def read_meta(path: Path) -> dict[str, Any] | None:
    """The sandbox's ``meta.json``, or None if ``path`` holds no sandbox."""
    if path.is_symlink():
        return None
    try:
        return records.read_record(path / META)
    except (OSError, EngineError):
        return None


def existing(name: str, base: Path | None = None) -> Path:
    """The directory of an existing sandbox under ``base`` (as in :func:`sandbox_dir`),
    else ``NotFound`` (a symlink is never one)."""
    path = sandbox_dir(name, base)
    if read_meta(path) is None:
        raise NotFound(Reason.SANDBOX, name=name)
    return path


def new_meta(name: str, instance_id: str | None) -> dict[str, Any]:
    """The ``meta.json`` record of a new sandbox."""
    return {
        "name": name,
        "instance_id": instance_id,
        "created_at": datetime.now(timezone.utc).isoformat(),
    }


def write_meta(path: Path, meta: dict[str, Any]) -> None:
    """Write ``meta.json`` into a sandbox directory being created."""
    (path / META).write_text(json.dumps(meta))


def staging_dir(base: Path) -> Path:
    """A fresh hidden directory in the root for a sandbox under construction."""
    path = base / f".new-{secrets.token_hex(8)}"
    path.mkdir(mode=0o700)
    return path
