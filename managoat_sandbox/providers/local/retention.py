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

from ... import config
from ...errors import Invalid


def bound() -> int:
    """The configured bound, checked: an int >= 0, else ``Invalid`` naming the setting."""
    value = config.get("local", "retained_sessions")
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Invalid(
            (
                "retained_sessions",
                "local.retained_sessions must be an int >= 0 "
                f"(finished sessions kept per sandbox), got {value!r}",
            )
        )
    return value
