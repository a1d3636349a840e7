"""Which isolation a new local sandbox gets: the ``local.isolation`` setting.

``"auto"`` (the default) isolates when the host can and otherwise runs
unisolated, issuing an :class:`~managoat_sandbox.IsolationWarning` (shown by
default) and logging one WARNING that names what is missing; ``"require"``
refuses to create an unisolated sandbox (``Unavailable`` naming what is
missing and how to enable it), and to use one created unisolated before;
``"off"`` never isolates. A sandbox keeps the isolation it was created with:
one created isolated is never run without it.
"""

from __future__ import annotations

import logging
import threading
import warnings

from ..._engine import isolation
from ..._setting_rules import ISOLATION_MODES
from ...contract import IsolationWarning
from ...errors import Invalid, Unavailable
from ...reasons import Reason
from . import settings

log = logging.getLogger("managoat_sandbox.local")

MODES = ISOLATION_MODES
_warned = threading.Event()


def new_sandbox_isolated() -> bool:
    """Whether a sandbox created now is isolated (per the setting and the host)."""
    mode = settings.isolation()
    if mode == "off":
        return False
    support = isolation.support()
    if support.available:
        return True
    if mode == "require":
        raise Unavailable(Reason.ISOLATION_UNAVAILABLE, problem=support.reason)
    message = (
        f"local sandboxes run WITHOUT isolation on this host: {support.reason}. Commands "
        "can read your files and reach your network; set local.isolation='require' to "
        "refuse instead, or 'off' to choose this knowingly."
    )
    warnings.warn(IsolationWarning(message), stacklevel=2)
    if not _warned.is_set():
        _warned.set()
        log.warning("%s", message)
    return False


def check_adoptable(isolated: bool) -> None:
    """Refuse, under ``"require"``, a sandbox that would run unisolated (one created
    unisolated earlier, under ``"auto"`` or ``"off"``):
    ``Unavailable(("isolation_unavailable", "created without isolation"))``, its message
    saying what to do."""
    if not isolated and settings.isolation() == "require":
        raise Unavailable(
            Reason.ISOLATION_UNAVAILABLE,
            problem="created without isolation",
            message=(
                "this sandbox was created without isolation and local.isolation is "
                "'require': destroy it and create it again where the host can isolate"
            ),
        )


def isolated_by_default() -> bool:
    """Like :func:`new_sandbox_isolated`, but never raising nor warning (for capabilities)."""
    try:
        mode = settings.isolation()
    except Invalid:
        return False
    return mode != "off" and isolation.support().available
