"""The conformance suite run against the reference ``Fake`` adapter.

Every gate is open for the Fake (all capabilities it advertises, every
optional fixture), so every conformance test runs here except the ones whose
capability the Fake lacks.
"""

from __future__ import annotations

import unittest
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any

from managoat_sandbox import config
from managoat_sandbox.testing.conformance import ConformanceTests
from managoat_sandbox.testing.fake import Fake

BULK_CHUNK = 10_000
BULK_CHUNKS = 100

#: The Fake's fixtures (docs/protocols/contract.md#script-vocabulary, plus the optional ones).
FAKE_FIXTURES: Mapping[str, Sequence[Any]] = {
    "exec_ok": ("emit", ["out:hello"], "hello"),
    "exec_fail": ("emit", ["out:oops", "exit:3"], 3),
    "spawn_ok": ("emit", ["out:hello", "exit:0"]),
    "spawn_drop": ("emit", ["out:partial", "drop"]),
    "spawn_stay": ("emit", ["out:ready", "stay"]),
    "exec_slow": ("emit", ["out:a", "sleep:3", "out:b", "sleep:3", "exit:0"]),
    "exec_mixed": ("emit", ["out:OUT", "err:ERR"], "OUT", "ERR"),
    "spawn_bulk": ("emit", ["out:" + "x" * BULK_CHUNK] * BULK_CHUNKS, BULK_CHUNK * BULK_CHUNKS),
    "exec_late_child": ("emit", ["out:early\n", "sleep:0.1", "out:late\n"], "early", "late"),
    "exec_ordered": ("emit", ["out:a\n", "err:b\n", "out:c\n"], "a\nb\nc\n"),
    "spawn_deaf": ("emit", ["out:deaf", "deaf:10"]),
    # The Fake runs no process: it ends as a command SIGKILL killed is reported.
    "exec_killed": ("emit", ["out:up", "exit:137"], 9),
}


def another_world() -> AbstractContextManager[None]:
    """The Fake configured to make and list its sandboxes in another world."""
    return config.override("fake", world="elsewhere")


class FakeConformanceTest(ConformanceTests, unittest.TestCase):
    adapter = Fake()
    fixtures = FAKE_FIXTURES
    elsewhere = another_world

    def setUp(self) -> None:
        super().setUp()
        self.adapter.reset()


if __name__ == "__main__":
    unittest.main()
