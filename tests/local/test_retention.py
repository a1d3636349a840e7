"""What a local sandbox keeps of finished commands: nothing of an exec, and at most
``local.retained_sessions`` finished spawns taking at most ``local.retained_bytes``
together (the oldest end removed first, running sessions never); and what
``list_sessions`` says of a session's end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from managoat_sandbox import config
from managoat_sandbox.errors import Invalid, NotFound, Unavailable
from managoat_sandbox.frames import Exit
from managoat_sandbox.providers.local import Local
from managoat_sandbox.testing.mailbox import Mailbox, is_exit, is_stdout
from managoat_sandbox.types import Command, Handle

WAIT = 10.0
#: Where the local documentation states the settings' defaults.
DOCS = Path(__file__).resolve().parents[2] / "docs" / "local-sandbox.md"


def on_disk(root: Path, handle: Handle) -> set[str]:
    """The session directories in the sandbox's state."""
    return {entry.name for entry in (root / handle.name / "state" / "sessions").iterdir()}


def listed(local: Local, handle: Handle) -> set[str]:
    return {session.id for session in local.list_sessions(handle)}


def finish(local: Local, handle: Handle, text: str) -> str:
    """Spawn ``echo text``, wait for its exit, and return its session id."""
    box = Mailbox()
    command = local.spawn(handle, "echo", [text], owner=box)
    assert box.expect(is_exit(command.ref), WAIT) == Exit(command.ref, 0)
    assert command.session_id is not None
    return command.session_id


def stay(local: Local, handle: Handle, box: Mailbox) -> Command:
    """A session that runs until its stdin ends (it says ``ready`` first)."""
    command = local.spawn(handle, "bash", ["-c", "echo ready; exec cat"], owner=box, stdin=True)
    box.expect(is_stdout(command.ref), WAIT)
    return command


def test_execs_leave_no_session_and_no_file(local: Local, root: Path) -> None:
    handle = local.create("execs")
    for n in range(100):
        assert local.exec(handle, "echo", [str(n)]).output == f"{n}\n".encode()
    with pytest.raises(Unavailable):
        local.exec(handle, "sleep", ["30"], timeout=0.2)
    assert local.list_sessions(handle) == []
    assert on_disk(root, handle) == set()


def test_only_the_newest_finished_sessions_within_the_bound_remain(
    local: Local, root: Path
) -> None:
    config.configure("local", retained_sessions=3)
    handle = local.create("bounded")
    ids = [finish(local, handle, f"run-{n}") for n in range(7)]
    assert listed(local, handle) == set(ids[-3:])
    assert on_disk(root, handle) == set(ids[-3:])
    for removed in ids[:-3]:
        with pytest.raises(NotFound):
            local.attach(handle, removed)
    replay = Mailbox()
    kept = local.attach(handle, ids[-1], owner=replay)
    assert replay.expect(is_exit(kept.ref), WAIT) == Exit(kept.ref, 0)


def test_running_sessions_are_never_removed_and_count_once_finished(
    local: Local, root: Path
) -> None:
    config.configure("local", retained_sessions=1)
    handle = local.create("running")
    box = Mailbox()
    running = [stay(local, handle, box) for _ in range(3)]
    finished = [finish(local, handle, f"run-{n}") for n in range(3)]
    running_ids = {command.session_id for command in running}
    assert listed(local, handle) == {*running_ids, finished[-1]}
    assert on_disk(root, handle) == {*running_ids, finished[-1]}
    for command in running:
        local.close_stdin(command)
        assert box.expect(is_exit(command.ref), WAIT) == Exit(command.ref, 0)
    assert listed(local, handle) == {running[-1].session_id}
    assert on_disk(root, handle) == {running[-1].session_id}


def test_the_session_that_finished_longest_ago_goes_first_not_the_oldest_started(
    local: Local,
) -> None:
    config.configure("local", retained_sessions=1)
    handle = local.create("order")
    box = Mailbox()
    early = stay(local, handle, box)
    later = finish(local, handle, "later")
    local.close_stdin(early)
    box.expect(is_exit(early.ref), WAIT)
    assert listed(local, handle) == {early.session_id}
    with pytest.raises(NotFound):
        local.attach(handle, later)


def test_a_bound_of_zero_keeps_nothing_yet_the_spawner_gets_everything(
    local: Local, root: Path
) -> None:
    config.configure("local", retained_sessions=0)
    handle = local.create("none")
    box = Mailbox()
    command = local.spawn(handle, "bash", ["-c", "seq 1 20000"], owner=box)
    assert box.expect(is_exit(command.ref), WAIT) == Exit(command.ref, 0)
    expected = "".join(f"{n}\n" for n in range(1, 20001)).encode()
    assert b"".join(getattr(f, "data", b"") for f in box.history(command.ref)) == expected
    assert local.list_sessions(handle) == []
    assert on_disk(root, handle) == set()


def test_the_bound_applies_from_the_next_spawn(local: Local) -> None:
    handle = local.create("changed")
    ids = [finish(local, handle, f"run-{n}") for n in range(4)]
    assert listed(local, handle) == set(ids)
    config.configure("local", retained_sessions=2)
    newest = finish(local, handle, "newest")
    assert listed(local, handle) == {ids[-1], newest}


def test_the_default_bound_is_documented_as_100() -> None:
    assert config.get("local", "retained_sessions") == 100


@pytest.mark.parametrize("bad", [-1, "3", 2.5, True, 2**31, [[[3]]]])
def test_a_bad_bound_is_refused_where_it_is_configured_naming_the_setting(bad: Any) -> None:
    with pytest.raises(Invalid, match=r"local\.retained_sessions") as caught:
        config.configure("local", retained_sessions=bad)
    assert caught.value.detail == ("config", "local", "retained_sessions")
    assert config.get("local", "retained_sessions") == 100


def session_bytes(root: Path, handle: Handle, sid: str) -> int:
    """What the files of session ``sid`` take on disk (apparent sizes)."""
    directory = root / handle.name / "state" / "sessions" / sid
    return sum(path.stat().st_size for path in directory.iterdir())


def finish_big(local: Local, handle: Handle) -> str:
    """Spawn a command writing 64 KiB, wait for its exit, and return its session id."""
    box = Mailbox()
    command = local.spawn(handle, "head", ["-c", "65536", "/dev/zero"], owner=box)
    assert box.expect(is_exit(command.ref), WAIT) == Exit(command.ref, 0)
    assert command.session_id is not None
    return command.session_id


def test_finished_sessions_beyond_the_byte_bound_go_oldest_end_first(
    local: Local, root: Path
) -> None:
    handle = local.create("bytes")
    first = finish_big(local, handle)
    size = session_bytes(root, handle, first)
    assert size > 65536
    config.configure("local", retained_bytes=2 * size + size // 2)
    second = finish_big(local, handle)
    assert on_disk(root, handle) == {first, second}
    third = finish_big(local, handle)
    assert listed(local, handle) == {second, third}
    assert on_disk(root, handle) == {second, third}
    with pytest.raises(NotFound):
        local.attach(handle, first)


def test_the_byte_bound_never_removes_a_running_session_nor_counts_it(
    local: Local, root: Path
) -> None:
    config.configure("local", retained_bytes=0)
    handle = local.create("bytes-running")
    box = Mailbox()
    running = stay(local, handle, box)
    local.write_stdin(running, b"x" * 65536 + b"\n")
    finished = finish(local, handle, "gone at once")
    assert listed(local, handle) == {running.session_id}
    assert on_disk(root, handle) == {running.session_id}
    with pytest.raises(NotFound):
        local.attach(handle, finished)
    local.close_stdin(running)
    assert box.expect(is_exit(running.ref), WAIT) == Exit(running.ref, 0)
    assert on_disk(root, handle) == set()


def test_the_count_and_the_byte_bounds_both_hold(local: Local, root: Path) -> None:
    config.configure("local", retained_sessions=2, retained_bytes=2**40)
    handle = local.create("both")
    ids = [finish(local, handle, f"run-{n}") for n in range(3)]
    assert on_disk(root, handle) == set(ids[-2:])


def test_the_default_byte_bound_is_256_mib_as_documented() -> None:
    assert config.get("local", "retained_bytes") == 256 * 1024 * 1024
    assert "`local.retained_bytes`" in DOCS.read_text() and "256 MiB" in DOCS.read_text()


@pytest.mark.parametrize("bad", [-1, "3", 2.5, True, 2**63, [[[3]]]])
def test_a_bad_byte_bound_is_refused_where_it_is_configured_naming_the_setting(bad: Any) -> None:
    with pytest.raises(Invalid, match=r"local\.retained_bytes") as caught:
        config.configure("local", retained_bytes=bad)
    assert caught.value.detail == ("config", "local", "retained_bytes")
    assert config.get("local", "retained_bytes") == 256 * 1024 * 1024


def test_list_sessions_says_which_sessions_ended_and_with_which_code(local: Local) -> None:
    handle = local.create("ends")
    box = Mailbox()
    failed = local.spawn(handle, "sh", ["-c", "exit 3"], owner=box)
    assert box.expect(is_exit(failed.ref), WAIT) == Exit(failed.ref, 3)
    running = stay(local, handle, box)
    sessions = {session.id: session for session in local.list_sessions(handle)}
    assert (sessions[failed.session_id].ended, sessions[failed.session_id].exit_code) == (True, 3)
    assert (sessions[running.session_id].ended, sessions[running.session_id].exit_code) == (
        False,
        None,
    )


def test_a_spawn_stop_command_left_running_lists_as_running_until_terminated(
    local: Local,
) -> None:
    """``stop_command`` detaches a local spawn (detachable or not) and leaves its process
    running: ``list_sessions`` says so, and says how it ended once terminated."""
    handle = local.create("stopped")
    box = Mailbox()
    command = stay(local, handle, box)
    assert command.session_id is not None
    local.stop_command(command)
    [session] = local.list_sessions(handle)
    assert (session.id, session.ended, session.exit_code) == (command.session_id, False, None)
    local.terminate_session(handle, command.session_id)
    [session] = local.list_sessions(handle)
    assert (session.ended, session.exit_code) == (True, 128 + 15)
