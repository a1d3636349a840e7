"""Exec sessions kept for reuse, through the Daytona emulator: what one exec leaves
running in its session never reaches the output of the next exec there.

The first exec leaves a writer behind that waits for a gate file, then writes to the
stdout it inherited and marks that it has written. The second exec (same sandbox,
so the same kept session) opens the gate and waits in the sandbox for the mark, so
the late write happens while the second exec runs: the order is forced, no race is
won by timing.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.types import Handle

from .emulated import serving

pytestmark = pytest.mark.timeout(60)

WAIT_FOR = "i=0; while [ ! -e {path} ]; do i=$((i+1)); [ $i -lt 2000 ] || exit 9; sleep 0.01; done"
LEAVER = ("( " + WAIT_FOR.format(path="gate") + "; echo LATE-WRITE-FROM-AN-EARLIER-EXEC; "
          ": > written ) &")
SECOND = "touch gate; " + WAIT_FOR.format(path="written") + "; echo mine"


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"kept-{request.node.name[:40]}")


@pytest.mark.parametrize("merge", [False, True])
def test_a_process_left_by_an_earlier_exec_never_writes_into_a_later_one(
    daytona: Daytona, handle: Handle, merge: bool
) -> None:
    first = daytona.exec(handle, "sh", ["-c", LEAVER], timeout=20, stderr_to_stdout=merge)
    assert (first.output, first.exit_code) == (b"", 0)
    second = daytona.exec(handle, "sh", ["-c", SECOND], timeout=30, stderr_to_stdout=merge)
    assert (second.output, second.exit_code) == (b"mine\n", 0)
