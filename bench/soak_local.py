"""Soak drivers for the in-process adapters: the Fake and ``local`` (real processes).

Fake faults: ``fail_next`` on exec, spawn or attach with a random taxonomy
error (the call must raise it); its scripts also drop (``closed_before_exit``).
Local faults: the sandbox's agent killed mid-run (the session has no exit
record: ``closed_before_exit``, never an invented exit; the next cycle starts
a new agent), the command killed by a signal (its real code, 137), and an
exec deadline shorter than the command.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import tempfile
from collections.abc import Callable

from soak_cycles import Driver, Fault, Job, deadline_fault
from soak_jobs import bash_job, fake_job

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import Denied, NotFound, RateLimited, SandboxError, Unavailable
from managoat_sandbox.providers.local import layout
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import Command

_names = itertools.count(1)
FAKE_ERRORS: tuple[type[SandboxError], ...] = (Unavailable, RateLimited, Denied, NotFound)


def _error(rng: random.Random) -> SandboxError:
    kind = rng.choice(FAKE_ERRORS)
    return kind(1.0) if kind is RateLimited else kind("soak")


class FakeDriver(Driver):
    """The in-memory reference adapter, registered as ``fake``."""

    name = "fake"

    def __init__(self) -> None:
        self.fake = Fake()
        self.faults = tuple(
            Fault(f"fail_next-{operation}", frozenset(kinds), FAKE_ERRORS, self._failing(operation))
            for operation, kinds in (
                ("exec", {"exec"}),
                ("spawn", {"spawn"}),
                ("attach", {"stop", "attach"}),
            )
        )

    def _failing(self, operation: str) -> Callable[[random.Random], None]:
        """Arms ``fail_next(operation, <a random taxonomy error>)``."""
        return lambda rng: self.fake.fail_next(operation, _error(rng))

    def open(self) -> None:
        config.configure(adapters={"fake": self.fake})
        self.handle = sandbox.create("fake", "soak")

    def recycle(self) -> None:
        self.fake.reset()
        self.handle = sandbox.create("fake", "soak")

    def close(self) -> None:
        self.fake.reset()

    def job(self, rng: random.Random, n: int, *, slow: bool) -> Job:
        return fake_job(rng, n, slow=slow)


class LocalDriver(Driver):
    """The ``local`` adapter under a temporary root."""

    name = "local"

    def __init__(self) -> None:
        self._root = tempfile.TemporaryDirectory(prefix="soak-local-")
        self.faults = (
            deadline_fault(),
            Fault("agent-killed", frozenset({"spawn"}), (Unavailable,), mid=self._kill_agent),
        )

    def open(self) -> None:
        config.configure("local", root=self._root.name)
        self.handle = sandbox.create("local", f"soak-{next(_names)}")

    def recycle(self) -> None:
        sandbox.destroy(self.handle)
        self.open()

    def close(self) -> None:
        sandbox.destroy(self.handle)
        self._root.cleanup()

    def job(self, rng: random.Random, n: int, *, slow: bool) -> Job:
        return bash_job(rng, n, slow=slow, signals=True)

    def _kill_agent(self, command: Command) -> None:
        """SIGKILL the sandbox's agent (and with it, when isolated, every process of it)."""
        record = json.loads(
            (layout.sandbox_dir(self.handle.name) / "state" / "agent.json").read_text()
        )
        with contextlib.suppress(ProcessLookupError):
            os.kill(record["pid"], signal.SIGKILL)
