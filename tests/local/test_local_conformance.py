"""The conformance suite against the local adapter, with real bash fixtures.

There is no ``spawn_drop`` fixture: no command can make its sandbox's agent drop
a stream (it cannot signal or trace the agent, which is process 1 of its PID
namespace and not dumpable). Agent death is tested from the host instead
(``test_agent.py``)."""

from __future__ import annotations

import shutil
import tempfile
import unittest
from contextlib import AbstractContextManager
from typing import Any, ClassVar

from managoat_sandbox import config
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing import ConformanceTests

from ..bash_fixtures import COMMON, LATE_CHILD, ORDERED, bulk

BULK = 3_000_000


class LocalConformanceTest(ConformanceTests, unittest.TestCase):
    adapter = Local
    frame_timeout = 10.0
    fixtures: ClassVar[dict[str, tuple[Any, ...]]] = {
        **COMMON,
        "exec_slow": ("bash", ["-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done"]),
        "spawn_bulk": bulk(BULK),
        "exec_late_child": LATE_CHILD,
        "exec_ordered": ORDERED,
    }

    @staticmethod
    def elsewhere() -> AbstractContextManager[None]:
        """Another ``local.root``: the handle rule's other place."""
        return config.override("local", root=LocalConformanceTest._other)

    @classmethod
    def setUpClass(cls) -> None:
        cls._root = tempfile.mkdtemp(prefix="local-conformance-")
        cls._other = tempfile.mkdtemp(prefix="local-conformance-other-")
        cls._saved = config.get("local", "root")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        shutil.rmtree(cls._root, ignore_errors=True)
        shutil.rmtree(cls._other, ignore_errors=True)

    def setUp(self) -> None:
        config.configure("local", root=self._root)
        super().setUp()
