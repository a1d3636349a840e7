"""A local, protocol-faithful Daytona (control plane ``/api`` and the toolbox).

Written from docs/protocols/daytona.md, never from our adapter. See
:class:`DaytonaEmulator` for routes, sandbox layout and the fault API.
"""

from .. import require_extra

require_extra()

from .emulator import DaytonaEmulator  # noqa: E402 - only once the extra is known to be there

__all__ = ["DaytonaEmulator"]
