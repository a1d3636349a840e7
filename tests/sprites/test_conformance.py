"""The Sprites adapter passes ConformanceTests against the Sprites emulator, real bash inside."""

from __future__ import annotations

import unittest
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from managoat_sandbox import config
from managoat_sandbox.emulators.sprites import SpritesEmulator
from managoat_sandbox.providers.sprites import Sprites
from managoat_sandbox.testing import ConformanceTests

from ..bash_fixtures import COMMON, LATE_CHILD, bulk
from .conftest import TOKEN


class SpritesConformanceTest(ConformanceTests, unittest.TestCase):
    """Every gate the adapter advertises, on real processes behind the emulator.

    ``spawn_drop`` is the emulator's drop-before-exit fault: the two tests
    that use it queue a TCP abort after the first output frame, then run
    unchanged.
    """

    adapter = Sprites(keepalive=1.0)
    frame_timeout = 3.0
    fixtures: ClassVar[dict[str, Any]] = {
        **COMMON,
        "spawn_drop": ("bash", ["-c", "echo partial; sleep 30; echo never"]),
        "exec_slow": ("bash", ["-c", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 1; done"]),
        "spawn_bulk": bulk(300000),
        "exec_late_child": LATE_CHILD,
        # No "exec_ordered": the Sprites exec stream delivers stdout and stderr
        # apart, so stderr_to_stdout merges by arrival and cannot promise the order.
    }
    emulator: ClassVar[SpritesEmulator]

    @staticmethod
    def elsewhere() -> AbstractContextManager[None]:
        """The same emulator under another address: the handle rule's other endpoint."""
        return config.override(
            "sprites",
            base_url=SpritesConformanceTest.emulator.base_url.replace("127.0.0.1", "localhost"),
        )

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.emulator = SpritesEmulator(credential=TOKEN)
        cls.emulator.start()
        cls.emulator.behaviour.list_finished_sessions = True

    @classmethod
    def tearDownClass(cls) -> None:
        cls.emulator.stop()
        super().tearDownClass()

    def setUp(self) -> None:
        config.configure("sprites", base_url=self.emulator.base_url, token=TOKEN)
        self.emulator.faults.clear()

    def test_stream_closed_without_exit_is_an_error_frame_never_an_exit(self) -> None:
        self.emulator.drop_exec(after_frames=1)
        super().test_stream_closed_without_exit_is_an_error_frame_never_an_exit()

    def test_error_frame_carries_a_taxonomy_error(self) -> None:
        self.emulator.drop_exec(after_frames=1)
        super().test_error_frame_carries_a_taxonomy_error()
