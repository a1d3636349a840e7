"""Figures that need no emulator: import times, the Fake, the local provider, the suite.

* ``import managoat_sandbox`` (target < 150 ms), and per provider our
  adapter's module (``managoat_sandbox.providers.<p>``, which the first
  ``create`` loads) vs the SDK up to its client class (``import daytona``
  alone is lazy; ``daytona.Daytona`` is what a user needs), each in a fresh
  interpreter, alternating per round (target: below each SDK);
* exec through the facade vs the Fake adapter called directly (the facade's
  own overhead: resolution, argument checks, tagging), and spawn -> first
  frame on the Fake;
* the Fake conformance suite's run time
  (``python -m pytest tests/test_fake_conformance.py -q`` in a subprocess).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from measure import FASTER_THAN_SDK, WAIT, Row, Target, compared, elapsed, paired, repeated, single

import managoat_sandbox as sandbox
from managoat_sandbox import Handle, config
from managoat_sandbox.testing import Fake

ROOT = Path(__file__).resolve().parent.parent
#: Per provider: our adapter's module vs the import a user of the SDK needs to reach its
#: client (``import daytona`` alone is lazy: the client class is what costs).
IMPORTS = {
    "sprites": ("managoat_sandbox.providers.sprites", "sprites; sprites.SpritesClient"),
    "e2b": ("managoat_sandbox.providers.e2b", "e2b; e2b.Sandbox"),
    "daytona": ("managoat_sandbox.providers.daytona", "daytona; daytona.Daytona"),
}
IMPORT_TARGET = Target("ours", "<", 150, "ours < 150 ms")
SUITE_TARGET = Target("ours", "<", 10, "a few seconds (< 10 s)")


def import_seconds(statement: str) -> float:
    """Seconds ``import <statement>`` takes in a fresh interpreter."""
    code = (
        f"import time; t = time.perf_counter(); import {statement}; print(time.perf_counter() - t)"
    )
    return float(subprocess.check_output([sys.executable, "-c", code], timeout=WAIT))


def import_rows(rounds: int) -> list[Row]:
    ours = repeated(lambda: import_seconds("managoat_sandbox"), rounds)
    rows = [
        single(
            "import", "import managoat_sandbox", ours, unit="ms", scale=1000, target=IMPORT_TARGET
        )
    ]
    for provider, (module, sdk) in IMPORTS.items():
        found = paired(partial(import_seconds, module), partial(import_seconds, sdk), rounds)
        rows.append(
            compared(
                "import",
                f"{provider} adapter vs SDK client",
                found,
                unit="ms",
                scale=1000,
                reference_name="SDK",
                kind="import",
                target=FASTER_THAN_SDK,
            )
        )
    return rows


def _first_frame(handle: Handle, cmd: str, args: list[str]) -> None:
    command = sandbox.spawn(handle, cmd, args)
    assert command.frames is not None
    command.frames.get(timeout=WAIT)
    sandbox.stop_command(command)


def fake_rows(rounds: int) -> list[Row]:
    fake = Fake()
    with config.override(adapters={"fake": fake}):
        return _fake_rows(fake, sandbox.create("fake", "bench"), rounds)


def _fake_rows(fake: Fake, handle: Handle, rounds: int) -> list[Row]:
    try:

        def batch(call: Callable[[], object]) -> float:
            return elapsed(lambda: [call() for _ in range(100)])() / 100

        found = paired(
            lambda: batch(lambda: sandbox.exec(handle, "emit", ["out:x"])),
            lambda: batch(lambda: fake.exec(handle, "emit", ["out:x"])),
            rounds,
        )
        first = repeated(elapsed(lambda: _first_frame(handle, "emit", ["out:x"])), rounds * 10)
        return [
            compared(
                "fake",
                "exec via facade vs adapter",
                found,
                unit="us",
                scale=1e6,
                reference_name="adapter",
                kind="",
                target=None,
            ),
            single("fake", "spawn -> first frame", first, unit="us", scale=1e6),
        ]
    finally:
        fake.reset()


def suite_rows(rounds: int) -> list[Row]:
    def run_suite() -> None:
        subprocess.run(
            [sys.executable, "-m", "pytest", "tests/test_fake_conformance.py", "-q"],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=WAIT * 5,
        )

    return [
        single(
            "fake",
            "conformance suite (pytest, fresh process)",
            [elapsed(run_suite)() for _ in range(rounds)],
            unit="s",
            scale=1,
            target=SUITE_TARGET,
        )
    ]
