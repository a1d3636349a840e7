"""Shared setup for the tests that drive the Daytona adapter through the emulator."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.daytona.stream import FollowPolicy

from ..canary import CANARY
from ..conftest import wait_until

KEY = CANARY
#: Shell text a command runs to kill its session shell and its shim (by pid: the
#: shim's encoders, which hold what it printed, live on), so that no exit is ever
#: recorded. The command's parent is the shim; the shim's parent, field 4 of its
#: /proc stat, the session shell. (A signal to the command's own group would not do:
#: the group is the command's alone.)
KILL_SESSION_SHELL = 's=$PPID; read -r _ _ _ p _ </proc/"$s"/stat; kill -KILL "$p" "$s"'

#: Polling paced for a local emulator (the defaults suit daytona.io).
EMULATOR_FOLLOW = FollowPolicy(
    min_interval=0.02,
    max_interval=0.1,
    probe_after=0.3,
    max_probe_interval=0.6,
    unreachable_after=2.0,
    read_timeout=5.0,
)


def emulated_adapter(follow: FollowPolicy = EMULATOR_FOLLOW, **kwargs: object) -> Daytona:
    """An adapter paced for the emulator (config must point it there)."""
    return Daytona(
        follow=follow,
        timeouts=Timeouts(connect=2.0, api=10.0, toolbox=10.0),
        start_timeout=10.0,
        **kwargs,
    )  # type: ignore[arg-type]


@contextmanager
def serving(emulator: DaytonaEmulator, **kwargs: object) -> Iterator[Daytona]:
    """An emulated adapter (``kwargs`` as for :func:`emulated_adapter`) with config pointed
    at ``emulator`` and no pending fault; afterwards the faults are cleared, no reader
    thread may be left (bounded wait) and every sandbox is destroyed."""
    config.configure("daytona", api_key=KEY, api_url=emulator.api_url)
    emulator.faults.clear()
    adapter = emulated_adapter(**kwargs)  # type: ignore[arg-type]
    yield adapter
    emulator.faults.clear()
    assert wait_until(lambda: not reader_threads(), 5), f"leaked: {reader_threads()}"
    for name in adapter.list_all_names():
        adapter.destroy(adapter.build_handle(name))


def reader_threads() -> list[str]:
    """Names of the Daytona reader threads alive now (one per followed command)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("daytona-daytona-")]
