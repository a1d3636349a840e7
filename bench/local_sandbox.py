"""The local provider against what a user would otherwise pick to run a command locally.

* ``exec true`` vs ``subprocess.run(["true"])`` — the floor (target: within 1.2x) — and vs
  running ``true`` under ``bwrap`` directly with the same namespaces (a new set per command);
* spawn -> first stdout frame (target: < 2 ms);
* a sandbox's whole life — ``create``, one ``exec``, ``destroy`` — vs one ``bwrap`` run
  alone with the same namespaces (target: within 5x), and ``create`` alone;
* many sandboxes alive at once (200 in a full run): how long they take to create, and the
  memory each costs (proportional set size of its agent, keeper and bwrap processes);
* 500 concurrent commands in one sandbox, and 50 sandboxes x 10 commands: nothing lost,
  duplicated or ended twice.

Each latency sample is the mean of a batch of calls (one call is under a millisecond).
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import fanout
from measure import WAIT, Row, Target, compared, elapsed, paired, repeated, scratch, single

import managoat_sandbox as sandbox
from managoat_sandbox import Handle, config
from managoat_sandbox._engine import isolation, launch, mounts
from managoat_sandbox.providers.local import layout

BATCH = 20
MIB = 1024 * 1024
WITHIN_1_2X = Target("ratio", "<=", 1.2, "ours/subprocess.run <= 1.2")
FIRST_FRAME = Target("ours", "<", 2.0, "ours < 2 ms")
LIFE_WITHIN_5X = Target("ratio", "<=", 5.0, "ours/bwrap true <= 5")


def bwrap_true() -> list[str] | None:
    """``true`` under bwrap with a sandbox's namespaces and system mounts (None: no bwrap)."""
    support = isolation.support()
    if not support.available or support.bwrap is None:
        return None
    probe = [*mounts.system_mounts(), mounts.Mount("proc", "/proc"), mounts.Mount("dev", "/dev")]
    return [support.bwrap, *isolation.NAMESPACE_FLAGS, *mounts.args(probe), "--", "true"]


def batch(call: Callable[[], object], size: int = BATCH) -> float:
    return elapsed(lambda: [call() for _ in range(size)])() / size


@contextmanager
def local_root() -> Iterator[None]:
    """A throwaway local root on the disk users' sandboxes live on (:func:`measure.scratch`)."""
    with scratch() as root, config.override("local", root=str(root)):
        yield


def first_frame(handle: Handle) -> None:
    """One spawn, up to its first stdout frame (then stopped)."""
    command = sandbox.spawn(handle, "echo", ["x"])
    assert command.frames is not None
    command.frames.get(timeout=WAIT)
    sandbox.stop_command(command)


def latency_rows(rounds: int) -> list[Row]:
    """exec and first-frame latencies, and creation time."""
    bwrap = bwrap_true()
    with local_root():
        handle = sandbox.create("local", "bench")
        mode = sandbox.get(handle).raw["isolation"]
        try:
            ours = lambda: batch(lambda: sandbox.exec(handle, "true", timeout=WAIT))  # noqa: E731
            rows = [
                compared(
                    "local",
                    "exec true vs subprocess.run",
                    paired(
                        ours, lambda: batch(lambda: subprocess.run(["true"], check=True)), rounds
                    ),
                    unit="ms",
                    scale=1000,
                    reference_name="subprocess.run",
                    kind="latency",
                    target=WITHIN_1_2X,
                )
            ]
            rows[0].note = f"isolation: {mode}"
            if bwrap is not None:
                rows.append(
                    compared(
                        "local",
                        "exec true vs bwrap true",
                        paired(
                            ours,
                            lambda: batch(lambda: subprocess.run(bwrap, check=True), 5),
                            rounds,
                        ),
                        unit="ms",
                        scale=1000,
                        reference_name="bwrap per command",
                        kind="latency",
                        target=None,
                    )
                )
            first = repeated(lambda: batch(lambda: first_frame(handle)), rounds)
            rows.append(
                single(
                    "local",
                    "spawn -> first stdout",
                    first,
                    unit="ms",
                    scale=1000,
                    target=FIRST_FRAME,
                )
            )
        finally:
            sandbox.destroy(handle)
        rows += life_rows(bwrap, max(rounds // 3, 3))
    return rows


def life_rows(bwrap: list[str] | None, rounds: int) -> list[Row]:
    """A sandbox's whole life (create, one exec, destroy) against one ``bwrap`` run alone,
    and ``create`` alone."""
    made = itertools.count()
    creations: list[float] = []

    def life() -> None:
        began = time.perf_counter()
        handle = sandbox.create("local", f"bench-life-{next(made)}")
        creations.append(time.perf_counter() - began)
        try:
            sandbox.exec(handle, "true", timeout=WAIT)
        finally:
            sandbox.destroy(handle)

    if bwrap is None:
        rows = [
            single(
                "local",
                "create + exec + destroy",
                repeated(elapsed(life), rounds),
                unit="ms",
                scale=1000,
            )
        ]
    else:
        rows = [
            compared(
                "local",
                "create + exec + destroy vs bwrap alone",
                paired(elapsed(life), elapsed(lambda: subprocess.run(bwrap, check=True)), rounds),
                unit="ms",
                scale=1000,
                reference_name="bwrap true",
                kind="latency",
                target=LIFE_WITHIN_5X,
            )
        ]
    rows.append(single("local", "create", creations[1:], unit="ms", scale=1000))
    return rows


def alive_rows(count: int) -> list[Row]:
    """``count`` sandboxes alive at once: the time to create them one after another, and
    what each costs in memory once all run (the proportional set size of the processes
    it keeps: its agent, its keeper, and bubblewrap where isolated)."""
    with local_root():
        handles: list[Handle] = []
        try:
            began = time.perf_counter()
            for n in range(count):
                handles.append(sandbox.create("local", f"bench-alive-{n}"))
            took = time.perf_counter() - began
            # Every agent serves (an exec each), so each has loaded what commands need.
            for handle in handles:
                sandbox.exec(handle, "true", timeout=WAIT)
            parts = [memory_of(handle) for handle in handles]
        finally:
            for handle in handles:
                sandbox.destroy(handle)
    roles = sorted({role for found in parts for role in found})
    mean = {role: statistics.fmean(found.get(role, 0) for found in parts) for role in roles}
    note = ", ".join(f"{role} {mean[role] / MIB:.1f} MiB" for role in roles)
    per_box = [sum(found.values()) for found in parts]
    return [
        single("local", f"{count} sandboxes alive: creating them", [took], unit="s", scale=1),
        single(
            "local",
            f"{count} sandboxes alive: memory per sandbox (PSS)",
            per_box,
            unit="MiB",
            scale=1 / MIB,
            note=note,
        ),
    ]


def directory_of(handle: Handle) -> Path:
    """The directory of the local sandbox ``handle`` (under the root it was made in)."""
    assert isinstance(handle.private, layout.Located)
    return handle.private.root / handle.name


def agent_pid(handle: Handle) -> int:
    """The host pid of the local sandbox's agent (its ``state/agent.json``)."""
    record = json.loads((directory_of(handle) / "state" / "agent.json").read_text())
    return int(record["pid"])


def memory_of(handle: Handle) -> dict[str, int]:
    """The proportional set size, in bytes, of each process a sandbox keeps, by role."""
    directory = directory_of(handle)
    found: dict[str, int] = {"agent": pss(agent_pid(handle))}
    for proc in launch._launched.get(directory, []):
        role = "keeper" if proc.keeper else "bwrap"
        found[role] = found.get(role, 0) + pss(proc.pid)
    return found


def pss(pid: int) -> int:
    """Process ``pid``'s proportional set size in bytes (0 once it is gone)."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def fan_out_rows(commands: int, sandboxes: int, per_sandbox: int) -> list[Row]:
    """``commands`` in one sandbox, then ``sandboxes`` x ``per_sandbox``."""
    with local_root():
        handle = sandbox.create("local", "bench-fanout")
        try:
            rows = fanout.fan_out_rows("local", handle, fanout.BASH, commands)
        finally:
            sandbox.destroy(handle)
        handles = [sandbox.create("local", f"bench-many-{n}") for n in range(sandboxes)]
        try:
            rows += fanout.fan_out_rows(
                "local",
                handles,
                fanout.BASH,
                sandboxes * per_sandbox,
                name=f"{sandboxes} sandboxes x {per_sandbox}",
            )
        finally:
            for many in handles:
                sandbox.destroy(many)
    return rows
