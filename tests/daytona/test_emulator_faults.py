"""The fault matrix, driven through the Daytona emulator: every fault yields the right
taxonomy error or a complete, exact stream, with exactly one terminal frame and no
reader thread left behind. A command's log is followed over the WebSocket and finished
from snapshots when a follow ends early, so the snapshot faults are served by making
the follows end early too."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from managoat_sandbox import NetworkPolicy, reasons
from managoat_sandbox.emulators.daytona import DaytonaEmulator
from managoat_sandbox.errors import Invalid, RateLimited, Truncated, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stdout
from managoat_sandbox.providers.daytona import Daytona
from managoat_sandbox.testing.mailbox import Mailbox, is_stdout, is_terminal
from managoat_sandbox.types import Command, Handle

from ..handshake import daytona_gate
from .emulated import KILL_SESSION_SHELL, emulated_adapter, serving

pytestmark = pytest.mark.timeout(60)

LINES = 30
#: Prints LINES numbered lines over about 0.6 s, then exits 0.
COUNTER = ("bash", ["-c", f"for i in $(seq 1 {LINES}); do echo line-$i; sleep 0.02; done"])
EXPECTED = b"".join(b"line-%d\n" % i for i in range(1, LINES + 1))
COMMAND_PATHS = r"/command/[^/]+(/logs)?$"


@pytest.fixture
def daytona(emulator: DaytonaEmulator) -> Iterator[Daytona]:
    with serving(emulator, page_size=2) as adapter:
        yield adapter


@pytest.fixture
def handle(daytona: Daytona, request: pytest.FixtureRequest) -> Handle:
    return daytona.create(f"fault-{request.node.name[:40].replace('[', '-').strip(']')}")


def follow_to_end(daytona: Daytona, command: Command, box: Mailbox) -> list[Frame]:
    """The command's frames, once its one terminal frame has come and stayed the last."""
    box.expect(is_terminal(command.ref), 15)
    box.refute(is_terminal(command.ref), 0.1)
    daytona.stop_command(command)
    frames = box.history(command.ref)
    assert [f for f in frames if f.terminal] == [frames[-1]], "exactly one terminal frame, last"
    return frames


def stdout_of(frames: list[Frame]) -> bytes:
    return b"".join(f.data for f in frames if isinstance(f, Stdout))


def spawn(
    daytona: Daytona, handle: Handle, cmd: tuple[str, list[str]] = COUNTER, **opts: Any
) -> tuple[Command, Mailbox]:
    box = Mailbox()
    return daytona.spawn(handle, cmd[0], cmd[1], owner=box, **opts), box


# -- the log stream ends without an exit ------------------------------------------------


def test_a_session_shell_killed_mid_command_is_closed_before_exit(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    gate = daytona_gate(emulator, handle.name)
    # The shell is killed only once "hi" has arrived.
    command, box = spawn(
        daytona, handle, ("bash", ["-c", gate.script("echo hi", KILL_SESSION_SHELL)])
    )
    box.expect(is_stdout(command.ref), 5)
    gate.release()
    frames = follow_to_end(daytona, command, box)
    assert stdout_of(frames) == b"hi\n"
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))


def test_a_command_the_daemon_lost_mid_stream_is_closed_before_exit(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    command, box = spawn(daytona, handle, ("bash", ["-c", "echo hi; sleep 30"]))
    box.expect(is_stdout(command.ref), 5)
    emulator.faults.add(
        "status",
        path=COMMAND_PATHS,
        status=404,
        times=10_000,
        body={"statusCode": 404, "message": "not found: command not found"},
    )
    frames = follow_to_end(daytona, command, box)
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))
    assert not any(isinstance(f, Exit) for f in frames)


def test_follows_that_keep_closing_early_are_finished_from_snapshots(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    early = emulator.faults.add("log_close_early", path=r"/logs$", size=5, times=100)
    command, box = spawn(daytona, handle)
    frames = follow_to_end(daytona, command, box)
    assert early.times < 100, "the follows were cut short"
    assert stdout_of(frames) == EXPECTED
    assert frames[-1] == Exit(command.ref, 0)


def test_a_follow_reset_mid_stream_is_ridden_out_exactly(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    command, box = spawn(daytona, handle)
    box.expect(is_stdout(command.ref), 5)
    emulator.reset_log_stream(after_bytes=7, times=2)
    emulator.cut_log_follows(reset=True)
    frames = follow_to_end(daytona, command, box)
    assert stdout_of(frames) == EXPECTED
    assert frames[-1] == Exit(command.ref, 0)


# -- re-reads and replays ------------------------------------------------------------------


def test_a_stale_prefix_replayed_mid_stream_delivers_no_byte_twice(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    early = emulator.faults.add("log_close_early", path=r"/logs$", size=20, times=100)
    stale = emulator.faults.add("log_stale_prefix", path=r"/logs$", size=20, times=4)
    command, box = spawn(daytona, handle)
    frames = follow_to_end(daytona, command, box)
    assert stale.times == 0 and early.times < 100, "the stale snapshots were served"
    assert stdout_of(frames) == EXPECTED
    assert frames[-1] == Exit(command.ref, 0)


def test_attach_replays_from_zero_despite_early_closes_and_stale_snapshots(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    command, box = spawn(daytona, handle)
    follow_to_end(daytona, command, box)
    (session,) = daytona.list_sessions(handle)
    emulator.faults.add("log_close_early", path=r"/logs$", size=11, times=100)
    stale = emulator.faults.add("log_stale_prefix", path=r"/logs$", size=11, times=3)
    replay = Mailbox()
    attached = daytona.attach(handle, session.id, owner=replay)
    frames = follow_to_end(daytona, attached, replay)
    assert stale.times == 0
    assert stdout_of(frames) == EXPECTED
    assert frames[-1] == Exit(attached.ref, 0)


# -- throttling, outages, dropped connections --------------------------------------------


def test_a_429_reports_the_throttler_delay(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    emulator.rate_limit(
        path=r"^/api/sandbox/[^/]+$", method="GET", throttler="authenticated", retry_after=7
    )
    with pytest.raises(RateLimited) as caught:
        daytona.get(handle)
    assert caught.value.retry_after == 7.0
    emulator.rate_limit(path=r"^/api/sandbox/[^/]+$", method="GET", plain=True, retry_after=3)
    with pytest.raises(RateLimited) as caught:
        daytona.get(handle)
    assert caught.value.retry_after == 3.0


@pytest.mark.parametrize("as_json", [True, False])
def test_a_503_is_unavailable_with_its_body(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, as_json: bool
) -> None:
    emulator.unavailable(as_json=as_json, path=r"^/api/sandbox/[^/]+$", method="GET")
    with pytest.raises(Unavailable) as caught:
        daytona.get(handle)
    kind, status, body = caught.value.detail
    assert (kind, status) == ("http", 503)
    assert isinstance(body, dict if as_json else str)


def test_a_dropped_connection_is_unavailable(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    emulator.drop_connections(path=r"^/api/sandbox/[^/]+$", method="GET")
    with pytest.raises(Unavailable) as caught:
        daytona.get(handle)
    assert caught.value.detail[0] == reasons.TRANSPORT


@pytest.mark.parametrize("fault", ["rate_limit", "json_503", "text_503", "drop"])
def test_a_stream_rides_out_transient_toolbox_faults_exactly(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, fault: str
) -> None:
    command, box = spawn(daytona, handle)
    box.expect(is_stdout(command.ref), 5)
    if fault == "rate_limit":
        emulator.rate_limit(path=COMMAND_PATHS, retry_after=1, times=2)
    elif fault == "drop":
        emulator.drop_connections(path=COMMAND_PATHS, times=3)
    else:
        emulator.unavailable(as_json=fault == "json_503", path=COMMAND_PATHS, times=3)
    frames = follow_to_end(daytona, command, box)
    assert stdout_of(frames) == EXPECTED
    assert frames[-1] == Exit(command.ref, 0)


def test_a_toolbox_down_past_the_budget_ends_the_stream_with_its_error(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    command, box = spawn(daytona, handle, ("bash", ["-c", "echo hi; sleep 30"]))
    box.expect(is_stdout(command.ref), 5)
    emulator.unavailable(as_json=False, path=r"^/toolbox/", times=10_000)
    emulator.cut_log_follows(reset=True)
    frames = follow_to_end(daytona, command, box)
    assert isinstance(frames[-1], Error)
    assert isinstance(frames[-1].reason, Unavailable)
    assert frames[-1].reason.detail[:2] == ("http", 503)


def test_a_sandbox_destroyed_under_a_command_ends_it_closed_before_exit(
    daytona: Daytona, handle: Handle
) -> None:
    command, box = spawn(daytona, handle, ("bash", ["-c", "echo hi; sleep 30"]))
    box.expect(is_stdout(command.ref), 5)
    daytona.destroy(handle)
    frames = follow_to_end(daytona, command, box)
    assert frames[-1] == Error(command.ref, Unavailable(reasons.CLOSED_BEFORE_EXIT))


# -- creation, transitions and the listing -------------------------------------------------


def test_create_adopts_a_sandbox_that_failed_to_start(
    daytona: Daytona, emulator: DaytonaEmulator
) -> None:
    emulator.fail_next_create("boot loop")
    handle = daytona.create("fault-failed-start")
    assert daytona.get(handle).status == "unknown"


def test_a_create_whose_answer_was_lost_is_adopted_on_retry(
    daytona: Daytona, emulator: DaytonaEmulator
) -> None:
    emulator.drop_next_create_response()
    with pytest.raises(Unavailable):
        daytona.create("fault-lost-answer")
    handle = daytona.create("fault-lost-answer")
    assert daytona.get(handle).status == "running"


def test_resume_during_a_transition_is_transient_then_succeeds(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    emulator.hold_transitions("stop")
    daytona.suspend(handle)
    assert daytona.get(handle).status == "suspended"
    with pytest.raises(Unavailable) as caught:
        daytona.resume(handle)
    assert caught.value.transient and caught.value.detail[:2] == ("http", 409)
    emulator.finish_transitions()
    assert daytona.get(daytona.resume(handle)).status == "running"


def test_the_listing_is_whole_while_it_changes_under_the_walk(
    daytona: Daytona, emulator: DaytonaEmulator
) -> None:
    names = [f"fault-list-{i}" for i in range(6)]
    for name in names:
        daytona.create(name)
    emulator.mutate_listing(
        after_page=1,
        ops=[("touch", names[0]), ("touch", names[5]), ("rename_to_destroyed", names[3])],
    )
    listed = daytona.list_all_names()
    assert set(names) - {names[3]} <= listed
    assert not any(name.startswith("DESTROYED_") for name in listed)
    walked = [r for r in emulator.requests if r.method == "GET" and r.path == "/api/sandbox"]
    assert len(walked) >= 3, "the walk spanned several pages"
    assert all(dict(r.query).get("sort") == "createdAt" for r in walked)


def test_a_listing_past_the_page_cap_is_truncated(
    daytona: Daytona, emulator: DaytonaEmulator
) -> None:
    for i in range(5):
        daytona.create(f"fault-cap-{i}")
    capped = emulated_adapter(page_size=1, max_pages=3)
    with pytest.raises(Truncated):
        capped.list_all_names()


def test_an_invalid_allowlist_never_reaches_the_emulator(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle
) -> None:
    emulator.clear_requests()
    with pytest.raises(Invalid):
        daytona.apply_network_policy(handle, NetworkPolicy(allow=["10.0.0.0/8"]))
    assert emulator.requests == []


# -- the exit code is the daemon's record ---------------------------------------------------


@pytest.mark.parametrize("exit_trap", [False, True], ids=["v0.190-daemon", "exit-trap-daemon"])
def test_the_daemon_records_the_real_exit_so_no_fallback_is_needed(
    daytona: Daytona, emulator: DaytonaEmulator, handle: Handle, exit_trap: bool
) -> None:
    emulator.daemon_exit_trap = exit_trap
    try:
        emulator.clear_requests()
        command, box = spawn(daytona, handle, ("bash", ["-c", "echo bye; exit 42"]))
        frames = follow_to_end(daytona, command, box)
        assert frames[-1] == Exit(command.ref, 42)
        assert stdout_of(frames) == b"bye\n"
        assert not [r for r in emulator.requests if r.path.endswith("/process/execute")], (
            "the exit came from the daemon's command record, not the shim's fallback"
        )
    finally:
        emulator.daemon_exit_trap = False
