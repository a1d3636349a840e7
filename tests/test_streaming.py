"""The shared streaming base: order, one terminal frame, stop, callbacks, back-pressure."""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from managoat_sandbox import reasons
from managoat_sandbox._streaming import Stream, new_ref
from managoat_sandbox.errors import CommandExited, Invalid, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stderr, Stdout
from managoat_sandbox.providers.local import Local
from managoat_sandbox.types import Command

from .conftest import wait_until


def test_refs_are_unique_within_the_process() -> None:
    refs = {new_ref() for _ in range(1000)}
    assert len(refs) == 1000


def test_owner_none_makes_a_queue_and_exposes_it() -> None:
    stream = Stream("r", None, label="t")
    assert isinstance(stream.frames, queue.Queue)
    assert stream.deliver(Stdout("r", b"a"))
    assert stream.frames.get_nowait() == Stdout("r", b"a")


def test_an_owner_that_is_neither_callable_nor_a_queue_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        Stream("r", 42, label="t")  # type: ignore[arg-type]


def test_a_pump_that_ends_without_exit_yields_closed_before_exit() -> None:
    frames: queue.Queue[Frame] = queue.Queue()
    stream = Stream("r", frames, label="t")
    stream.start(lambda s: s.stdout(b"partial") and None)
    assert frames.get(timeout=2) == Stdout("r", b"partial")
    assert frames.get(timeout=2) == Error("r", Unavailable(reasons.CLOSED_BEFORE_EXIT))
    stream.join(2)
    assert frames.empty()


def test_a_pump_that_raises_becomes_an_error_frame_with_a_taxonomy_reason() -> None:
    frames: queue.Queue[Frame] = queue.Queue()
    stream = Stream("r", frames, label="t")

    def pump(s: Stream) -> None:
        raise KeyError("broken parser")

    stream.start(pump)
    frame = frames.get(timeout=2)
    assert isinstance(frame, Error)
    assert isinstance(frame.reason, Unavailable)
    stream.join(2)
    assert frames.empty()


def test_nothing_follows_the_terminal_frame() -> None:
    got: list[Frame] = []
    stream = Stream("r", got.append, label="t")
    assert stream.exit(3)
    assert not stream.stdout(b"late")
    assert not stream.fail(Unavailable("x"))
    assert not stream.exit(0)
    assert got == [Exit("r", 3)]


def test_a_raising_callback_is_reported_through_threading_excepthook_and_delivery_goes_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Frame] = []
    reported: list[threading.ExceptHookArgs] = []

    def owner(frame: Frame) -> None:
        seen.append(frame)
        if isinstance(frame, Stdout):
            raise RuntimeError("owner bug")

    monkeypatch.setattr(threading, "excepthook", reported.append)
    stream = Stream("r", owner, label="t")
    stream.stdout(b"a")
    stream.exit(0)
    assert seen == [Stdout("r", b"a"), Exit("r", 0)]
    assert [(r.exc_type, str(r.exc_value)) for r in reported] == [(RuntimeError, "owner bug")]
    assert reported[0].thread is threading.current_thread()
    assert reported[0].exc_traceback is not None


def test_a_raising_callback_is_seen_on_stderr_without_any_logging_set_up() -> None:
    program = textwrap.dedent(
        """
        from managoat_sandbox._streaming import Stream

        def owner(frame):
            raise RuntimeError("owner bug")

        stream = Stream("r", owner, label="t")
        stream.stdout(b"a")
        stream.exit(0)
        print("delivered")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert done.stdout == "delivered\n"
    assert done.stderr.count("RuntimeError: owner bug") == 2
    assert "Exception in thread" in done.stderr


def test_stop_from_inside_the_callback_does_not_deadlock() -> None:
    got: list[Frame] = []
    holder: dict[str, Stream] = {}

    def owner(frame: Frame) -> None:
        got.append(frame)
        holder["s"].stop()

    stream = Stream("r", owner, label="t")
    holder["s"] = stream
    done = threading.Event()

    def pump(s: Stream) -> None:
        s.stdout(b"one")
        s.stdout(b"two")
        done.set()

    stream.start(pump)
    assert done.wait(2)
    stream.join(2)
    assert got == [Stdout("r", b"one")]


def test_stop_waits_for_a_delivery_in_flight_then_nothing_more_arrives() -> None:
    entered = threading.Event()
    release = threading.Event()
    got: list[Frame] = []

    def owner(frame: Frame) -> None:
        entered.set()
        release.wait(5)
        got.append(frame)

    stream = Stream("r", owner, label="t")

    def pump(s: Stream) -> None:
        s.stdout(b"a")
        s.stdout(b"b")
        s.exit(0)

    stream.start(pump)
    assert entered.wait(2)
    stopper = threading.Thread(target=stream.stop)
    stopper.start()
    assert wait_until(stream.stopped.is_set)
    assert stopper.is_alive(), "stop must wait for the delivery in flight"
    release.set()
    stopper.join(2)
    assert not stopper.is_alive()
    stream.join(2)
    assert got == [Stdout("r", b"a")]


def test_a_full_bounded_queue_blocks_the_reader_and_stop_interrupts_it() -> None:
    frames: queue.Queue[Frame] = queue.Queue(maxsize=1)
    stream = Stream("r", frames, label="t")
    blocked = threading.Event()

    def pump(s: Stream) -> None:
        s.stdout(b"1")
        blocked.set()
        s.stdout(b"2")
        s.exit(0)

    stream.start(pump)
    assert blocked.wait(2)
    stream.stop()
    stream.join(2)
    assert frames.get_nowait() == Stdout("r", b"1")
    assert frames.empty()


def test_on_stop_runs_once_to_interrupt_the_transport() -> None:
    calls: list[int] = []
    release = threading.Event()
    stream = Stream("r", None, label="t")

    def on_stop() -> None:
        calls.append(1)
        release.set()

    def pump(s: Stream) -> None:
        release.wait(5)

    stream.start(pump, on_stop=on_stop)
    stream.stop()
    stream.stop()
    stream.join(2)
    assert calls == [1]


def test_stdin_checks_follow_the_totality_rules() -> None:
    no_stdin = Stream("r", None, label="t", stdin=False)
    with pytest.raises(Invalid) as caught:
        no_stdin.check_writable()
    assert caught.value.detail == reasons.STDIN_NOT_OPEN
    live = Stream("r", None, label="t", stdin=True)
    live.check_writable()
    live.exit(0)
    with pytest.raises(CommandExited):
        live.check_writable()
    live.check_stdin()
    live.stop()
    with pytest.raises(CommandExited):
        live.check_stdin()


events = st.lists(
    st.one_of(
        st.tuples(st.just("out"), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("err"), st.binary(min_size=1, max_size=8)),
        st.tuples(st.just("exit"), st.integers(0, 255)),
        st.tuples(st.just("fail"), st.just(None)),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(script=events, racers=st.integers(0, 3), stop_at=st.one_of(st.none(), st.integers(0, 12)))
def test_random_scripts_and_races_yield_in_order_output_then_at_most_one_terminal(
    script: list[tuple[str, Any]], racers: int, stop_at: int | None
) -> None:
    """Property: whatever the pump does and whoever races it, the owner sees its
    output in order, then exactly one terminal frame (none if stopped first)."""
    got: list[Frame] = []
    lock = threading.Lock()

    def owner(frame: Frame) -> None:
        with lock:
            got.append(frame)

    stream = Stream("r", owner, label="t")
    sent: list[Frame] = []
    pumped = threading.Event()
    seen_at_stop: list[int] = []

    def pump(s: Stream) -> None:
        for index, (kind, value) in enumerate(script):
            if stop_at == index:
                s.stop()
                with lock:
                    seen_at_stop.append(len(got))
            if kind == "out" and s.stdout(value):
                sent.append(Stdout("r", value))
            elif kind == "err" and s.stderr(value):
                sent.append(Stderr("r", value))
            elif kind == "exit" and s.exit(value):
                sent.append(Exit("r", value))
            elif kind == "fail" and s.fail(Unavailable("x")):
                sent.append(Error("r", Unavailable("x")))
        pumped.set()

    racing = [threading.Thread(target=stream.exit, args=(200 + n,)) for n in range(racers)]
    stream.start(pump)
    for thread in racing:
        thread.start()
    for thread in racing:
        thread.join(2)
    assert pumped.wait(2)
    stream.join(2)
    terminals = [f for f in got if f.terminal]
    assert len(terminals) <= 1
    if seen_at_stop:
        assert len(got) == seen_at_stop[0], "nothing may be delivered after stop"
    else:
        assert len(terminals) == 1
    if terminals:
        assert got[-1] is terminals[0]
    outputs = [f for f in got if not f.terminal]
    assert outputs == [f for f in sent if not f.terminal]


def test_streaming_adapters_delegate_stdin_and_stop_to_their_own_end_only() -> None:
    local = Local()
    foreign = Command("local", "r", private=object())
    with pytest.raises(Invalid):
        local.write_stdin(foreign, b"x")
    with pytest.raises(Invalid):
        local.close_stdin(foreign)
    local.stop_command(foreign)
    with pytest.raises(TypeError):
        local.stop_command("not a command")  # type: ignore[arg-type]
