"""How many finished sessions a local sandbox keeps: the ``local.retained_sessions`` setting.

Every ``spawn`` is a detachable session whose journal and exit record stay on
disk after it ends, so that ``list_sessions`` lists it and ``attach`` replays
it. A sandbox keeps at most ``local.retained_sessions`` finished sessions
(default 100, declared in :mod:`managoat_sandbox.config`); when one more
finishes, the one that finished longest ago is removed, and attaching to it is
``NotFound``. Running sessions are never removed. The bound is read at each
``spawn`` and applies to the sandbox from then on. ``exec`` leaves no session
behind at all.
"""

from __future__ import annotations

from ..._settings import read


def bound() -> int:
    """The configured bound, checked by its rule: an int from 0, else
    ``Invalid(("config", "local", "retained_sessions"))`` naming the setting."""
    return int(read("local", "retained_sessions"))
