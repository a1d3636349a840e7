"""How big a command may be on Daytona, through the emulator.

The daemon's session and command records echo the text of the commands run
there, and the adapter reads those records (to find an exec that outlived its
answer window, to follow or attach a command). A command's text is bounded
(:data:`~managoat_sandbox.providers.daytona.shim.COMMAND_LIMIT`): one over
it is ``Invalid`` at once, before anything is sent — never a transient error
that a retry could not fix. One under it runs, also past the answer window.
A kept exec session stops being reused once its record echoes more than
:data:`~managoat_sandbox.providers.daytona.exec.ECHO_BUDGET`, and a session
listing over its limit is ``Truncated`` (never a partial view).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from managoat_sandbox import config, reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid, Truncated
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.providers.daytona.api import Timeouts
from managoat_sandbox.providers.daytona.exec import ECHO_BUDGET, ExecPool
from managoat_sandbox.providers.daytona.shim import COMMAND_LIMIT
from managoat_sandbox.providers.daytona.toolbox import LISTING_LIMIT
from managoat_sandbox.types import Handle

from .emulated import EMULATOR_FOLLOW, KEY

pytestmark = pytest.mark.timeout(60)

#: The answer window of the adapter under test (its toolbox read timeout), in seconds.
WINDOW = 1.0


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    config.configure("daytona", api_key=KEY, api_url=emulator.api_url)
    emulator.faults.clear()
    adapter = Daytona(
        follow=EMULATOR_FOLLOW,
        start_timeout=10.0,
        timeouts=Timeouts(connect=2.0, api=10.0, toolbox=WINDOW),
    )
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
    for run in (
        lambda: daytona.exec(handle, "echo", [big]),
        lambda: daytona.spawn(handle, "echo", [big]),
        lambda: daytona.exec(handle, "true", [], env={"BIG": big}),
    ):
        with pytest.raises(Invalid) as caught:
            run()
        kind, message = caught.value.detail
        assert kind == reasons.COMMAND_TOO_LARGE and str(COMMAND_LIMIT) in message
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


class _Toolbox:
    """Just the session calls an ExecPool makes."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

    def create_session(self, session_id: str) -> None:
        pass

    def delete_session(self, session_id: str, *, read_timeout: float | None = None) -> None:
        self.deleted.append(session_id)


def test_a_kept_exec_session_whose_record_echoes_too_much_is_dropped() -> None:
    toolbox = _Toolbox()
    pool = ExecPool(toolbox, "box", limit=4)  # type: ignore[arg-type]
    light, heavy = pool.acquire(new=True), pool.acquire(new=True)
    light.echoed, heavy.echoed = ECHO_BUDGET, ECHO_BUDGET + 1
    pool.release(light)
    pool.release(heavy)
    assert toolbox.deleted == [heavy.id]
    assert pool.acquire() is light


def test_a_session_listing_over_its_limit_is_truncated_not_transient(
    daytona: Daytona, handle: Handle, emulator: DaytonaEmulator
) -> None:
    emulator.faults.add("oversize", size=LISTING_LIMIT + 1, method="GET", path=r"/process/session$")
    with pytest.raises(Truncated) as caught:
        daytona.list_sessions(handle)
    assert caught.value.reason is reasons.Reason.LISTING_BYTES
    assert caught.value.detail == ("listing_bytes", LISTING_LIMIT)
    assert str(LISTING_LIMIT) in str(caught.value)
