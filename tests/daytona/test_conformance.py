"""ConformanceTests against the Daytona adapter pointed at the Daytona emulator, with real
bash fixtures: every contract promise, through the real wire protocol."""

from __future__ import annotations

import unittest
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.testing import ConformanceTests

from ..bash_fixtures import COMMON, LATE_CHILD, ORDERED, bulk
from .emulated import KEY, KILL_SESSION_SHELL, emulated_adapter

pytestmark = pytest.mark.timeout(120)

BULK = 300_000
#: Prints, then kills its session shell and shim: the daemon never records an exit.
DROP = "echo hi; " + KILL_SESSION_SHELL


class DaytonaConformanceTest(ConformanceTests, unittest.TestCase):
    """The whole suite; ``spawn_drop`` kills the command's session shell and shim after
    printing, so the daemon never records an exit (:data:`.emulated.KILL_SESSION_SHELL`)."""

    adapter = emulated_adapter()
    frame_timeout = 3.0
    fixtures: ClassVar[dict[str, Any]] = {
        **COMMON,
        "spawn_drop": ("bash", ["-c", DROP]),
        "exec_slow": ("bash", ["-c", "for i in $(seq 1 60); do echo tick $i; sleep 0.1; done"]),
        "spawn_bulk": bulk(BULK),
        "exec_late_child": LATE_CHILD,
        "exec_ordered": ORDERED,
    }
    emulator: ClassVar[DaytonaEmulator]

    @staticmethod
    def elsewhere() -> AbstractContextManager[None]:
        """The same emulator under another address: the handle rule's other endpoint."""
        return config.override(
            "daytona",
            api_url=DaytonaConformanceTest.emulator.api_url.replace("127.0.0.1", "localhost"),
        )

    @classmethod
    def setUpClass(cls) -> None:
        cls.emulator = DaytonaEmulator(credential=KEY)
        cls.emulator.start()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.emulator.stop()

    def setUp(self) -> None:
        config.configure("daytona", api_key=KEY, api_url=self.emulator.api_url)
