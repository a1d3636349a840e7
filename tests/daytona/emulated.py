"""Shared setup for the tests that drive the Daytona adapter through the emulator."""

from __future__ import annotations

import threading

from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.daytona.logs import FollowPolicy

from ..canary import CANARY

KEY = CANARY

#: Polling paced for a local emulator (the defaults suit daytona.io).
EMULATOR_FOLLOW = FollowPolicy(
    min_interval=0.02,
    max_interval=0.1,
    probe_after=0.3,
    max_probe_interval=0.6,
    unreachable_after=2.0,
    read_timeout=5.0,
)


def emulated_adapter(**kwargs: object) -> Daytona:
    """An adapter paced for the emulator (config must point it there)."""
    return Daytona(follow=EMULATOR_FOLLOW, timeouts=Timeouts(connect=2.0, api=10.0, toolbox=10.0),
                   start_timeout=10.0, **kwargs)  # type: ignore[arg-type]


def reader_threads() -> list[str]:
    """Names of the Daytona reader threads alive now (one per followed command)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("daytona-daytona-")]
