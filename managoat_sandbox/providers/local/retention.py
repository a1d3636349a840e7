"""What finished sessions a local sandbox keeps: the ``local.retained_sessions`` and
``local.retained_bytes`` settings.

Every ``spawn`` is a detachable session whose journal and exit record stay on
disk after it ends, so that ``list_sessions`` lists it and ``attach`` replays
it. A sandbox keeps at most ``local.retained_sessions`` finished sessions
(default 100), whose files take at most ``local.retained_bytes`` bytes together
(default 256 MiB; both declared in :mod:`managoat_sandbox.config`); when one
more finishes, the ones that finished longest ago are removed until both bounds
hold — a finished session larger than ``local.retained_bytes`` on its own too —
and attaching to a removed one is ``NotFound``. Running sessions are never
removed, nor counted. The bounds are read at each ``spawn`` and apply to the
sandbox from then on. ``exec`` leaves no session behind at all.
"""

from __future__ import annotations

from ..._settings import read


def bound() -> int:
    """The configured bound, checked by its rule: an int from 0, else
    ``Invalid(("config", "local", "retained_sessions"))`` naming the setting."""
    return int(read("local", "retained_sessions"))


def byte_bound() -> int:
    """The configured bound on the bytes finished sessions take, checked by its rule: an
    int from 0, else ``Invalid(("config", "local", "retained_bytes"))`` naming the setting."""
    return int(read("local", "retained_bytes"))
