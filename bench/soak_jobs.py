"""Random soak commands and exactly what each must deliver.

Every job carries a marker unique to its cycle (``soak-<n>``), in its output
and in its command line, so a lost, doubled or foreign byte shows, and a
session can be found by its command when the adapter does not hand out its id.
"""

from __future__ import annotations

import random

from soak_check import Expect
from soak_cycles import Job

from managoat_sandbox.errors import Unavailable

#: Exit codes a job picks from (0 weighted up).
CODES = (0, 0, 0, 1, 2, 7, 42, 127, 128, 255)
#: The pause of a slow job, in seconds: long enough to stop or attach mid-run.
PAUSE = 0.2
KILLED = 128 + 9


def _pause_at(rng: random.Random, count: int, slow: bool) -> int:
    """Where a slow job pauses (index into its writes; ``count`` = at the end); -1: never."""
    return rng.randint(0, count) if slow else -1


def fake_job(rng: random.Random, n: int, *, slow: bool) -> Job:
    """A Fake script: stdout and stderr writes, maybe a pause, then an exit or a drop."""
    marker = f"soak-{n}"
    writes = [
        ("err" if rng.random() < 0.2 else "out", f"{marker}.{i}") for i in range(rng.randint(0, 6))
    ]
    pause = _pause_at(rng, len(writes), slow)
    args: list[str] = []
    for i, (stream, text) in enumerate(writes):
        if i == pause:
            args.append(f"sleep:{PAUSE / 4}")
        args.append(f"{stream}:{text}")
    if pause == len(writes):
        args.append(f"sleep:{PAUSE / 4}")
    out = "".join(text for stream, text in writes if stream == "out").encode()
    err = "".join(text for stream, text in writes if stream == "err").encode()
    if rng.random() < 0.15:
        args.append("drop")
        expect = Expect(out, None, (Unavailable,), err)
    else:
        code = rng.choice(CODES)
        args.append(f"exit:{code}")
        expect = Expect(out, code, (), err)
    return Job("emit", tuple(args), expect, marker)


def bash_job(rng: random.Random, n: int, *, slow: bool, signals: bool = False) -> Job:
    """A ``bash -c`` script: echoed lines (some to stderr), maybe a pause, then ``exit``
    (or, with ``signals``, sometimes ``kill -KILL $$``: the real code is 137)."""
    marker = f"soak-{n}"
    lines = [f"{marker}.{i}" for i in range(rng.randint(0, 10))]
    errs = [f"{marker}.e{i}" for i in range(rng.choice((0, 0, 1, 2)))]
    pause = _pause_at(rng, len(lines), slow)
    parts = [f": {marker}"]
    for i, line in enumerate(lines):
        if i == pause:
            parts.append(f"sleep {PAUSE}")
        parts.append(f"echo {line}")
    if pause == len(lines):
        parts.append(f"sleep {PAUSE}")
    parts.extend(f"echo {line} >&2" for line in errs)
    if signals and rng.random() < 0.1:
        code = KILLED
        parts.append("kill -KILL $$")
    else:
        code = rng.choice(CODES)
        parts.append(f"exit {code}")
    expect = Expect(
        "".join(f"{line}\n" for line in lines).encode(),
        code,
        (),
        "".join(f"{line}\n" for line in errs).encode(),
    )
    return Job("bash", ("-c", "; ".join(parts)), expect, marker)
