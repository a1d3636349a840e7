"""The conformance suite against the E2B adapter pointed at the E2B emulator.

Real bash runs every fixture; detachable spawns (the journaling shim) are on
for every spawn, so every fixture exercises the journaled path. ``spawn_drop`` is the
emulator's stream fault: the Start stream closes after one data event, without
``end``.
"""

from __future__ import annotations

import unittest
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from managoat_sandbox import config
from managoat_sandbox.emulators.e2b import E2BEmulator
from managoat_sandbox.providers.e2b import E2B
from managoat_sandbox.testing import ConformanceTests

from ..bash_fixtures import COMMON, LATE_CHILD, bulk
from .emulated import API_KEY, point_at

BULK = 1_000_000
DROP_TESTS = frozenset(
    {
        "test_stream_closed_without_exit_is_an_error_frame_never_an_exit",
        "test_error_frame_carries_a_taxonomy_error",
    }
)


class E2BConformanceTest(ConformanceTests, unittest.TestCase):
    adapter = E2B
    frame_timeout = 10.0
    spawn_opts: ClassVar[dict[str, Any]] = {"detachable": True}
    fixtures: ClassVar[dict[str, tuple[Any, ...]]] = {
        **COMMON,
        "spawn_drop": ("bash", ["-c", "echo partial; sleep 3"]),
        "exec_slow": ("bash", ["-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done"]),
        "spawn_bulk": bulk(BULK),
        "exec_late_child": LATE_CHILD,
        # No "exec_ordered": E2B's process stream delivers stdout and stderr apart,
        # so stderr_to_stdout merges by arrival and cannot promise the order written.
    }
    emulator: ClassVar[E2BEmulator]

    @staticmethod
    def elsewhere() -> AbstractContextManager[None]:
        """The same emulator under another address: the handle rule's other endpoint."""
        return config.override(
            "e2b", base_url=E2BConformanceTest.emulator.base_url.replace("127.0.0.1", "localhost")
        )

    @classmethod
    def setUpClass(cls) -> None:
        cls.emulator = E2BEmulator(credential=API_KEY)
        cls.emulator.start()
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.emulator.stop()

    def setUp(self) -> None:
        point_at(self.emulator)
        self.emulator.faults.clear()
        if self._testMethodName in DROP_TESTS:
            self.emulator.stream_fault("no_end", rpc="Start", after=1)
        super().setUp()
