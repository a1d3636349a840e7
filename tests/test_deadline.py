"""The monotonic exec deadline and the exec collector (docs/protocols/contract.md#exec-deadline)."""

from __future__ import annotations

import math
import pickle
import queue
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest

from managoat_sandbox import reasons
from managoat_sandbox._collect import ExecOutput, ExecSink, collect_exec, collect_here
from managoat_sandbox._deadline import Deadline
from managoat_sandbox._streaming import Stream
from managoat_sandbox.errors import DeadlineExpired, Invalid, Truncated, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stderr, Stdout, iter_frames
from managoat_sandbox.types import Command


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_finite_deadline_counts_down_and_names_its_timeout() -> None:
    clock = FakeClock()
    deadline = Deadline(0.1, clock=clock)
    assert deadline.remaining() == pytest.approx(0.1)
    deadline.check()
    clock.now += 0.04
    assert deadline.remaining() == pytest.approx(0.06)
    assert deadline.error() == Unavailable((reasons.EXEC_TIMEOUT, 0.1))


def test_zero_and_expired_deadlines_have_nothing_left() -> None:
    assert Deadline(0).remaining() == 0
    clock = FakeClock()
    deadline = Deadline(0.01, clock=clock)
    clock.now += 0.011
    assert deadline.remaining() == 0
    with pytest.raises(Unavailable) as caught:
        deadline.check()
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.01)


def test_no_timeout_never_expires() -> None:
    deadline = Deadline(None)
    assert deadline.remaining() is None
    deadline.check()


def test_clamp_cuts_a_limit_to_what_is_left() -> None:
    clock = FakeClock()
    deadline = Deadline(1.0, clock=clock)
    assert deadline.clamp(5.0) == pytest.approx(1.0)
    assert deadline.clamp(0.25) == 0.25
    assert deadline.clamp() == pytest.approx(1.0)
    clock.now += 0.9
    assert deadline.clamp(5.0) == pytest.approx(0.1)


def test_clamp_without_a_deadline_keeps_the_limit() -> None:
    deadline = Deadline(None)
    assert deadline.clamp(3.0) == 3.0
    assert deadline.clamp() is None


def test_clamp_raises_the_deadline_error_once_nothing_is_left() -> None:
    clock = FakeClock()
    deadline = Deadline(0.5, clock=clock)
    clock.now += 0.5
    assert deadline.expired()
    with pytest.raises(DeadlineExpired) as caught:
        deadline.clamp(10.0)
    assert caught.value == deadline.error()
    with pytest.raises(DeadlineExpired):
        deadline.clamp()


def test_expired_is_false_until_the_time_is_spent_and_never_without_a_deadline() -> None:
    clock = FakeClock()
    deadline = Deadline(0.2, clock=clock)
    assert not deadline.expired()
    clock.now += 0.3
    assert deadline.expired()
    assert not Deadline(None).expired()


def test_a_deadline_with_a_reason_expires_with_that_reason_and_never_as_exec() -> None:
    clock = FakeClock()
    deadline = Deadline(2.0, reason=reasons.timed_out("create"), clock=clock)
    clock.now += 2.0
    for expire in (deadline.check, deadline.clamp):
        with pytest.raises(DeadlineExpired) as caught:
            expire()
        assert caught.value.detail == "create_timeout"
        assert reasons.reason_of(caught.value) != reasons.EXEC_TIMEOUT


def test_a_deadline_error_is_a_deadline_expired_unavailable() -> None:
    for deadline in (Deadline(0), Deadline(0, reason=reasons.TIMEOUT)):
        error = deadline.error()
        assert isinstance(error, DeadlineExpired) and isinstance(error, Unavailable)


class Starter:
    """A start function whose 'command' plays frames from a script on a thread."""

    def __init__(self, script: Callable[[queue.SimpleQueue[Any], str], None]) -> None:
        self.script = script
        self.started = 0
        self.stopped: list[Command] = []
        self.threads: list[threading.Thread] = []

    def start(self, owner: queue.SimpleQueue[Any]) -> Command:
        self.started += 1
        thread = threading.Thread(target=self.script, args=(owner, "r"), daemon=True)
        thread.start()
        self.threads.append(thread)
        return Command("test", "r")

    def stop(self, command: Command) -> None:
        self.stopped.append(command)


def frames_every(frames: list[Frame], interval: float) -> Callable[..., None]:
    def play(owner: queue.SimpleQueue[Any], ref: str) -> None:
        pause = threading.Event()
        for frame in frames:
            pause.wait(interval)
            owner.put(frame)

    return play


@pytest.mark.parametrize("stream,merge", [(Stdout, False), (Stderr, False), (Stderr, True)])
def test_output_cannot_renew_the_deadline(stream: type[Stdout] | type[Stderr], merge: bool) -> None:
    script = [stream("r", b"x") for _ in range(12)] + [Exit("r", 0)]
    starter = Starter(frames_every(script, 0.01))
    with pytest.raises(Unavailable) as caught:
        collect_exec(starter.start, starter.stop, deadline=Deadline(0.04), stderr_to_stdout=merge)
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.04)
    assert len(starter.stopped) == 1


def test_output_is_collected_as_it_is_delivered_never_queued() -> None:
    """No frame waits for the collector (nothing queued can outrun the deadline): each
    output frame is in the result the moment its ``put`` returns."""
    collected: list[int] = []

    def start(owner: ExecSink) -> Command:
        for _ in range(10):
            owner.put(Stdout("r", b"x"))
            collected.append(owner.output.size)
        owner.put(Exit("r", 0))
        return Command("test", "r")

    stopped: list[Command] = []
    result = collect_exec(start, stopped.append, deadline=Deadline(1.0))
    assert collected == list(range(1, 11))
    assert result == (b"x" * 10, 0)
    assert stopped == [Command("test", "r")]


def test_queued_success_after_startup_used_the_deadline_is_refused() -> None:
    def slow_start_then_success(owner: queue.SimpleQueue[Any], ref: str) -> None:
        owner.put(Stdout(ref, b"out"))
        owner.put(Exit(ref, 0))

    starter = Starter(slow_start_then_success)
    clock = FakeClock()

    def start(owner: queue.SimpleQueue[Any]) -> Command:
        clock.now += 0.02  # the start outlives the whole budget
        command = starter.start(owner)
        starter.threads[-1].join()
        return command

    with pytest.raises(Unavailable) as caught:
        collect_exec(start, starter.stop, deadline=Deadline(0.001, clock=clock))
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0.001)


def test_the_deadline_is_rechecked_after_the_terminal_success() -> None:
    checks = {"n": 0}

    class FailsOnSecondCheck(Deadline):
        def check(self) -> None:
            checks["n"] += 1
            if checks["n"] > 1:
                raise self.error()

    starter = Starter(frames_every([Stdout("r", b"x"), Exit("r", 0)], 0))
    with pytest.raises(Unavailable) as caught:
        collect_exec(starter.start, starter.stop, deadline=FailsOnSecondCheck(1.0))
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 1.0)
    assert checks["n"] == 2


def test_zero_timeout_does_not_dispatch() -> None:
    starter = Starter(frames_every([Exit("r", 0)], 0))
    with pytest.raises(Unavailable) as caught:
        collect_exec(starter.start, starter.stop, deadline=Deadline(0))
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0)
    assert starter.started == 0


@pytest.mark.parametrize("timeout", [1.0, None])
def test_timely_success_is_collected_with_merged_stderr(timeout: float | None) -> None:
    script = [Stdout("r", b"out"), Stderr("r", b"err"), Exit("r", 3)]
    starter = Starter(frames_every(script, 0))
    result = collect_exec(
        starter.start, starter.stop, deadline=Deadline(timeout), stderr_to_stdout=True
    )
    assert result == (b"outerr", 3)


def test_unmerged_stderr_is_dropped() -> None:
    starter = Starter(frames_every([Stdout("r", b"out"), Stderr("r", b"err"), Exit("r", 0)], 0))
    assert collect_exec(starter.start, starter.stop, deadline=Deadline(None)).output == b"out"


def test_an_error_frame_is_raised_and_partial_output_discarded() -> None:
    reason = Unavailable(reasons.CLOSED_BEFORE_EXIT)
    starter = Starter(frames_every([Stdout("r", b"partial"), Error("r", reason)], 0))
    with pytest.raises(Unavailable) as caught:
        collect_exec(starter.start, starter.stop, deadline=Deadline(None))
    assert caught.value == reason
    assert starter.stopped


def test_a_silent_command_times_out_on_the_deadline() -> None:
    starter = Starter(frames_every([], 0))
    began = time.monotonic()
    with pytest.raises(Unavailable):
        collect_exec(starter.start, starter.stop, deadline=Deadline(0.05))
    assert time.monotonic() - began < 2.0


def test_exec_output_counts_both_streams_against_max_bytes() -> None:
    output = ExecOutput(10)
    output.add(b"12345")
    output.add(b"67890", stderr=True)
    assert output.result(0) == (b"12345", 0) and output.result(0).stderr == b"67890"
    output = ExecOutput(10, stderr_to_stdout=True)
    output.add(b"12345", stderr=True)
    with pytest.raises(Truncated) as caught:
        output.add(b"678901")
    assert caught.value.detail == (reasons.MAX_BYTES, 10)
    assert ExecOutput(None).result(3) == (b"", 3)


def test_exec_output_holds_each_byte_once() -> None:
    piece = b"x" * (64 * 1024)
    total = 64 * 1024 * 1024
    tracemalloc.start()
    try:
        output = ExecOutput(None)
        for _ in range(total // len(piece)):
            output.add(piece)
        result = output.result(0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(result.output) == total
    assert peak < 1.25 * total, f"collecting peaked at {peak / total:.2f}x the output"


def test_output_past_max_bytes_ends_an_endless_command_kills_then_stops_it() -> None:
    calls: list[str] = []
    streams: list[Stream] = []

    def endless(stream: Stream) -> None:
        while not stream.stopped.is_set():
            stream.stdout(b"y\n" * 512)

    def start(owner: ExecSink) -> Command:
        stream = Stream("r", owner, label="test")
        streams.append(stream)
        stream.start(endless)
        return Command("test", "r", private=stream)

    def stop(command: Command) -> None:
        calls.append("stop")
        command.private.stop()

    with pytest.raises(Truncated) as caught:
        collect_exec(
            start,
            stop,
            deadline=Deadline(30),
            max_bytes=4096,
            kill=lambda command: calls.append("kill"),
        )
    assert caught.value.detail == (reasons.MAX_BYTES, 4096)
    assert calls == ["kill", "stop"]
    streams[0].join(5)
    assert streams[0].finished.is_set(), "the pump went on past the limit"


def test_a_deadline_or_an_error_never_kills() -> None:
    killed: list[Command] = []
    starter = Starter(frames_every([Stdout("r", b"x"), Error("r", Unavailable("drop"))], 0))
    with pytest.raises(Unavailable):
        collect_exec(starter.start, starter.stop, deadline=Deadline(5), kill=killed.append)
    starter = Starter(frames_every([], 0))
    with pytest.raises(Unavailable):
        collect_exec(starter.start, starter.stop, deadline=Deadline(0.05), kill=killed.append)
    assert killed == []


# -- one type for every expiry, and the timeouts that are refused --------------------------


def test_deadline_expired_is_a_timeout_error_and_an_unavailable_that_pickles() -> None:
    error = DeadlineExpired((reasons.EXEC_TIMEOUT, 0.5), retry_after=2.0)
    error.with_context(status=504, request_id="req-1")
    assert isinstance(error, TimeoutError) and isinstance(error, Unavailable)
    assert error.taxonomy() is Unavailable and error.transient
    assert error == Unavailable((reasons.EXEC_TIMEOUT, 0.5))
    assert hash(error) == hash(Unavailable((reasons.EXEC_TIMEOUT, 0.5)))
    assert (error.errno, error.strerror, error.filename) == (None, None, None)
    assert str(error) == "('exec_timeout', 0.5)"
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is DeadlineExpired
    assert (copy.detail, copy.retry_after, copy.status, copy.request_id) == (
        (reasons.EXEC_TIMEOUT, 0.5),
        2.0,
        504,
        "req-1",
    )
    for handler in (TimeoutError, Unavailable, DeadlineExpired):
        try:
            raise DeadlineExpired(reasons.TIMEOUT)
        except handler as caught:
            assert caught.detail == reasons.TIMEOUT


@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan"), -math.inf, 10**400])
def test_a_deadline_refuses_a_negative_or_nan_timeout_naming_the_range(timeout: float) -> None:
    with pytest.raises(Invalid) as caught:
        Deadline(timeout)
    assert caught.value.detail[0] == "timeout"
    assert "from 0 to 9223372036, or None or inf for no limit" in str(caught.value)


def test_an_infinite_deadline_never_expires_and_zero_is_already_expired() -> None:
    assert Deadline(math.inf).remaining() is None
    with pytest.raises(DeadlineExpired) as caught:
        Deadline(0).check()
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0)


class CountingQueue:
    """A queue that holds ``frames`` and counts the waits asked of it."""

    def __init__(self, *frames: Frame) -> None:
        self.frames: queue.Queue[Frame] = queue.Queue()
        for frame in frames:
            self.frames.put(frame)
        self.waits: list[float | None] = []

    def get(self, block: bool = True, timeout: float | None = None) -> Frame:
        self.waits.append(timeout)
        return self.frames.get(block, timeout)


@pytest.mark.parametrize("timeout", [0, 0.0])
def test_iter_frames_expiry_is_deadline_expired_naming_the_frame_wait(timeout: float) -> None:
    source = CountingQueue(Stdout("a", b"x"))
    frames = iter_frames(source, timeout=timeout)
    assert next(frames) == Stdout("a", b"x")
    with pytest.raises(TimeoutError) as caught:
        next(frames)
    assert type(caught.value) is DeadlineExpired
    assert caught.value.detail == (reasons.FRAME_TIMEOUT, timeout)
    assert caught.value == Unavailable((reasons.FRAME_TIMEOUT, timeout))
    assert source.waits == [0.0, 0.0]


@pytest.mark.parametrize("timeout", [-1, -0.5, float("nan"), -math.inf])
def test_iter_frames_refuses_a_negative_or_nan_timeout_before_reading(timeout: float) -> None:
    source = CountingQueue(Exit("a", 0))
    with pytest.raises(Invalid) as caught:
        iter_frames(source, timeout=timeout)
    assert caught.value.detail[0] == "timeout"
    assert "from 0 to 9223372036" in str(caught.value)
    assert source.waits == []


def test_iter_frames_with_no_limit_waits_unbounded_up_to_the_terminal_frame() -> None:
    for timeout in (None, math.inf):
        source = CountingQueue(Stdout("a", b"x"), Exit("a", 0), Stdout("a", b"never"))
        assert list(iter_frames(source, timeout=timeout)) == [Stdout("a", b"x"), Exit("a", 0)]
        assert source.waits == [None, None]


# -- collect_here: a command read to its end in the calling thread ------------------------


def _played(frames: list[Frame], ran: object = "pid") -> Callable[[ExecSink], object]:
    """A ``run`` that delivers ``frames`` to its sink, as far as the sink takes them."""

    def run(owner: ExecSink) -> object:
        for frame in frames:
            try:
                owner.put(frame)
            except Truncated:
                break
        return ran

    return run


def test_collect_here_collects_what_the_read_delivered() -> None:
    run = _played([Stdout("r", b"out"), Stderr("r", b"err"), Exit("r", 3)])
    assert collect_here(run, deadline=Deadline(1.0)) == (b"out", 3)
    merged = collect_here(run, deadline=Deadline(None), stderr_to_stdout=True)
    assert (merged, merged.stderr) == ((b"outerr", 3), b"")


def test_collect_here_checks_the_deadline_before_and_after_the_read() -> None:
    ran: list[object] = []
    with pytest.raises(Unavailable) as caught:
        collect_here(ran.append, deadline=Deadline(0))
    assert caught.value.detail == (reasons.EXEC_TIMEOUT, 0) and ran == []
    clock = FakeClock()

    def slow(owner: ExecSink) -> None:
        clock.now += 0.02  # the read outlives the whole budget, then succeeds
        owner.put(Exit("r", 0))

    with pytest.raises(Unavailable) as late:
        collect_here(slow, deadline=Deadline(0.001, clock=clock))
    assert late.value.detail == (reasons.EXEC_TIMEOUT, 0.001)


def test_collect_here_raises_an_error_frame_and_a_read_without_terminal() -> None:
    reason = Unavailable(reasons.CLOSED_BEFORE_EXIT)
    with pytest.raises(Unavailable) as caught:
        collect_here(
            _played([Stdout("r", b"partial"), Error("r", reason)]), deadline=Deadline(None)
        )
    assert caught.value == reason
    with pytest.raises(Unavailable) as nothing:
        collect_here(_played([Stdout("r", b"partial")]), deadline=Deadline(None))
    assert nothing.value.detail == reasons.CLOSED_BEFORE_EXIT


def test_collect_here_kills_what_it_ran_once_the_output_passes_max_bytes() -> None:
    killed: list[object] = []
    run = _played([Stdout("r", b"x" * 6), Stdout("r", b"y" * 6), Exit("r", 0)], ran=42)
    with pytest.raises(Truncated) as caught:
        collect_here(run, deadline=Deadline(None), max_bytes=10, kill=killed.append)
    assert caught.value.detail == (reasons.MAX_BYTES, 10) and killed == [42]
