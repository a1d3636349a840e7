"""Soak: thousands of exec/spawn cycles with random faults, counting lost or duplicated frames.

Run with ``python bench/soak.py [--cycles N] [--seed S]``. Each cycle picks a
random Fake script (output, exit codes, drops), sometimes an injected transient
fault, sometimes a stop or an attach, and checks every delivered stream against
the script: output complete and in order, exactly one terminal frame, nothing
after a stop. A smaller share of cycles runs real processes on ``local``. The
answer it prints must be ``0 lost, 0 duplicated, 0 wrong``.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.errors import SandboxError, Unavailable
from managoat_sandbox.frames import Exit, Frame, Stdout
from managoat_sandbox.testing import Fake


def fake_script(rng: random.Random) -> tuple[list[str], bytes, object]:
    """A random script, the stdout it must produce, and its terminal (code or 'drop')."""
    args: list[str] = []
    out = b""
    for n in range(rng.randint(0, 6)):
        chunk = f"{n}-{rng.randint(0, 999)}"
        args.append(f"out:{chunk}")
        out += chunk.encode()
    end: object = rng.choice([0, 0, 3, 255, "drop"])
    args.append("drop" if end == "drop" else f"exit:{end}")
    return args, out, end


class Tally:
    def __init__(self) -> None:
        self.cycles = self.lost = self.duplicated = self.wrong = self.faults = 0

    def check(self, frames: list[Frame], out: bytes, end: object) -> None:
        terminals = [f for f in frames if f.terminal]
        if len(terminals) > 1:
            self.duplicated += 1
        if not terminals or frames[-1] is not terminals[0]:
            self.lost += 1
            return
        data = b"".join(f.data for f in frames if isinstance(f, Stdout))
        verdict = terminals[0].code if isinstance(terminals[0], Exit) else "drop"
        if data != out or verdict != end:
            self.wrong += 1


def fake_cycle(rng: random.Random, handle: sandbox.Handle, fake: Fake, tally: Tally) -> None:
    args, out, end = fake_script(rng)
    if rng.random() < 0.1:
        fake.fail_next("spawn", Unavailable("soak"))
        tally.faults += 1
        try:
            sandbox.spawn(handle, "emit", args)
        except SandboxError:
            return
        tally.wrong += 1
        return
    frames: list[Frame] = []
    done = threading.Event()

    def owner(frame: Frame) -> None:
        frames.append(frame)
        if frame.terminal:
            done.set()

    command = sandbox.spawn(handle, "emit", args, owner=owner)
    if rng.random() < 0.2:
        sandbox.stop_command(command)
        seen = len(frames)
        replay = sandbox.attach(handle, command.session_id or "")
        tally.check(list(sandbox.iter_frames(replay, timeout=5)), out, end)
        if len(frames) != seen:
            tally.duplicated += 1
        return
    if not done.wait(5):
        tally.lost += 1
        return
    tally.check(frames, out, end)


def local_cycle(rng: random.Random, handle: sandbox.Handle, tally: Tally) -> None:
    code = rng.choice([0, 1, 7])
    lines = rng.randint(1, 50)
    command = sandbox.spawn(handle, "bash", ["-c", f"seq {lines}; exit {code}"])
    frames = list(sandbox.iter_frames(command, timeout=30))
    expected = "".join(f"{n}\n" for n in range(1, lines + 1)).encode()
    tally.check(frames, expected, code)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    rng = random.Random(seed)
    fake = Fake()
    tally = Tally()
    began = time.monotonic()
    with tempfile.TemporaryDirectory() as root:
        config.configure(adapters={"fake": fake})
        config.configure("local", root=root)
        config.configure("retry", attempts=1)
        fake_box = sandbox.create("fake", "soak")
        local_box = sandbox.create("local", "soak")
        for n in range(args.cycles):
            if n % 50 == 49:
                local_cycle(rng, local_box, tally)
            else:
                fake_cycle(rng, fake_box, fake, tally)
            tally.cycles += 1
            if n % 500 == 499:
                fake.reset()
                fake_box = sandbox.create("fake", "soak")
        sandbox.destroy(local_box)
    print(f"seed {seed}: {tally.cycles} cycles ({tally.faults} injected faults) in "
          f"{time.monotonic() - began:.1f} s: {tally.lost} lost, {tally.duplicated} duplicated, "
          f"{tally.wrong} wrong")


if __name__ == "__main__":
    main()
