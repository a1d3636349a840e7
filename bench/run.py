"""Benchmarks: run with ``python bench/run.py``; prints a table of medians and ratios.

Timing lives here, never in pass/fail tests. Measured:
- ``import managoat_sandbox`` in a fresh interpreter (target < 150 ms);
- exec round trip through the facade vs the adapter called directly (the
  facade's overhead: resolution, argument checks, tagging);
- spawn-to-first-frame latency on the Fake;
- fan-out: N concurrent streaming commands, counting lost or duplicated frames;
- exec round trip and spawn-to-first-frame on the ``local`` provider (real processes).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.frames import Frame, Stdout
from managoat_sandbox.testing import Fake


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - began)
    return statistics.median(samples)


def import_time() -> float:
    code = (
        "import time; t = time.perf_counter(); import managoat_sandbox; "
        "print(time.perf_counter() - t)"
    )
    runs = [float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(7)]
    return statistics.median(runs)


def fan_out(fake: Fake, commands: int, chunks: int) -> tuple[int, int]:
    handle = sandbox.create("fake", "bench-fanout")
    received: dict[object, list[bytes]] = {}
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def owner(frame: Frame) -> None:
        with lock:
            if isinstance(frame, Stdout):
                received.setdefault(frame.ref, []).append(frame.data)
        if frame.terminal:
            done.release()

    script = [f"out:{n}" for n in range(chunks)]
    refs = [sandbox.spawn(handle, "emit", script, owner=owner).ref for _ in range(commands)]
    for _ in refs:
        done.acquire(timeout=60)
    expected = [str(n).encode() for n in range(chunks)]
    lost = sum(1 for ref in refs if received.get(ref) != expected)
    return len(refs), lost


def local_latencies() -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as root, config.override("local", root=root):
        handle = sandbox.create("local", "bench")

        def first_frame() -> None:
            command = sandbox.spawn(handle, "echo", ["x"])
            assert command.frames is not None
            command.frames.get(timeout=10)
            sandbox.stop_command(command)

        exec_time = median_seconds(lambda: sandbox.exec(handle, "true"), 20)
        first = median_seconds(first_frame, 20)
        sandbox.destroy(handle)
    return exec_time, first


def main() -> None:
    fake = Fake()
    config.configure(adapters={"fake": fake})
    config.configure("retry", attempts=1)
    handle = sandbox.create("fake", "bench")
    direct = median_seconds(lambda: fake.exec(handle, "emit", ["out:x"]), 2000)
    facade = median_seconds(lambda: sandbox.exec(handle, "emit", ["out:x"]), 2000)

    def first_frame() -> None:
        command = sandbox.spawn(handle, "emit", ["out:x"])
        assert command.frames is not None
        command.frames.get(timeout=5)
        sandbox.stop_command(command)

    spawn = median_seconds(first_frame, 300)
    local_exec, local_first = local_latencies()
    commands, lost = fan_out(fake, 500, 20)
    rows = [
        ("import managoat_sandbox", f"{import_time() * 1000:.1f} ms", "target < 150 ms"),
        ("exec via adapter (Fake)", f"{direct * 1e6:.1f} us", ""),
        ("exec via facade (Fake)", f"{facade * 1e6:.1f} us", f"{facade / direct:.2f}x adapter"),
        ("spawn -> first frame (Fake)", f"{spawn * 1e6:.1f} us", ""),
        (f"fan-out {commands} commands", f"{lost} lost/duplicated", "must be 0"),
        ("exec round trip (local)", f"{local_exec * 1000:.1f} ms", "a real process each"),
        ("spawn -> first frame (local)", f"{local_first * 1000:.1f} ms", ""),
    ]
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>22}  {note}")
    fake.reset()


if __name__ == "__main__":
    main()
