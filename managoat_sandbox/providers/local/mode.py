"""Which isolation a new local sandbox gets: the ``local.isolation`` setting.

``"auto"`` (the default) isolates when the host can and otherwise runs
unisolated, logging one WARNING that names what is missing; ``"require"``
refuses to create an unisolated sandbox (``Unavailable`` naming what is
missing and how to enable it); ``"off"`` never isolates. A sandbox keeps the
isolation it was created with: one created isolated is never run without it.
"""

from __future__ import annotations

import logging
import threading

from ... import config
from ..._engine import isolation
from ...errors import Invalid, Unavailable

log = logging.getLogger("managoat_sandbox.local")

MODES = ("auto", "require", "off")
_warned = threading.Event()


def setting() -> str:
    """The configured mode, checked."""
    mode = config.get("local", "isolation")
    if mode not in MODES:
        raise Invalid(("isolation", f"local.isolation must be one of {list(MODES)}, got {mode!r}"))
    return str(mode)


def new_sandbox_isolated() -> bool:
    """Whether a sandbox created now is isolated (per the setting and the host)."""
    mode = setting()
    if mode == "off":
        return False
    support = isolation.support()
    if support.available:
        return True
    if mode == "require":
        raise Unavailable(("isolation_unavailable", support.reason))
    if not _warned.is_set():
        _warned.set()
        log.warning(
            "local sandboxes run WITHOUT isolation on this host: %s. Commands can "
            "read your files and reach your network; set local.isolation='require' "
            "to refuse instead.",
            support.reason,
        )
    return False


def isolated_by_default() -> bool:
    """Like :func:`new_sandbox_isolated`, but never raising nor warning (for capabilities)."""
    try:
        mode = setting()
    except Invalid:
        return False
    return mode != "off" and isolation.support().available
