"""Shared measuring machinery: paired samples, medians and spreads, table rows.

Every figure is the median of repeated rounds. A comparison alternates ours
and the reference within each round (ours first in even rounds, the
reference first in odd ones, after one untimed warm-up of each), so drift on
a noisy machine hits both, and its ratio is the median of the per-round
ratios ``ours / reference``, with their interquartile range as the spread.
A row never passes or fails a run: it records whether its target was met,
and a measurement that raised becomes a row ``error: <class>`` (the detail
goes to stderr) while the run goes on.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from managoat_sandbox.providers.local import layout

#: Bound, in seconds, on any single wait (a request, a frame, a command's end).
WAIT = 60.0


@contextlib.contextmanager
def scratch() -> Iterator[Path]:
    """A throwaway directory beside the local provider's default root, on the disk users'
    sandboxes live on: where local sandboxes and the emulators' sandboxes are measured.

    Not under the system's temporary directory, which is not where users' sandboxes
    live. On the machine this project is measured on, what creating a file costs
    depends on the directory tree and the day (something of the host's watches
    parts of the disk: ``/tmp`` cost 0.3-1 ms a file one day, the home directory
    ~0.4 ms the next, other trees 15-35 us), and sandboxes create files at every
    start, spawn and (emulated) command: ``python bench/breakdown.py local`` shows
    that share next to tmpfs.
    """
    parent = layout.default_root().parent
    parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent) as found:
        yield Path(found)


Sample = Callable[[], float]
Call = Callable[[], object]


@dataclass(frozen=True)
class Target:
    """A bar a figure is read against: ``subject`` (``ratio`` or ``ours``) ``op`` ``value``."""

    subject: str
    op: str  # "<", "<=", ">=", "=="
    value: float
    text: str

    def met(self, row: Row) -> bool | None:
        found = row.ratio if self.subject == "ratio" else row.ours
        if found is None:
            return None
        checks: dict[str, Callable[[float, float], bool]] = {
            "<": lambda a, b: a < b,
            "<=": lambda a, b: a <= b,
            ">=": lambda a, b: a >= b,
            "==": lambda a, b: a == b,
        }
        return checks[self.op](found, self.value)


LATENCY_VS_RAW = Target("ratio", "<=", 1.2, "ours/raw <= 1.2")
FASTER_THAN_SDK = Target("ratio", "<", 1.0, "ours/SDK < 1.0")
#: Against an SDK call doing the same job where the SDK's usual call does another (Daytona's
#: synchronous session command: one request each, so at most level with it).
AT_MOST_SDK = Target("ratio", "<=", 1.0, "ours/SDK <= 1.0")
THROUGHPUT_VS_RAW = Target("ratio", ">=", 0.8, "ours/raw >= 0.8")
#: Sprites streams are held to more (the performance issue: >= 0.9 of the raw client).
SPRITES_THROUGHPUT_VS_RAW = Target("ratio", ">=", 0.9, "ours/raw >= 0.9")
NONE_LOST = Target("ours", "==", 0, "must be 0")


@dataclass
class Row:
    """One line of the table (and one object of the JSON results).

    ``ours`` and ``reference`` are medians in ``unit``; ``ratio`` is the
    median per-round ratio and ``spread`` its interquartile range;
    ``kind`` (``latency``/``throughput``) puts a ratio on the chart.
    """

    section: str
    measurement: str
    unit: str = ""
    ours: float | None = None
    reference: float | None = None
    reference_name: str = ""
    ratio: float | None = None
    spread: tuple[float, float] | None = None
    rounds: int = 0
    kind: str = ""
    target: str = ""
    met: bool | None = None
    note: str = ""
    error: str = ""
    bar: float | None = None  # the target's value, when it bounds the ratio
    samples: dict[str, list[float]] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """The 25th and 75th percentiles (both the value itself for one sample)."""
    if len(values) < 2:
        return values[0], values[0]
    cuts = statistics.quantiles(values, n=4, method="inclusive")
    return cuts[0], cuts[2]


@dataclass(frozen=True)
class Paired:
    """Alternating samples of ours and a reference, one ratio per round."""

    ours: list[float]
    reference: list[float]

    @property
    def ratios(self) -> list[float]:
        return [mine / theirs for mine, theirs in zip(self.ours, self.reference, strict=True)]


def rotated(samples: Sequence[Sample], rounds: int, *, warm_up: bool = True) -> list[list[float]]:
    """``rounds`` rounds of one sample of each, after one untimed warm-up each (unless
    ``warm_up`` is off: a caller whose own check has made every call once); the order
    rotates every round (for two samples: which goes first alternates)."""
    if warm_up:
        for sample in samples:
            sample()
    found: list[list[float]] = [[] for _ in samples]
    order = list(range(len(samples)))
    for n in range(rounds):
        shift = n % len(order)
        for index in order[shift:] + order[:shift]:
            found[index].append(samples[index]())
    return found


def paired(ours: Sample, reference: Sample, rounds: int) -> Paired:
    """``rounds`` rounds of one sample each, alternating which goes first."""
    mine, theirs = rotated([ours, reference], rounds)
    return Paired(mine, theirs)


def repeated(sample: Sample, rounds: int) -> list[float]:
    """``rounds`` samples after one untimed warm-up."""
    sample()
    return [sample() for _ in range(rounds)]


def elapsed(fn: Call) -> Sample:
    """A sample that times one call of ``fn`` in seconds."""

    def sample() -> float:
        began = time.perf_counter()
        fn()
        return time.perf_counter() - began

    return sample


def compared(
    section: str,
    measurement: str,
    found: Paired,
    *,
    unit: str,
    scale: float,
    reference_name: str,
    kind: str,
    target: Target | None,
) -> Row:
    """The row of a paired comparison; values are multiplied by ``scale`` into ``unit``."""
    ratios = found.ratios
    row = Row(
        section,
        measurement,
        unit,
        ours=statistics.median(found.ours) * scale,
        reference=statistics.median(found.reference) * scale,
        reference_name=reference_name,
        ratio=statistics.median(ratios),
        spread=quartiles(ratios),
        rounds=len(ratios),
        kind=kind,
        target=target.text if target else "",
        samples={"ours": found.ours, "reference": found.reference},
        bar=target.value if target and target.subject == "ratio" else None,
    )
    row.met = target.met(row) if target else None
    return row


def single(
    section: str,
    measurement: str,
    samples: Sequence[float],
    *,
    unit: str,
    scale: float,
    target: Target | None = None,
    note: str = "",
) -> Row:
    """The row of a figure with no reference: its median, the IQR of the samples as spread."""
    low, high = quartiles(samples)
    row = Row(
        section,
        measurement,
        unit,
        ours=statistics.median(samples) * scale,
        spread=(low * scale, high * scale),
        rounds=len(samples),
        target=target.text if target else "",
        note=note,
        samples={"ours": list(samples)},
    )
    row.met = target.met(row) if target else None
    return row


def failed(section: str, measurement: str, error: BaseException) -> Row:
    """``error: <class>`` in the row; the detail goes to stderr."""
    print(f"{section} {measurement}: {type(error).__name__}: {error}", file=sys.stderr)
    return Row(section, measurement, error=type(error).__name__)


def guarded(section: str, measurement: str, rows: Callable[[], list[Row]]) -> list[Row]:
    """The rows ``rows()`` makes, or one error row named ``measurement`` if it raised."""
    try:
        return rows()
    except Exception as error:
        return [failed(section, measurement, error)]


# -- the table ----------------------------------------------------------------------------------


def _number(value: float) -> str:
    if value == 0 or abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}" if abs(value) >= 1 else f"{value:.3g}"


def _cells(row: Row) -> list[str]:
    if row.error:
        return [row.section, row.measurement, f"error: {row.error}", "", "", row.target, ""]
    unit = f" {row.unit}" if row.unit else ""
    ours = "" if row.ours is None else _number(row.ours) + unit
    reference = ""
    if row.reference is not None:
        reference = f"{_number(row.reference)}{unit} {row.reference_name}".rstrip()
    ratio = ""
    if row.ratio is not None:
        ratio = f"{row.ratio:.2f}"
        if row.spread is not None and row.rounds > 1:
            ratio += f" [{row.spread[0]:.2f}-{row.spread[1]:.2f}]"
    elif row.spread is not None and row.rounds > 1 and row.ours is not None:
        ours += f" [{_number(row.spread[0])}-{_number(row.spread[1])}]"
    status = {True: "ok", False: "MISS", None: ""}[row.met]
    if (
        row.met is False
        and row.bar is not None
        and row.spread is not None
        and row.spread[0] <= row.bar <= row.spread[1]
    ):
        status = "MISS (bar within IQR)"
    return [
        row.section,
        row.measurement,
        ours,
        reference,
        ratio,
        row.target,
        " ".join(part for part in (status, row.note) if part),
    ]


HEADER = ["section", "measurement", "ours [IQR]", "reference", "ratio [IQR]", "target", "status"]


def table(rows: Sequence[Row]) -> str:
    """The rows as one aligned text table."""
    lines = [HEADER, *(_cells(row) for row in rows)]
    widths = [max(len(line[column]) for line in lines) for column in range(len(HEADER))]
    right = {2, 3, 4}
    out = []
    for line in lines:
        cells = [
            cell.rjust(width) if column in right else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(line, widths, strict=True))
        ]
        out.append("  ".join(cells).rstrip())
    return "\n".join(out)
