"""A local, protocol-faithful Daytona (control plane ``/api`` and the toolbox).

Written from docs/protocols/daytona.md, never from our adapter. See
:class:`DaytonaEmulator` for routes, sandbox layout and the fault API.
"""

from .emulator import DaytonaEmulator

__all__ = ["DaytonaEmulator"]
