"""A hostile command cannot exhaust its caller: unread output waits in the sandbox, and
``exec`` holds at most ``max_bytes`` of it, once.

A spawn whose frames are not read fills the queue made for it (bounded), then its
reader stops reading the agent, which stops reading the command's pipes: the command
blocks on write, and what it has written so far sits in its journal on the sandbox's
disk. Everything the commands here write stays inside the test's own temporary
directory (the sandbox root); nothing sleeps to win a race — "the command stays
blocked" is watched for a bounded window in which a broken bound would let a 200 MB
command finish many times over.
"""

from __future__ import annotations

import hashlib
import queue
import threading
import time
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import managoat_sandbox as sandbox
from managoat_sandbox import reasons
from managoat_sandbox._frame_queue import COMMAND_QUEUE_BYTES, FrameQueue
from managoat_sandbox.errors import Truncated
from managoat_sandbox.frames import Exit, Frame, Stdout
from managoat_sandbox.providers.local import Local
from managoat_sandbox.streaming import EXEC_MAX_BYTES
from managoat_sandbox.types import Command, Handle

from ..conftest import wait_until

MB = 1024 * 1024
#: The flood's block: a 4-byte counter repeated, so order and completeness are checkable.
BLOCK = 64 * 1024
#: What the caller may hold of an unread flood (its queue's bound and the buffers
#: between it and the agent), and how far the journal may get ahead of an unread
#: command: far below the flood, and a generous margin over what the design allows.
HELD_BOUND = 3 * COMMAND_QUEUE_BYTES
#: How long a blocked command is watched for not finishing: a flood that is not held up
#: goes to disk at hundreds of MB a second.
BLOCKED_WINDOW = 2.0


def flood(nbytes: int) -> tuple[str, list[str]]:
    """A command writing ``nbytes`` (a whole number of blocks) of the counting pattern to
    stdout, then creating ``done`` in its working directory."""
    script = (
        "import sys\n"
        "out = sys.stdout.buffer\n"
        f"for i in range({nbytes // BLOCK}):\n"
        f"    out.write(i.to_bytes(4, 'big') * {BLOCK // 4})\n"
        "out.flush()\n"
        "open('done', 'w').close()\n"
    )
    return "python3", ["-c", script]


def pattern_digest(nbytes: int) -> bytes:
    digest = hashlib.sha256()
    for i in range(nbytes // BLOCK):
        digest.update(i.to_bytes(4, "big") * (BLOCK // 4))
    return digest.digest()


def journal(root: Path, handle: Handle, command: Command) -> Path:
    assert command.session_id is not None
    return root / handle.name / "state" / "sessions" / command.session_id / "journal"


def journal_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def done(local: Local, handle: Handle) -> bool:
    return local.exec(handle, "test", ["-e", "done"]).exit_code == 0


@contextmanager
def traced() -> Iterator[list[int]]:
    """Trace this process's allocations in the block; the list gets the peak, in bytes."""
    peak: list[int] = []
    tracemalloc.start()
    try:
        yield peak
    finally:
        peak.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()


def drain(frames: queue.Queue[Frame], timeout: float = 60) -> tuple[int, bytes, list[Frame]]:
    """Read a command's frames to its terminal one: the stdout bytes' count and digest,
    and the terminal frames seen (with anything delivered after the first)."""
    digest = hashlib.sha256()
    received = 0
    terminals: list[Frame] = []
    for frame in sandbox.iter_frames(frames, timeout=timeout):
        if isinstance(frame, Stdout):
            digest.update(frame.data)
            received += len(frame.data)
        else:
            terminals.append(frame)
    return received, digest.digest(), terminals


def test_an_unread_spawn_holds_up_its_command_not_the_callers_memory(
    local: Local, root: Path
) -> None:
    nbytes = 200 * MB
    handle = local.create("flood")
    with traced() as peak:
        command = sandbox.spawn(handle, *flood(nbytes))
        path = journal(root, handle, command)
        assert wait_until(lambda: journal_size(path) >= COMMAND_QUEUE_BYTES, timeout=60)
        grew = wait_until(lambda: journal_size(path) > HELD_BOUND, timeout=BLOCKED_WINDOW)
        # The agent serves everyone else meanwhile.
        assert sandbox.exec(handle, "echo", ["others run"]).output == b"others run\n"
    assert not grew, f"the journal ran {journal_size(path)} bytes ahead of an unread caller"
    assert peak[0] < HELD_BOUND, f"the caller grew by {peak[0]} bytes for an unread spawn"
    assert not done(local, handle), "the command finished although nobody read it"
    assert isinstance(command.frames, queue.Queue)
    received, digest, terminals = drain(command.frames)
    command.private.stream.join(5)
    assert received == nbytes and digest == pattern_digest(nbytes), "bytes lost or reordered"
    assert terminals == [Exit(command.ref, 0)]
    assert command.frames.empty(), "a frame came after the terminal one"
    assert done(local, handle)


def test_stop_command_wakes_a_reader_blocked_on_a_full_queue_and_the_session_runs_free(
    local: Local, root: Path
) -> None:
    nbytes = 64 * MB
    handle = local.create("stopped")
    command = local.spawn(handle, *flood(nbytes))
    frames = command.frames
    assert isinstance(frames, FrameQueue)
    assert wait_until(lambda: frames.held >= COMMAND_QUEUE_BYTES, timeout=60)
    began = time.monotonic()
    local.stop_command(command)
    assert time.monotonic() - began < 2.0, "stop_command waited on the blocked reader"
    stream = command.private.stream
    stream.join(5)
    assert stream._thread is not None and not stream._thread.is_alive()
    held = frames.qsize()
    assert wait_until(lambda: done(local, handle), timeout=60), "a detached session stayed held"
    assert frames.qsize() == held, "a frame was delivered after stop_command returned"
    assert journal_size(journal(root, handle, command)) > nbytes


def test_an_attacher_that_reads_keeps_the_command_going_past_an_owner_that_does_not(
    local: Local,
) -> None:
    nbytes = 64 * MB
    handle = local.create("two")
    unread = local.spawn(handle, *flood(nbytes))
    assert unread.session_id is not None
    assert isinstance(unread.frames, FrameQueue)
    frames = unread.frames
    assert wait_until(lambda: frames.held >= COMMAND_QUEUE_BYTES, timeout=60)
    reader = local.attach(handle, unread.session_id)
    assert isinstance(reader.frames, queue.Queue)
    try:
        received, digest, terminals = drain(reader.frames)
        assert received == nbytes and digest == pattern_digest(nbytes)
        assert terminals == [Exit(reader.ref, 0)]
        assert frames.held < HELD_BOUND, "the owner that did not read was handed it all"
        received, digest, terminals = drain(frames)
        assert received == nbytes and digest == pattern_digest(nbytes)
        assert terminals == [Exit(unread.ref, 0)]
    finally:
        local.stop_command(unread)
        local.stop_command(reader)


def test_a_bounded_queue_of_the_callers_own_is_kept_as_given(local: Local) -> None:
    handle = local.create("own")
    frames: queue.Queue[Frame] = queue.Queue(maxsize=2)
    command = local.spawn(handle, *flood(16 * MB), owner=frames)
    try:
        assert command.frames is frames
        assert wait_until(frames.full, timeout=60)
        received, digest, terminals = drain(frames)
        assert received == 16 * MB and digest == pattern_digest(16 * MB)
        assert terminals == [Exit(command.ref, 0)]
    finally:
        local.stop_command(command)


def test_exec_past_max_bytes_is_truncated_and_its_endless_command_killed(local: Local) -> None:
    handle = local.create("endless")
    limit = 4 * MB
    with traced() as peak:
        try:
            local.exec(handle, "sh", ["-c", "echo $$ > pid; exec yes"], timeout=60, max_bytes=limit)
        except Truncated as error:
            assert error.detail == (reasons.MAX_BYTES, limit)
        else:
            raise AssertionError("an endless command's exec returned")
    assert peak[0] < 2 * limit, f"exec held {peak[0]} bytes for a {limit}-byte limit"
    pid = local.exec(handle, "cat", ["pid"]).output.strip().decode()

    def gone() -> bool:
        return local.exec(handle, "kill", ["-0", pid]).exit_code != 0

    assert wait_until(gone, timeout=10), "the command ran on after its exec was truncated"


def test_exec_holds_its_output_once_and_stops_at_64_mib_by_default(local: Local) -> None:
    nbytes = 96 * MB
    handle = local.create("once")
    with traced() as peak:
        result = local.exec(handle, *flood(nbytes), max_bytes=None)
        assert len(result.output) == nbytes
        del result
    assert peak[0] < 1.25 * nbytes, f"exec peaked at {peak[0] / nbytes:.2f}x its output"
    try:
        sandbox.exec(handle, *flood(nbytes))
    except Truncated as error:
        assert error.detail == (reasons.MAX_BYTES, EXEC_MAX_BYTES)
    else:
        raise AssertionError("exec held more than its default limit")
    both = sandbox.exec(handle, "sh", ["-c", "printf 12345; printf 67890 >&2"], max_bytes=10)
    assert (both.output, both.stderr) == (b"12345", b"67890")
    try:
        sandbox.exec(handle, "sh", ["-c", "printf 12345; printf 678901 >&2"], max_bytes=10)
    except Truncated:
        pass
    else:
        raise AssertionError("stderr was not counted against max_bytes")


def test_a_reader_blocked_on_a_full_queue_does_not_block_other_commands(local: Local) -> None:
    handle = local.create("many")
    unread = local.spawn(handle, *flood(32 * MB))
    try:
        frames = unread.frames
        assert isinstance(frames, FrameQueue)
        assert wait_until(lambda: frames.held >= COMMAND_QUEUE_BYTES, timeout=60)
        results: list[bytes] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(local.exec(handle, "echo", ["ok"]).output)
            )
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert results == [b"ok\n"] * 4
    finally:
        local.stop_command(unread)
