"""The conformance suite against the local adapter, with real bash fixtures.

There is no ``spawn_drop`` fixture: no command can make its sandbox's agent drop
a stream (it cannot signal or trace the agent, which is process 1 of its PID
namespace and not dumpable). Agent death is tested from the host instead
(``test_agent.py``)."""

from __future__ import annotations

import shutil
import tempfile
import unittest
from typing import Any, ClassVar

from managoat_sandbox import config
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing import ConformanceTests

BULK = 3_000_000


class LocalConformanceTest(ConformanceTests, unittest.TestCase):
    adapter = Local
    frame_timeout = 10.0
    fixtures: ClassVar[dict[str, tuple[Any, ...]]] = {
        "exec_ok": ("bash", ["-lc", "echo hello"], "hello"),
        "exec_fail": ("bash", ["-lc", "echo oops; exit 3"], 3),
        "spawn_ok": ("bash", ["-lc", "echo hello"]),
        "spawn_stay": ("bash", ["-c", "echo ready; exec cat"]),
        "exec_slow": ("bash", ["-c", "for i in 1 2 3 4 5 6; do echo $i; sleep 1; done"]),
        "exec_mixed": ("bash", ["-c", "echo OUT; echo ERR >&2"], "OUT", "ERR"),
        "spawn_bulk": ("bash", ["-c", f"head -c {BULK} /dev/zero | tr '\\0' x"], BULK),
        "print_file": ("cat", []),
        "make_private": ("chmod", ["000"]),
        "exec_late_child": (
            "bash",
            ["-c", "(sleep 0.5; echo late) & echo early"],
            "early",
            "late",
        ),
        "exec_ordered": (
            "bash",
            ["-c", "echo a; echo b >&2; echo c; echo d >&2"],
            "a\nb\nc\nd\n",
        ),
    }

    @classmethod
    def setUpClass(cls) -> None:
        cls._root = tempfile.mkdtemp(prefix="local-conformance-")
        cls._saved = config.get("local", "root")
        super().setUpClass()

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        shutil.rmtree(cls._root, ignore_errors=True)

    def setUp(self) -> None:
        config.configure("local", root=self._root)
        super().setUp()
