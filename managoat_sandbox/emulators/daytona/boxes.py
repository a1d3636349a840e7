"""Each emulated sandbox is one box (:mod:`managoat_sandbox._engine.box`).

A sandbox's box lives in ``<workdir>/sandboxes/<sandbox id>/`` for the
sandbox's whole life: its ``fs/`` is the sandbox's ``/`` (isolated under
bubblewrap when the host can, see :func:`isolation.support`) and survives
stop/start; each run of the sandbox (each daemon incarnation) starts the
box's agent anew. The sandbox's OS user (``daytona`` unless the create body
names another valid user name) is the box's one user, with its home at
``/home/<user>`` (``/root`` for ``root``). Every directory the emulator makes
on the way (and the workdir, when it makes it) is its user's alone
(``0700``, :func:`~managoat_sandbox.emulators._fs.private_dirs`).

Network settings map onto the box's egress policy where they can:
``networkBlockAll`` denies everything except the hosts of
``domainAllowList`` (the adapter's reading: docs/protocols/daytona.md#network-settings). A CIDR
``networkAllowList`` cannot be expressed by a policy of host names, and is
stored but not enforced; without ``networkBlockAll`` the sandbox keeps the
box's default egress (public addresses only).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from managoat_sandbox._engine import egress, isolation
from managoat_sandbox._engine.box import Box
from managoat_sandbox._engine.settings import BoxSettings, hostname_for

from .._fs import private_dirs
from .sandboxes import Sandbox

__all__ = ["open_box", "policy_for", "settings_for"]

DEFAULT_USER = "daytona"
_UID = 1000


def settings_for(sandbox: Sandbox) -> BoxSettings:
    """The box of ``sandbox``: isolated if the host can, its user and home."""
    isolated = isolation.support().available
    for user in (sandbox.user, DEFAULT_USER):
        home = "/root" if user == "root" else f"/home/{user}"
        with contextlib.suppress(ValueError):
            return BoxSettings(
                isolated=isolated, hostname=hostname_for(sandbox.id), user=user, uid=_UID, home=home
            )
    raise AssertionError("the default user is always valid")


def open_box(directory: Path, sandbox: Sandbox) -> Box:
    """The box in ``directory``, made (with its agent started) if there is none yet."""
    try:
        return Box.open(directory)
    except FileNotFoundError:
        private_dirs(directory)
        return Box.create(directory, settings_for(sandbox))


def policy_for(sandbox: Sandbox) -> egress.Policy:
    """The egress policy that enforces ``sandbox``'s network settings (see the module doc)."""
    if not sandbox.network_block_all:
        return egress.Policy()
    domains = sandbox.domain_allow_list or ""
    return egress.Policy(allow=tuple(d for d in domains.split(",") if d))
