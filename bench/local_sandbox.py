"""The local provider against what a user would otherwise pick to run a command locally.

* ``exec true`` vs ``subprocess.run(["true"])`` — the floor (target: within 2x) — and vs
  running ``true`` under ``bwrap`` directly with the same namespaces (a new set per command);
* spawn -> first stdout frame (target: < 5 ms);
* sandbox creation (``create``: directories, keeper, bwrap, agent) vs one ``bwrap`` run alone;
* 500 concurrent commands in one sandbox, and 50 sandboxes x 10 commands: nothing lost,
  duplicated or ended twice.

Each latency sample is the mean of a batch of calls (one call is under a millisecond).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import fanout
from measure import WAIT, Row, Target, compared, elapsed, paired, repeated, single

import managoat_sandbox as sandbox
from managoat_sandbox import Handle, config
from managoat_sandbox._engine import isolation, mounts

BATCH = 20
WITHIN_2X = Target("ratio", "<=", 2.0, "ours/subprocess.run <= 2")
FIRST_FRAME = Target("ours", "<", 5.0, "ours < 5 ms")


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
    with tempfile.TemporaryDirectory() as root, config.override("local", root=root):
        yield


def _first_frame(handle: Handle) -> None:
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
                    target=WITHIN_2X,
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
            first = repeated(lambda: batch(lambda: _first_frame(handle)), rounds)
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
        made: list[Handle] = []

        def create() -> float:
            began = elapsed(
                lambda: made.append(sandbox.create("local", f"bench-create-{len(made)}"))
            )()
            return began

        try:
            if bwrap is not None:
                rows.append(
                    compared(
                        "local",
                        "create vs bwrap alone",
                        paired(
                            create,
                            elapsed(lambda: subprocess.run(bwrap, check=True)),
                            max(rounds // 3, 3),
                        ),
                        unit="ms",
                        scale=1000,
                        reference_name="bwrap true",
                        kind="",
                        target=None,
                    )
                )
            else:
                rows.append(
                    single(
                        "local",
                        "create",
                        repeated(create, max(rounds // 3, 3)),
                        unit="ms",
                        scale=1000,
                    )
                )
        finally:
            for made_handle in made:
                sandbox.destroy(made_handle)
    return rows


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
