"""Fan-out: K concurrent streaming commands from this one process.

Each command prints lines 1-50, waits for a line on stdin, then prints more
and exits 0 (on the Fake, a script: ``out:`` lines, then ``stay``, which
echoes the line and exits at EOF). All K are spawned (16 spawner threads),
held until every one has delivered its first half, so that all K are live
at once, then each gets its line and EOF. Counted: lines lost and lines
duplicated (by content, per command), and commands that did not end with
exactly one final ``Exit(0)`` (all must be 0); the wall time from the
first spawn to the last exit; and the growth of this process's peak RSS
per command (VmHWM, lowered to the current RSS through
``/proc/self/clear_refs`` first). Hosted providers run against an emulator
in a child process, so the memory figure is ours alone.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from measure import NONE_LOST, WAIT, Row

import managoat_sandbox as sandbox
from managoat_sandbox import Command, Exit, Frame, Handle, Stdout

HALF = 50
SPAWNERS = 16
FIRST_HALF = "".join(f"{n}\n" for n in range(1, HALF + 1)).encode()


@dataclass(frozen=True)
class Script:
    """What each command runs, and the whitespace-separated tokens it must deliver."""

    cmd: str
    args: tuple[str, ...]
    expected: Counter[str]


BASH = Script(
    "bash",
    ("-c", f"seq 1 {HALF}; read _; seq {HALF + 1} {2 * HALF}"),
    Counter(str(n) for n in range(1, 2 * HALF + 1)),
)
FAKE = Script(
    "fake",
    (*(f"out:{n}\n" for n in range(1, HALF + 1)), "stay"),
    Counter([*(str(n) for n in range(1, HALF + 1)), "echo:go"]),
)


def peak_rss_kib(*, reset: bool = False) -> int:
    """This process's peak RSS (VmHWM, KiB); ``reset`` first lowers it to the current RSS."""
    if reset:
        with contextlib.suppress(OSError):
            Path("/proc/self/clear_refs").write_text("5")
    found = re.search(r"VmHWM:\s+(\d+) kB", Path("/proc/self/status").read_text())
    if found is None:
        raise RuntimeError("no VmHWM in /proc/self/status")
    return int(found.group(1))


class Collected:
    """K commands' frames, gathered by one owner callback from K reader threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.frames: dict[Hashable, list[Frame]] = {}
        self.stdout: dict[Hashable, bytearray] = {}
        self.ended: set[Hashable] = set()

    def owner(self, frame: Frame) -> None:
        with self.lock:
            self.frames.setdefault(frame.ref, []).append(frame)
            if isinstance(frame, Stdout):
                self.stdout.setdefault(frame.ref, bytearray()).extend(frame.data)
            if frame.terminal:
                self.ended.add(frame.ref)

    def wait(self, done: Callable[[], bool], deadline: float) -> None:
        while time.monotonic() < deadline:
            with self.lock:
                if done():
                    return
            time.sleep(0.05)
        raise TimeoutError("fan-out commands did not get there in time")

    def tally(self, refs: Sequence[Hashable], expected: Counter[str]) -> tuple[int, int, int]:
        """Lost tokens, duplicated tokens, commands not ending in exactly one final ``Exit(0)``."""
        lost = duplicated = bad_end = 0
        for ref in refs:
            got = Counter(bytes(self.stdout.get(ref, b"")).decode().split())
            lost += sum((expected - got).values())
            duplicated += sum((got - expected).values())
            frames = self.frames.get(ref, [])
            terminals = [frame for frame in frames if frame.terminal]
            if terminals != [Exit(ref, 0)] or not frames[-1].terminal:
                bad_end += 1
        return lost, duplicated, bad_end


@dataclass(frozen=True)
class FanOutResult:
    lost: int
    duplicated: int
    bad_ends: int
    wall: float
    peak_kib_per_command: float


def run_fan_out(handles: Sequence[Handle], script: Script, commands: int) -> FanOutResult:
    """Spawn ``commands`` at once (command n in ``handles[n % len(handles)]``), hold them
    all live, release them, and check every frame."""
    collected = Collected()
    before = peak_rss_kib(reset=True)
    began = time.monotonic()
    deadline = began + WAIT + commands * 0.5
    running: list[Command] = []
    lock = threading.Lock()

    def spawn(n: int) -> None:
        if time.monotonic() > deadline:
            raise TimeoutError("fan-out spawns did not get there in time")
        command = sandbox.spawn(
            handles[n % len(handles)],
            script.cmd,
            list(script.args),
            owner=collected.owner,
            stdin=True,
        )
        with lock:
            running.append(command)

    try:
        with ThreadPoolExecutor(SPAWNERS) as pool:
            for _ in pool.map(spawn, range(commands)):
                pass
        refs = [command.ref for command in running]
        collected.wait(
            lambda: all(collected.stdout.get(ref, b"") == FIRST_HALF for ref in refs), deadline
        )
        for command in running:
            sandbox.write_stdin(command, "go\n")
            sandbox.close_stdin(command)
        collected.wait(lambda: len(collected.ended) == commands, deadline)
        wall = time.monotonic() - began
        peak = (peak_rss_kib() - before) / commands
    finally:
        for command in running:
            sandbox.stop_command(command)
    return FanOutResult(*collected.tally(refs, script.expected), wall, peak)


def fan_out_rows(
    section: str,
    handle: Handle | Sequence[Handle],
    script: Script,
    commands: int,
    *,
    name: str = "",
) -> list[Row]:
    """The rows of one fan-out over one sandbox or several (the caller guards them)."""
    handles = [handle] if isinstance(handle, Handle) else list(handle)
    found = run_fan_out(handles, script, commands)
    name = name or f"fan-out {commands}"
    return [
        Row(
            section,
            f"{name}: lost+dup lines",
            ours=found.lost + found.duplicated,
            target=NONE_LOST.text,
            met=found.lost + found.duplicated + found.bad_ends == 0,
            note=f"{found.lost} lost, {found.duplicated} dup, {found.bad_ends} bad ends",
        ),
        Row(section, f"{name}: wall time", "s", ours=found.wall),
        Row(section, f"{name}: peak RSS growth", "KiB/cmd", ours=found.peak_kib_per_command),
    ]
