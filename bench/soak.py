"""Soak: thousands of exec/spawn/attach cycles with random faults, on every adapter.

Run with ``python bench/soak.py [--cycles N] [--seconds S] [--seed X] [--short]``.
The adapters run one after another — the Fake, ``local``, then Sprites, E2B
and Daytona against their emulators (started in this process) — each for at
most ``--cycles`` cycles and its share of ``--seconds`` (time one adapter
leaves unused passes to the next). Every cycle (see ``soak_cycles``) runs a
random command through the facade, sometimes with an injected fault, a stop
(from inside the owner callback or from another thread) or an attach, and
checks what was delivered against what the command must produce
(``soak_check``): output complete and in order, exactly one terminal frame,
nothing after a stop, the real exit code, and faults ending in their
taxonomy error. After each adapter, threads beyond those alive before it
started (its emulator included) are leaked threads, after a bounded wait.

It prints a progress line every ``--progress`` seconds and, at the end, one
row per adapter; every problem column must be 0, else the exit status is 1.
``--short`` (the CI run, well under a minute) is ``--cycles 300 --seconds 35``.
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import threading
import time
from collections.abc import Callable

from soak_check import PROBLEMS, Tally, leaked_threads
from soak_cycles import Driver, cycle
from soak_hosted import DaytonaDriver, E2BDriver, SpritesDriver
from soak_local import FakeDriver, LocalDriver

from managoat_sandbox import config

DRIVERS: dict[str, Callable[[], Driver]] = {
    "fake": FakeDriver,
    "local": LocalDriver,
    "sprites": SpritesDriver,
    "e2b": E2BDriver,
    "daytona": DaytonaDriver,
}
#: Cycles between fresh sandboxes (bounds session lists and disk use).
RECYCLE = 200
COLUMNS = ("cycles", "faults", "errors", *PROBLEMS)


def soak(
    driver: Driver,
    rng: random.Random,
    *,
    cycles: int,
    seconds: float,
    progress: float,
    began: float,
) -> Tally:
    """Run one adapter's cycles within both bounds; count its leaked threads after."""
    tally = Tally(driver.name)
    baseline = {thread.ident for thread in threading.enumerate()}
    start = time.monotonic()
    try:
        driver.open()
    except Exception as error:
        tally.problem("bad_end", f"could not start: {error!r}")
        return tally
    shown = start
    try:
        for n in range(1, cycles + 1):
            if time.monotonic() - start >= seconds:
                break
            try:
                cycle(driver, rng, n, tally)
                if n % RECYCLE == 0:
                    driver.recycle()
            except Exception as error:
                tally.problem("bad_end", f"cycle {n} crashed: {error!r}")
            if time.monotonic() - shown >= progress:
                shown = time.monotonic()
                print(f"[{shown - began:7.1f} s] {_brief(tally)}", flush=True)
    finally:
        driver.close()
    for name in leaked_threads(baseline):
        tally.problem("leaked_threads", name)
    tally.counts["seconds"] = round(time.monotonic() - start)
    print(f"[{time.monotonic() - began:7.1f} s] done: {_brief(tally)}", flush=True)
    return tally


def _brief(tally: Tally) -> str:
    counts = tally.counts
    return (
        f"{tally.name}: {counts['cycles']} cycles, {counts['faults']} faults "
        f"({counts['errors']} ended in accepted errors), {tally.problems} problems"
    )


def report(tallies: list[Tally]) -> str:
    header = f"{'adapter':<9}" + "".join(f"{c:>15}" for c in (*COLUMNS, "seconds"))
    rows = [
        f"{t.name:<9}" + "".join(f"{t.counts[c]:>15}" for c in (*COLUMNS, "seconds"))
        for t in tallies
    ]
    total = Tally("total")
    for tally in tallies:
        total.counts.update(tally.counts)
    rows.append(f"{'total':<9}" + "".join(f"{total.counts[c]:>15}" for c in (*COLUMNS, "seconds")))
    details = [f"  {t.name} {example}" for t in tallies for example in t.examples]
    return "\n".join([header, *rows, *(["problems (first ones):", *details] if details else [])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=2000, help="at most N cycles per adapter")
    parser.add_argument("--seconds", type=float, default=300.0, help="wall-clock budget, total")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--short", action="store_true", help="the CI run: 300 cycles, 35 s")
    parser.add_argument("--progress", type=float, default=10.0, help="seconds between lines")
    parser.add_argument(
        "--adapters",
        default=",".join(DRIVERS),
        help=f"comma-separated subset of {','.join(DRIVERS)}",
    )
    args = parser.parse_args()
    if args.short:
        args.cycles, args.seconds = 300, 35.0
    names = [name for name in args.adapters.split(",") if name]
    unknown = sorted(set(names) - set(DRIVERS))
    if unknown:
        parser.error(f"unknown adapters {unknown}")
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(
        f"soak: seed {seed}, {args.cycles} cycles per adapter, {args.seconds:.0f} s, "
        f"adapters {','.join(names)}",
        flush=True,
    )
    config.configure("retry", attempts=1)
    # The emulators' server logs the connection resets that injected faults cause.
    logging.getLogger("aiohttp").setLevel(logging.CRITICAL)
    began = time.monotonic()
    tallies = []
    for index, name in enumerate(names):
        share = (args.seconds - (time.monotonic() - began)) / (len(names) - index)
        rng = random.Random(f"{seed}-{name}")
        tallies.append(
            soak(
                DRIVERS[name](),
                rng,
                cycles=args.cycles,
                seconds=share,
                progress=args.progress,
                began=began,
            )
        )
    print(report(tallies))
    failed = sum(t.problems for t in tallies)
    print(
        f"seed {seed}: {sum(t.counts['cycles'] for t in tallies)} cycles in "
        f"{time.monotonic() - began:.1f} s: "
        + ("all problem counts 0" if not failed else f"{failed} problems")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
