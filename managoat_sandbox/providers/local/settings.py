"""The local adapter's settings (declared in :mod:`.declaration`), read from config scope
``local`` when they apply: ``root`` (``$MANAGOAT_SANDBOX_LOCAL_ROOT``) and
``isolation`` (``$MANAGOAT_SANDBOX_LOCAL_ISOLATION``, default ``"auto"``) when a
sandbox is made or adopted, ``retained_sessions`` and ``retained_bytes`` at each
``spawn``, ``egress_hosts`` when a policy is applied. A value its rule refuses is
``Invalid(("config", "local", key))`` naming the setting, as for every provider
(:class:`~..._settings.ProviderSettings`).
"""

from __future__ import annotations

from ..._settings import ProviderSettings
from .declaration import DECLARATION

__all__ = [
    "SETTINGS",
    "egress_hosts",
    "isolation",
    "retained_bytes",
    "retained_sessions",
    "root",
]

SETTINGS = ProviderSettings(DECLARATION.name, DECLARATION.label)


def root() -> str | None:
    """Where sandboxes live, when configured (``None``: the default root)."""
    value = SETTINGS.optional("root")
    return None if value is None else str(value)


def isolation() -> str:
    """The isolation mode: ``"auto"``, ``"require"`` or ``"off"``."""
    return str(SETTINGS.value("isolation"))


def retained_sessions() -> int:
    """How many finished sessions a sandbox keeps (see :func:`retained_bytes`)."""
    return int(SETTINGS.value("retained_sessions"))


def retained_bytes() -> int:
    """How many bytes a sandbox's finished sessions may take together.

    Every ``spawn`` is a detachable session whose journal and exit record stay on
    disk after it ends, so that ``list_sessions`` lists it and ``attach`` replays
    it. A sandbox keeps at most ``local.retained_sessions`` finished sessions
    (default 100), whose files take at most ``local.retained_bytes`` bytes together
    (default 256 MiB; both declared in :mod:`.declaration`); when one
    more finishes, the ones that finished longest ago are removed until both bounds
    hold — a finished session larger than ``local.retained_bytes`` on its own too —
    and attaching to a removed one is ``NotFound``. Running sessions are never
    removed, nor counted. The bounds are read at each ``spawn`` and apply to the
    sandbox from then on. ``exec`` leaves no session behind at all.
    """
    return int(SETTINGS.value("retained_bytes"))


def egress_hosts() -> dict[str, str]:
    """Host names pinned to addresses for the sandbox's egress proxy (lowercased)."""
    pins: dict[str, str] = SETTINGS.optional("egress_hosts") or {}
    return pins
