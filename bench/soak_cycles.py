"""The soak's cycles, one adapter-neutral set: exec, spawn, stop then attach, attach.

A :class:`Driver` knows one adapter: how to reach it, what random command
(:class:`Job`) to run and what that command must deliver, and which faults
(:class:`Fault`) it can inject. :func:`cycle` runs one random cycle through the
facade, sometimes with a fault, and hands what was delivered to the tally:

* ``exec`` — the result, or the accepted taxonomy error;
* ``spawn`` — every frame up to the terminal one (a ``mid`` fault strikes
  after the first frame);
* ``stop`` — stop after k frames, from inside the owner callback or from
  this thread, then attach: the original delivered a prefix and nothing after
  the stop, the replay delivers everything and the real exit;
* ``attach`` — attach while the command runs or after it ended: the original
  and the attacher both deliver everything (an attach fault may end it).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from soak_check import WAIT, Expect, Recorder, Tally

import managoat_sandbox as sandbox
from managoat_sandbox.errors import Unavailable
from managoat_sandbox.types import Command, ExecResult, Handle

#: Share of cycles that inject a fault.
FAULT_SHARE = 0.3
KINDS = ("exec", "spawn", "stop", "attach")
WEIGHTS = (3, 3, 2, 2)


@dataclass(frozen=True)
class Job:
    """A command to run and what it must deliver; ``marker`` is unique to it."""

    cmd: str
    args: tuple[str, ...]
    expect: Expect
    marker: str


@dataclass(frozen=True)
class Fault:
    """An injectable fault and the taxonomy errors that may end its cycle.

    ``ops`` are the cycle kinds it may be drawn for; in ``stop`` and ``attach``
    cycles it strikes the attach, never the spawn before it. ``arm`` queues it
    before the operation; ``mid`` strikes after the first frame of a spawn;
    ``timeout`` is an exec deadline shorter than the (slow) job. ``errors``
    empty means the fault must be ridden out: only the exact result is right.
    """

    name: str
    ops: frozenset[str]
    errors: tuple[type[BaseException], ...] = ()
    arm: Callable[[random.Random], object] = lambda rng: None
    mid: Callable[[Command], None] | None = None
    timeout: float | None = None

    @property
    def slow(self) -> bool:
        """Whether it needs a job that is still running after its first frame."""
        return self.mid is not None or self.timeout is not None


class Driver:
    """One adapter under soak; subclasses fill in the hooks."""

    name = ""
    handle: Handle
    faults: Sequence[Fault] = ()

    def open(self) -> None:
        """Start what the adapter needs and create :attr:`handle`."""

    def close(self) -> None:
        """Destroy the sandbox and stop everything :meth:`open` started."""

    def recycle(self) -> None:
        """Start afresh with a new sandbox (bounds session lists and disk)."""

    def clear(self) -> None:
        """Drop any fault still pending after a cycle."""

    def job(self, rng: random.Random, n: int, *, slow: bool) -> Job:
        """A random command; ``slow`` ones keep running after their first frame."""
        raise NotImplementedError

    def session_id(self, command: Command, job: Job) -> str:
        """The session a command runs in: its own id, else found by the job's marker."""
        if command.session_id:
            return str(command.session_id)
        for session in sandbox.list_sessions(self.handle):
            if session.command and job.marker in session.command:
                return str(session.id)
        raise LookupError(f"no session for {job.marker}")


def pick_fault(driver: Driver, rng: random.Random, kind: str) -> Fault | None:
    choices = [f for f in driver.faults if kind in f.ops]
    return rng.choice(choices) if choices and rng.random() < FAULT_SHARE else None


@dataclass(frozen=True)
class Run:
    """One cycle in progress: who runs what, with which fault, judged against what."""

    driver: Driver
    rng: random.Random
    job: Job
    fault: Fault | None
    expect: Expect
    tally: Tally

    def arm(self) -> None:
        if self.fault is not None:
            self.fault.arm(self.rng)


def cycle(driver: Driver, rng: random.Random, n: int, tally: Tally) -> None:
    """Run one random cycle (see the module docstring) and judge it."""
    kind = rng.choices(KINDS, WEIGHTS)[0]
    fault = pick_fault(driver, rng, kind)
    job = driver.job(
        rng,
        n,
        slow=kind == "stop"
        or (fault is not None and fault.slow)
        or (kind == "attach" and rng.random() < 0.5),
    )
    expect = job.expect
    tally.context = f"{kind} cycle {n} ({fault.name if fault else 'no fault'})"
    if fault is not None:
        tally.fault()
        expect = replace(expect, errors=expect.errors + fault.errors)
    try:
        RUNS[kind](Run(driver, rng, job, fault, expect, tally))
    finally:
        tally.counts["cycles"] += 1
        driver.clear()


def _exec(run: Run) -> None:
    run.arm()
    timeout = run.fault.timeout if run.fault is not None and run.fault.timeout else WAIT
    result: ExecResult | BaseException
    try:
        result = sandbox.exec(run.driver.handle, run.job.cmd, list(run.job.args), timeout=timeout)
    except Exception as error:
        result = error
    run.tally.outcome(result, replace(run.expect, err=None))


def _spawn(run: Run, recorder: Recorder, *, detachable: bool) -> Command | None:
    """Spawn into ``recorder``; a start that raised is judged (against the run's
    expectation) here and gives None."""
    try:
        command = sandbox.spawn(
            run.driver.handle,
            run.job.cmd,
            list(run.job.args),
            owner=recorder,
            detachable=detachable,
        )
    except Exception as error:
        run.tally.outcome(error, run.expect)
        return None
    recorder.ready(command)
    return command


def _finish(command: Command, recorder: Recorder, expect: Expect, tally: Tally) -> None:
    """Wait for the terminal frame, stop (frees the reader), judge everything delivered."""
    recorder.wait_terminal()
    sandbox.stop_command(command)
    tally.stream(recorder.snapshot(), expect)


def _spawn_cycle(run: Run) -> None:
    recorder = Recorder()
    run.arm()
    command = _spawn(run, recorder, detachable=run.rng.random() < 0.5)
    if command is None:
        return
    if run.fault is not None and run.fault.mid is not None:
        recorder.wait(1)
        run.fault.mid(command)
    _finish(command, recorder, run.expect, run.tally)


def _attach(run: Run, command: Command) -> None:
    """Attach to ``command``'s session (the fault strikes here) and judge the replay."""
    try:
        session_id = run.driver.session_id(command, run.job)
        run.arm()
        replay = Recorder()
        attached = sandbox.attach(run.driver.handle, session_id, owner=replay)
    except Exception as error:
        run.tally.outcome(error, run.expect)
        return
    replay.ready(attached)
    _finish(attached, replay, run.expect, run.tally)


def _stop_cycle(run: Run) -> None:
    after = run.rng.randint(0, 3)
    inside = after > 0 and run.rng.random() < 0.5
    recorder = Recorder(stop=sandbox.stop_command, stop_after=after if inside else None)
    command = _spawn(replace(run, expect=run.job.expect), recorder, detachable=True)
    if command is None:
        return
    recorder.wait(after)
    if not (inside and recorder.stop_reached(after)):
        recorder.stopped(lambda: sandbox.stop_command(command))
    if recorder.missed_stop:
        run.tally.problem("bad_end", "the command was never handed to the callback")
    _attach(run, command)
    run.tally.stream(recorder.snapshot(), run.job.expect, at_stop=recorder.at_stop)


def _attach_cycle(run: Run) -> None:
    recorder = Recorder()
    command = _spawn(replace(run, expect=run.job.expect), recorder, detachable=True)
    if command is None:
        return
    if run.rng.random() < 0.5:
        recorder.wait(1)
    else:
        recorder.wait_terminal()
    _attach(run, command)
    _finish(command, recorder, run.job.expect, run.tally)


RUNS: dict[str, Callable[[Run], None]] = {
    "exec": _exec,
    "spawn": _spawn_cycle,
    "stop": _stop_cycle,
    "attach": _attach_cycle,
}


def deadline_fault(seconds: float = 0.05) -> Fault:
    """An exec deadline shorter than a slow job: ``Unavailable(("exec_timeout", s))``."""
    return Fault("exec-deadline", frozenset({"exec"}), (Unavailable,), timeout=seconds)
