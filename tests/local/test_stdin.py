"""Local stdin: writes of any size arrive whole; stop_command never waits behind a blocked write."""

from __future__ import annotations

import threading

import pytest

from managoat_sandbox import Exit, Stdout, iter_frames
from managoat_sandbox.errors import CommandExited
from managoat_sandbox.providers.local import Local

from ..conftest import wait_until

#: Far more than a pipe holds (64 KiB), to a process that never reads.
PAYLOAD = b"x" * (8 * 1024 * 1024)
#: Seconds allowed for each step (a bound for a loaded machine, not an expected time).
STEP = 20.0


def test_stop_interrupts_a_blocked_write_which_raises_command_exited(local: Local) -> None:
    handle = local.create("stuck-writer")
    command = local.spawn(handle, "sleep", ["300"], stdin=True, detachable=True)
    outcome: list[BaseException | None] = []
    writing = threading.Event()
    done = threading.Event()

    def writer() -> None:
        writing.set()
        try:
            local.write_stdin(command, PAYLOAD)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    assert writing.wait(STEP)
    assert not done.wait(0.5), "the write should block: sleep never reads its stdin"
    stopped = threading.Event()
    stopper = threading.Thread(
        target=lambda: (local.stop_command(command), stopped.set()), daemon=True
    )
    stopper.start()
    assert stopped.wait(STEP), "stop_command waited behind the blocked write"
    assert done.wait(STEP), "the blocked write was not interrupted by the stop"
    assert len(outcome) == 1 and isinstance(outcome[0], CommandExited)
    assert local.list_sessions(handle), "stop_command must leave the session running"


def test_large_stdin_writes_arrive_whole_and_leave_the_agent_running(local: Local) -> None:
    """A write far larger than one socket read (and than one agent frame) reaches the
    process byte for byte; it used to crash the sandbox's agent (one request arriving over
    many reads) or fail outright (a request over the frame limit)."""
    handle = local.create("big-writer")
    data = bytes(range(256)) * (20 * 4096 + 3)
    command = local.spawn(handle, "wc", ["-c"], stdin=True)
    local.write_stdin(command, data)
    local.close_stdin(command)
    frames = list(iter_frames(command, timeout=STEP))
    assert (
        b"".join(f.data for f in frames if isinstance(f, Stdout)).strip() == str(len(data)).encode()
    )
    assert isinstance(frames[-1], Exit) and frames[-1].code == 0
    assert local.exec(handle, "true").exit_code == 0


def test_the_stdin_connection_closes_when_the_command_ends(local: Local) -> None:
    """A command's stdin has its own connection to the agent; once the command has
    ended it is closed (no socket is left to the garbage collector), and a write
    after that is CommandExited without opening another one, while closing stdin
    stays a no-op."""
    handle = local.create("stdin-ends")
    command = local.spawn(handle, "head", ["-c", "3"], stdin=True)
    local.write_stdin(command, b"ab")
    end = command.private
    assert end._channel is not None, "the write opened the connection (head waits for more)"
    local.write_stdin(command, b"c")
    frames = list(iter_frames(command, timeout=STEP))
    assert frames[-1] == Exit(command.ref, 0)
    assert b"".join(f.data for f in frames if isinstance(f, Stdout)) == b"abc"
    assert wait_until(lambda: end._channel is None, STEP)
    with pytest.raises(CommandExited):
        local.write_stdin(command, b"late")
    local.close_stdin(command)
    assert end._channel is None
    local.stop_command(command)


def test_a_write_the_command_takes_just_before_it_exits_is_not_reported_failed(
    local: Local,
) -> None:
    """The command reads what was written and exits at once, so its end races the
    answer to the write; closing the connection at the end must wait for that answer.
    Many commands at once make the race likely; every write must succeed."""
    handle = local.create("takes-and-exits")
    failures: list[BaseException] = []

    def one() -> None:
        command = local.spawn(handle, "head", ["-c", "3"], stdin=True)
        try:
            local.write_stdin(command, b"abc")
        except BaseException as error:
            failures.append(error)
        finally:
            list(iter_frames(command, timeout=STEP))
            local.stop_command(command)

    def many() -> None:
        for _ in range(60):
            one()

    workers = [threading.Thread(target=many) for _ in range(10)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(STEP * 5)
    assert not any(worker.is_alive() for worker in workers)
    assert failures == []
