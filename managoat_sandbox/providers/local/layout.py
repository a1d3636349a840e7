"""Where a local sandbox lives on disk, and how names and paths are checked.

::

    <root>/                      config ``local.root`` (default: the user's state dir)
      <name>/                    one sandbox
        meta.json                {"name", "instance_id", "created_at"}
        suspended                present while the sandbox is suspended
        fs/                      the sandbox's files: cwd and HOME of its commands
        sessions/<id>/           one detachable session (a process-engine directory)
        execs/<id>/              the private session of one ``exec``; removed after
        checkpoints/<id>/fs/     a snapshot of fs/
      .trash-<random>/           a destroyed sandbox being removed

A name is a single path component: never empty, ``.``/``..``, hidden (leading
dot), containing ``/`` or NUL, or longer than 200 bytes — so it can never
escape the root. Anything else is ``Invalid`` before the disk is touched.
"""

from __future__ import annotations

import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ... import _args, config
from ...errors import Invalid, NotFound

MAX_NAME_BYTES = 200
META = "meta.json"
SUSPENDED = "suspended"
FS = "fs"
SESSIONS = "sessions"
EXECS = "execs"
CHECKPOINTS = "checkpoints"


def default_root() -> Path:
    """``$XDG_STATE_HOME/managoat_sandbox/local``, else ``~/.local/state/...``."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local",
                                                             "state")
    return Path(state) / "managoat_sandbox" / "local"


def root() -> Path:
    """The configured root, created if missing; a root that cannot be made is ``Invalid``."""
    path = Path(config.get("local", "root") or default_root()).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise Invalid(f"cannot create the local sandbox root {path}: {error.strerror}") from None
    if not path.is_dir():
        raise Invalid(f"the local sandbox root {path} is not a directory")
    return path


def check_name(name: object) -> str:
    """A sandbox name that is exactly one safe path component."""
    name = _args.sandbox_name(name)
    if "/" in name or name in (".", "..") or name.startswith("."):
        raise Invalid(f"local sandbox name {name!r} must be one path component, not hidden")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        raise Invalid(f"local sandbox name is longer than {MAX_NAME_BYTES} bytes")
    return name


def sandbox_dir(name: str) -> Path:
    """The directory of sandbox ``name`` (which may not exist)."""
    name = check_name(name)
    return root() / name


def existing(name: str) -> Path:
    """The directory of an existing sandbox, else ``NotFound``.

    A symlink in the root is never followed: it is not a sandbox.
    """
    path = sandbox_dir(name)
    if path.is_symlink() or not (path / META).is_file():
        raise NotFound(("sandbox", name))
    return path


def write_meta(path: Path, name: str, instance_id: str | None, *, replace: bool) -> None:
    """Make the sandbox's directories and write ``meta.json`` atomically.

    With ``replace=False`` an existing record is kept (adoption), so a
    concurrent ``create_new`` never loses its ``instance_id`` to a ``create``.
    """
    meta = {
        "name": name,
        "instance_id": instance_id,
        "created_at": datetime.now(timezone.utc).isoformat(),
    }
    for sub in (FS, SESSIONS, EXECS, CHECKPOINTS):
        (path / sub).mkdir(exist_ok=True)
    tmp = path / f".{META}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(meta))
    if replace:
        os.replace(tmp, path / META)
        return
    try:
        os.link(tmp, path / META)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def read_meta(path: Path) -> dict[str, Any]:
    """The sandbox's ``meta.json`` (an empty dict if unreadable)."""
    try:
        value = json.loads((path / META).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def inside(fs: Path, path: str) -> Path:
    """Map a sandbox path (absolute or relative to ``fs``) into ``fs``.

    A path that would leave ``fs`` (through ``..``) is ``Invalid``.
    """
    if not isinstance(path, str) or not path or "\x00" in path:
        raise Invalid(("path", "must be a non-empty str without NUL"))
    target = Path(os.path.normpath(fs / path.lstrip("/")))
    if target != fs and fs not in target.parents:
        raise Invalid(("path", f"{path!r} escapes the sandbox"))
    return target
