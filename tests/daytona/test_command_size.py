"""How big a command may be on Daytona, through the emulator.

The daemon's session and command records echo the text of the commands run
there, and the adapter reads those records (to find an exec that outlived its
answer window, to follow or attach a command). A command's text is bounded
(:data:`~managoat_sandbox.providers.daytona.shim.COMMAND_LIMIT`): one over
it is ``Invalid`` at once, before anything is sent — never a transient error
that a retry could not fix. One under it runs, also past the answer window.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from managoat_sandbox import config
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.daytona.shim import COMMAND_LIMIT
from managoat_sandbox.types import Handle

from .emulated import EMULATOR_FOLLOW, KEY

pytestmark = pytest.mark.timeout(60)

#: The answer window of the adapter under test (its toolbox read timeout), in seconds.
WINDOW = 1.0


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    config.configure("daytona", api_key=KEY, api_url=emulator.api_url)
    emulator.faults.clear()
    adapter = Daytona(follow=EMULATOR_FOLLOW, start_timeout=10.0,
                      timeouts=Timeouts(connect=2.0, api=10.0, toolbox=WINDOW))
    yield adapter
    for name in adapter.list_all_names():
        adapter.destroy(adapter.build_handle(name))


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"size-{request.node.name[:40]}")


def test_a_command_over_the_limit_is_invalid_before_anything_is_sent(
    daytona: Daytona, handle: Handle, emulator: DaytonaEmulator
) -> None:
    emulator.clear_requests()
    big = "x" * COMMAND_LIMIT
    for run in (lambda: daytona.exec(handle, "echo", [big]),
                lambda: daytona.spawn(handle, "echo", [big]),
                lambda: daytona.exec(handle, "true", [], env={"BIG": big})):
        with pytest.raises(Invalid) as caught:
            run()
        kind, message = caught.value.detail
        assert kind == "command_too_large" and str(COMMAND_LIMIT) in message
        assert not caught.value.transient
    assert [r for r in emulator.requests if "/process/session" in r.path] == []


def test_a_large_command_under_the_limit_runs_past_the_answer_window(
    daytona: Daytona, handle: Handle
) -> None:
    # 100 KB of text is more than the 64 KiB an ordinary answer may take; the exec
    # outlives its answer window (the command sleeps 3 windows), so the adapter
    # finds it in its session's record and follows it.
    filler = "y" * 100_000
    script = f"sleep {3 * WINDOW}; echo done; : {filler}"
    assert daytona.exec(handle, "sh", ["-c", script], timeout=30) == (b"done\n", 0)
