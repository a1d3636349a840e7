"""Soak drivers for the hosted adapters, each against its local emulator.

Each driver starts the provider's emulator in this process, points the
adapter at it through config, and injects the emulator's own faults. A fault
listed with errors may end its cycle in one of those taxonomy errors (as an
``Error`` frame or an exception) and never in a wrong exit; one listed without
errors must be ridden out: the exact output and the real exit code.

* Sprites: the exec socket dropped after k output frames (TCP abort or a
  clean close, no exit frame), an upgrade refused (429/5xx), the connection
  closed before the upgrade, a short stall, an exec deadline.
* E2B: Start streams without an end, reset, ending in an error, carrying
  garbage or never starting; split or merged envelopes (ridden out); 429 and
  5xx on Start; an exec deadline.
* Daytona: 429, 503 and dropped connections on a command's status and log
  requests, log follows closing early, stale log prefixes (all ridden out by
  a running command's poller; ``attach``, which runs once, may raise them);
  the command lost by the daemon mid-run; the session refused at creation.
"""

from __future__ import annotations

import contextlib
import itertools
import random
from collections.abc import Callable
from typing import Any

from soak_cycles import Driver, Fault, Job, deadline_fault
from soak_jobs import bash_job

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.emulators import Emulator
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.errors import ProviderError, RateLimited, SandboxError, Unavailable
from managoat_sandbox.types import Command

CREDENTIAL = "soak-credential"
EVERY = frozenset({"exec", "spawn", "stop", "attach"})
STARTS = frozenset({"exec", "spawn"})
ATTACHES = frozenset({"stop", "attach"})
_names = itertools.count(1)
Arm = Callable[[random.Random], Any]


class HostedDriver(Driver):
    """An adapter against its emulator; subclasses make the emulator and its faults."""

    def __init__(self, emulator: Emulator, point: Callable[[str], None]) -> None:
        self.emulator = emulator
        self._point = point

    def open(self) -> None:
        self.emulator.start()
        self._point(self.emulator.base_url)
        self.handle = sandbox.create(self.name, f"soak-{next(_names)}")

    def recycle(self) -> None:
        sandbox.destroy(self.handle)
        self.handle = sandbox.create(self.name, f"soak-{next(_names)}")

    def close(self) -> None:
        try:
            with contextlib.suppress(SandboxError):
                sandbox.destroy(self.handle)
        finally:
            self.emulator.stop()

    def clear(self) -> None:
        self.emulator.faults.clear()

    def job(self, rng: random.Random, n: int, *, slow: bool) -> Job:
        return bash_job(rng, n, slow=slow)


class SpritesDriver(HostedDriver):
    """Sprites; the emulator lists finished sessions too, so a spawn's session (whose id
    the adapter only learns after ``spawn`` returns) is found by its command line."""

    name = "sprites"

    def __init__(self) -> None:
        emu = SpritesEmulator(credential=CREDENTIAL)
        emu.behaviour.list_finished_sessions = True
        super().__init__(
            emu, lambda url: config.configure("sprites", base_url=url, token=CREDENTIAL)
        )
        self.faults = (
            Fault(
                "ws-drop",
                EVERY,
                (Unavailable,),
                lambda rng: emu.drop_exec(rng.randint(0, 2), close_frame=rng.random() < 0.5),
            ),
            Fault(
                "upgrade-refused",
                EVERY,
                (RateLimited, Unavailable),
                lambda rng: emu.refuse_upgrade(rng.choice((429, 500, 502, 503))),
            ),
            Fault(
                "connection-dropped",
                EVERY,
                (Unavailable,),
                lambda rng: emu.drop_connection(method="GET", path=r"/exec(/[^/]+)?$"),
            ),
            Fault("stall", STARTS, (), lambda rng: emu.stall(0.05, path=r"/exec$")),
            deadline_fault(),
        )


class E2BDriver(HostedDriver):
    """E2B: control plane and envd on the emulator's one port."""

    name = "e2b"

    def __init__(self) -> None:
        emu = E2BEmulator(credential=CREDENTIAL)
        super().__init__(
            emu,
            lambda url: config.configure("e2b", base_url=url, sandbox_url=url, api_key=CREDENTIAL),
        )
        start = r"/process\.Process/Start$"

        def stream(
            kind: str,
            after: Callable[[random.Random], int] = lambda rng: 0,
            body: Callable[[random.Random], object] = lambda rng: None,
        ) -> Arm:
            return lambda rng: emu.stream_fault(kind, rpc="Start", after=after(rng), body=body(rng))

        def some(rng: random.Random) -> int:
            return rng.randint(0, 3)

        def error_body(rng: random.Random) -> object:
            return rng.choice(({"code": "unavailable", "message": "soak"}, "stream unavailable"))

        self.faults = (
            Fault("no-end", EVERY, (Unavailable,), stream("no_end", some)),
            Fault("reset", EVERY, (Unavailable,), stream("reset", some)),
            Fault(
                "error-end",
                EVERY,
                (Unavailable, ProviderError),
                stream("error_end", some, error_body),
            ),
            Fault(
                "garbage",
                EVERY,
                (ProviderError,),
                stream("garbage", body=lambda rng: rng.choice(("json", "compressed"))),
            ),
            Fault("no-start", EVERY, (Unavailable,), stream("no_start")),
            Fault("split", EVERY, (), stream("split", lambda rng: rng.randint(1, 7))),
            Fault("merge", EVERY, (), stream("merge")),
            Fault(
                "rate-limited",
                EVERY,
                (RateLimited,),
                lambda rng: emu.rate_limit(path=start, retry_after=1),
            ),
            Fault(
                "server-error",
                EVERY,
                (Unavailable,),
                lambda rng: emu.server_error(rng.choice((500, 502, 503)), path=start),
            ),
            deadline_fault(),
        )


COMMAND_PATHS = r"/command/[^/]+(/logs)?$"


class DaytonaDriver(HostedDriver):
    """Daytona: the control plane under ``/api``, the toolbox under ``/toolbox``."""

    name = "daytona"

    def __init__(self) -> None:
        emu = DaytonaEmulator(credential=CREDENTIAL)
        super().__init__(
            emu, lambda url: config.configure("daytona", api_url=url + "/api", api_key=CREDENTIAL)
        )

        def times(rng: random.Random) -> int:
            return rng.randint(1, 3)

        transient: dict[str, Arm] = {
            "rate-limited": lambda rng: emu.rate_limit(
                path=COMMAND_PATHS, retry_after=0, times=times(rng)
            ),
            "unavailable": lambda rng: emu.unavailable(
                as_json=rng.random() < 0.5, path=COMMAND_PATHS, times=times(rng)
            ),
            "connection-dropped": lambda rng: emu.drop_connections(
                path=COMMAND_PATHS, times=times(rng)
            ),
            "log-closed-early": lambda rng: emu.close_log_stream_early(
                rng.randint(0, 20), times=times(rng)
            ),
            "stale-log-prefix": lambda rng: emu.serve_stale_log_prefix(
                rng.randint(0, 20), times=times(rng)
            ),
        }
        self.faults = (
            *(Fault(name, STARTS, (), arm) for name, arm in transient.items()),
            *(
                Fault(f"{name}-at-attach", ATTACHES, (RateLimited, Unavailable), arm)
                for name, arm in transient.items()
            ),
            Fault("command-lost", frozenset({"spawn"}), (Unavailable,), mid=self._lose),
            Fault(
                "session-refused",
                STARTS,
                (Unavailable,),
                lambda rng: emu.unavailable(path=r"/process/session$", method="POST"),
            ),
            deadline_fault(),
        )

    def _lose(self, command: Command) -> None:
        """From now on the daemon answers 404 for the command: it lost track of it."""
        self.emulator.faults.add(
            "status",
            path=COMMAND_PATHS,
            status=404,
            times=10_000,
            body={"statusCode": 404, "message": "command not found"},
        )
