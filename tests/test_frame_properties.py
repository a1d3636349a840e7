"""Properties of the frame contract with random stop timings and fault points.

The contract: docs/protocols/contract.md#frames-and-streaming.

``test_fake.py`` checks that spawn, an attach replay and exec agree with a
model of a random script, and ``test_streaming.py`` races a bare ``Stream``.
This file drives the Fake adapter through what those leave out, over random
scripts (stdout, stderr, sleeps, then an exit code, a drop or nothing):

* ``stop_command`` after a random number of delivered frames, issued from
  inside the owner callback and from another thread: what was delivered is a
  prefix of the script's frames, in order, and nothing follows the stop;
* an attach at one random point while the original is stopped at another:
  the attacher gets the whole stream (no byte lost or doubled at the seam
  between replay and live tail) and exactly one terminal frame;
* an owner callback raising on random frames: every frame still arrives;
* ``fail_next`` faults before random calls in a random sequence of spawn,
  attach and exec: exactly the faulted call fails, with the injected error,
  delivering nothing, and every other call answers as the model says.

Without a stop there is exactly one terminal frame, last; an ``Exit`` carries
the scripted code; a dropped transport ends in
``Error(closed_before_exit)``, never an ``Exit``. "Nothing after the stop"
is checked once the command's reader thread has ended (nothing can deliver
after that), not by waiting a while.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from managoat_sandbox import reasons
from managoat_sandbox.errors import Denied, NotFound, RateLimited, SandboxError, Unavailable
from managoat_sandbox.frames import Error, Exit, Frame, Stderr, Stdout
from managoat_sandbox.testing import Fake
from managoat_sandbox.types import Command, ExecResult

pytestmark = pytest.mark.timeout(60)

WAIT = 5.0
PROPERTY = settings(max_examples=40, deadline=None)


@dataclass(frozen=True)
class Script:
    """A Fake script as data: its steps and its end (``exit``, ``drop`` or none = exit 0)."""

    steps: tuple[tuple[str, str], ...]
    end: tuple[str, int]

    @property
    def args(self) -> list[str]:
        ends = {"exit": [f"exit:{self.end[1]}"], "drop": ["drop"], "none": []}
        return [f"{kind}:{value}" for kind, value in self.steps] + ends[self.end[0]]

    def frames(self, ref: Hashable) -> list[Frame]:
        """Every frame the script must deliver, in order, ending in its one terminal frame."""
        frames: list[Frame] = [
            Stdout(ref, value.encode()) if kind == "out" else Stderr(ref, value.encode())
            for kind, value in self.steps
            if kind != "sleep"
        ]
        if self.end[0] == "drop":
            frames.append(Error(ref, Unavailable(reasons.CLOSED_BEFORE_EXIT)))
        else:
            frames.append(Exit(ref, self.end[1]))
        return frames

    def exec_result(self) -> ExecResult | SandboxError:
        """What ``exec`` must answer (stdout only)."""
        if self.end[0] == "drop":
            return Unavailable(reasons.CLOSED_BEFORE_EXIT)
        output = b"".join(value.encode() for kind, value in self.steps if kind == "out")
        return ExecResult(output, self.end[1])


scripts = st.builds(
    lambda steps, end: Script(tuple(steps), end),
    st.lists(
        st.one_of(
            st.tuples(st.just("out"), st.text("abc", min_size=1, max_size=4)),
            st.tuples(st.just("err"), st.text("xyz", min_size=1, max_size=4)),
            st.tuples(st.just("sleep"), st.sampled_from(("0", "0.001", "0.003"))),
        ),
        max_size=8,
    ),
    st.one_of(
        st.tuples(st.just("exit"), st.integers(0, 255)),
        st.just(("drop", 0)),
        st.just(("none", 0)),
    ),
)
#: Frame counts at which something happens (a script delivers at most 9 frames).
points = st.integers(0, 10)


class Recorder:
    """Owner callback: records frames; may stop its command on the k-th frame, or raise.

    Frames may reach the callback before ``spawn`` returns, so the command is
    handed over with :meth:`ready`; a stop from inside waits (bounded) for it.
    """

    def __init__(
        self, fake: Fake, *, stop_at: int | None = None, raise_on: frozenset[int] = frozenset()
    ) -> None:
        self.at_stop: int | None = None
        self._fake = fake
        self._stop_at = stop_at
        self._raise_on = raise_on
        self._frames: list[Frame] = []
        self._changed = threading.Condition()
        self._command: Command | None = None
        self._ready = threading.Event()

    def ready(self, command: Command) -> None:
        self._command = command
        self._ready.set()

    def __call__(self, frame: Frame) -> None:
        with self._changed:
            self._frames.append(frame)
            count = len(self._frames)
            self._changed.notify_all()
        if count == self._stop_at and self._ready.wait(WAIT):
            assert self._command is not None
            self._fake.stop_command(self._command)
            with self._changed:
                self.at_stop = len(self._frames)
                self._changed.notify_all()
        if count - 1 in self._raise_on:
            raise RuntimeError("owner bug")

    def frames(self) -> list[Frame]:
        with self._changed:
            return list(self._frames)

    def wait_for(self, predicate: Callable[[list[Frame]], bool]) -> bool:
        """Wait (bounded) until ``predicate(frames)`` holds."""
        with self._changed:
            return self._changed.wait_for(lambda: predicate(self._frames), WAIT)

    def wait_count(self, count: int) -> bool:
        """Wait (bounded) for ``count`` frames, or for the terminal one if fewer come."""
        return self.wait_for(lambda frames: len(frames) >= count or _ended(frames))


def _ended(frames: Sequence[Frame]) -> bool:
    return any(frame.terminal for frame in frames)


def _join_reader(command: Command) -> None:
    """Wait for the command's reader thread (``fake-<ref>``) to end: then nothing more
    can be delivered to its owner."""
    for thread in threading.enumerate():
        if thread.name == f"fake-{command.ref}":
            thread.join(WAIT)
            assert not thread.is_alive(), "the reader thread did not end"


def _spawn(fake: Fake, script: Script, recorder: Recorder) -> Command:
    command = fake.spawn(fake.create("props"), "emit", script.args, owner=recorder)
    recorder.ready(command)
    return command


@PROPERTY
@given(script=scripts, stop_at=points.filter(bool))
def test_a_stop_from_inside_the_callback_keeps_a_prefix_and_nothing_follows(
    script: Script, stop_at: int
) -> None:
    fake = Fake()
    recorder = Recorder(fake, stop_at=stop_at)
    command = _spawn(fake, script, recorder)
    expected = script.frames(command.ref)
    stops = stop_at <= len(expected)
    assert recorder.wait_for(
        lambda frames: recorder.at_stop is not None if stops else _ended(frames)
    )
    _join_reader(command)
    frames = recorder.frames()
    if stops:
        assert recorder.at_stop == stop_at, "a frame was delivered after the stop"
        assert frames == expected[:stop_at]
    else:
        assert frames == expected, "without a stop: every frame, one terminal frame, last"
    fake.reset()


@PROPERTY
@given(script=scripts, stop_after=points)
def test_a_stop_from_another_thread_keeps_a_prefix_and_nothing_follows(
    script: Script, stop_after: int
) -> None:
    fake = Fake()
    recorder = Recorder(fake)
    command = _spawn(fake, script, recorder)
    expected = script.frames(command.ref)
    assert recorder.wait_count(stop_after)
    fake.stop_command(command)
    at_stop = len(recorder.frames())
    _join_reader(command)
    frames = recorder.frames()
    assert len(frames) == at_stop, "a frame was delivered after stop_command returned"
    assert frames == expected[:at_stop]
    assert at_stop >= min(stop_after, len(expected))
    fake.reset()


@PROPERTY
@given(script=scripts, attach_after=points, stop_after=points)
def test_an_attach_at_any_point_gets_the_whole_stream_while_the_original_stops_at_another(
    script: Script, attach_after: int, stop_after: int
) -> None:
    fake = Fake()
    original, replay = Recorder(fake), Recorder(fake)
    command = _spawn(fake, script, original)
    attached: Command | None = None
    at_stop: int | None = None
    for point, action in sorted([(attach_after, "attach"), (stop_after, "stop")]):
        if at_stop is None:
            assert original.wait_count(point)
        if action == "attach":
            assert command.session_id is not None
            attached = fake.attach(fake.build_handle("props"), command.session_id, owner=replay)
            replay.ready(attached)
        else:
            fake.stop_command(command)
            at_stop = len(original.frames())
    assert attached is not None
    assert replay.wait_for(_ended)
    _join_reader(command)
    _join_reader(attached)
    assert replay.frames() == script.frames(attached.ref), "replay then tail lost or doubled"
    assert at_stop is not None
    assert original.frames() == script.frames(command.ref)[:at_stop]
    fake.reset()


@PROPERTY
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@given(script=scripts, raise_on=st.frozensets(st.integers(0, 9)))
def test_an_owner_raising_on_any_frames_still_gets_every_frame_and_one_terminal(
    script: Script, raise_on: frozenset[int]
) -> None:
    fake = Fake()
    recorder = Recorder(fake, raise_on=raise_on)
    command = _spawn(fake, script, recorder)
    assert recorder.wait_for(_ended)
    _join_reader(command)
    assert recorder.frames() == script.frames(command.ref)
    fake.reset()


errors = st.sampled_from(
    [Unavailable("injected"), RateLimited(2.0), Denied("injected"), NotFound("injected")]
)
operations = st.lists(
    st.tuples(st.sampled_from(("spawn", "attach", "exec")), st.one_of(st.none(), errors)),
    min_size=1,
    max_size=6,
)


@PROPERTY
@given(script=scripts, calls=operations)
def test_an_injected_fault_fails_exactly_its_call_and_delivers_nothing(
    script: Script, calls: list[tuple[str, SandboxError | None]]
) -> None:
    fake = Fake()
    handle = fake.create("props")
    sessions: list[str] = []
    for operation, error in calls:
        if error is not None:
            fake.fail_next(operation, error)
        recorder = Recorder(fake)
        before = fake.list_sessions(handle)
        try:
            if operation == "exec":
                outcome: object = fake.exec(handle, "emit", script.args)
            elif operation == "spawn":
                outcome = fake.spawn(handle, "emit", script.args, owner=recorder)
            else:
                target = sessions[-1] if sessions else "fake-sess-missing"
                outcome = fake.attach(handle, target, owner=recorder)
        except SandboxError as raised:
            outcome = raised
        if error is not None:
            assert outcome == error, f"{operation} must raise exactly the injected error"
            assert fake.list_sessions(handle) == before, "a faulted call started nothing"
            assert recorder.frames() == []
        elif operation == "exec":
            assert outcome == script.exec_result()
        elif operation == "attach" and not sessions:
            assert isinstance(outcome, NotFound)
        else:
            assert isinstance(outcome, Command)
            recorder.ready(outcome)
            assert recorder.wait_for(_ended)
            _join_reader(outcome)
            assert recorder.frames() == script.frames(outcome.ref)
            assert outcome.session_id is not None
            sessions.append(outcome.session_id)
    fake.reset()
