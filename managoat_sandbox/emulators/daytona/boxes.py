"""Each emulated sandbox is one box (:mod:`managoat_sandbox._engine.box`).

A sandbox's box lives in ``<workdir>/sandboxes/<sandbox id>/`` for the
sandbox's whole life: its ``fs/`` is the sandbox's ``/`` (isolated under
bubblewrap when the host can, see :func:`isolation.support`) and survives
stop/start; each run of the sandbox (each daemon incarnation) starts the
box's agent anew. The sandbox's OS user (``daytona`` unless the create body
names another valid user name) is the box's one user, with its home at
``/home/<user>`` (``/root`` for ``root``).

Network settings map onto the box's egress policy where they can:
``networkBlockAll`` denies everything except the hosts of
``domainAllowList`` (the adapter's reading of §2.6, §6). A CIDR
``networkAllowList`` cannot be expressed by a policy of host names, and is
stored but not enforced; without ``networkBlockAll`` the sandbox keeps the
box's default egress (public addresses only).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

from managoat_sandbox._engine import egress, isolation
from managoat_sandbox._engine.box import Box
from managoat_sandbox._engine.settings import BoxSettings, hostname_for

from .sandboxes import Sandbox

__all__ = ["open_box", "policy_for", "remove_directory", "settings_for"]

DEFAULT_USER = "daytona"
_UID = 1000


def settings_for(sandbox: Sandbox) -> BoxSettings:
    """The box of ``sandbox``: isolated if the host can, its user and home."""
    isolated = isolation.support().available
    for user in (sandbox.user, DEFAULT_USER):
        home = "/root" if user == "root" else f"/home/{user}"
        with contextlib.suppress(ValueError):
            return BoxSettings(isolated=isolated, hostname=hostname_for(sandbox.id), user=user,
                               uid=_UID, home=home)
    raise AssertionError("the default user is always valid")


def open_box(directory: Path, sandbox: Sandbox) -> Box:
    """The box in ``directory``, made (with its agent started) if there is none yet."""
    try:
        return Box.open(directory)
    except FileNotFoundError:
        directory.mkdir(parents=True, exist_ok=True)
        return Box.create(directory, settings_for(sandbox))


def policy_for(sandbox: Sandbox) -> egress.Policy:
    """The egress policy that enforces ``sandbox``'s network settings (see the module doc)."""
    if not sandbox.network_block_all:
        return egress.Policy()
    domains = sandbox.domain_allow_list or ""
    return egress.Policy(allow=tuple(d for d in domains.split(",") if d))


def _make_writable(function: Any, path: str, error: Any) -> None:
    """rmtree's error handler: a sandbox can leave directories without write permission.

    The parent (and a directory at ``path``) get owner ``rwx``; symlinks are
    removed, never followed.
    """
    parent = os.path.dirname(path)
    with contextlib.suppress(OSError):
        mode = os.lstat(parent).st_mode
        if stat.S_ISDIR(mode):
            os.chmod(parent, stat.S_IMODE(mode) | stat.S_IRWXU)
    with contextlib.suppress(OSError):
        info = os.lstat(path)
        if stat.S_ISDIR(info.st_mode):
            os.chmod(path, stat.S_IMODE(info.st_mode) | stat.S_IRWXU)
            _remove_tree(path)
        else:
            os.unlink(path)


def _remove_tree(path: str | Path) -> None:
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=_make_writable)
    else:
        shutil.rmtree(path, onerror=_make_writable)


def remove_directory(directory: Path) -> None:
    """Delete a (stopped) box's directory: renamed aside at once, then removed, whatever
    permissions its sandbox left; nothing if it is gone."""
    trash = directory.with_name(f".trash-{secrets.token_hex(8)}")
    try:
        os.rename(directory, trash)
    except FileNotFoundError:
        return
    _remove_tree(trash)
