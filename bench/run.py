"""Every benchmark in one run: ``python bench/run.py [--quick] [--json PATH] [--chart PATH]``.

Prints one table, writes the rows as JSON (``bench/results.json`` unless
``--json`` says otherwise) and, when matplotlib is importable, the chart of
the latency and throughput ratios (``docs/performance.png``, see
:mod:`chart`). Timing lives here, never in pass/fail tests; nothing here
fails the run on a missed target: a row says ``MISS``, and a measurement that
raised says ``error: <class>`` (the detail on stderr) while the rest go on.

Sections, in order (``--only`` picks some):

* ``import``: ``import managoat_sandbox`` vs each official SDK (:mod:`inprocess`);
* ``fake``: facade overhead and first frame on the Fake, the conformance suite's
  run time, and a Fake fan-out;
* ``local``: exec vs ``subprocess.run`` and vs ``bwrap`` per command, first frame, creation
  time, and fan-outs in one sandbox and across many (:mod:`local_sandbox`);
* ``sprites``, ``e2b``, ``daytona``: each against its emulator in a child
  process: ours vs the raw client vs the SDK (:mod:`providers`), then a
  fan-out (:mod:`fanout`);
* ``transfer``: ``upload`` and ``download`` of a tree of many small files and
  of one large file, per provider (``local`` and each emulator), against the
  raw protocol's file API (the local one against ``tar | tar`` on the host)
  (:mod:`transfers`).

``--quick`` takes under two minutes on 2 cores (``transfer`` about two more);
the full run takes about twenty (most of it streaming 256 MiB per sample
through Sprites and E2B), plus the full ``transfer`` section (200 MiB each
way per sample; Daytona's uploads, at a few MiB/s, take most of it).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import fanout
import first_call
import inprocess
import local_sandbox
import providers
import transfers
from measure import Row, guarded, table
from served import emulator_process

import managoat_sandbox as sandbox
from managoat_sandbox import config
from managoat_sandbox.testing import Fake

BENCH = Path(__file__).resolve().parent
MIB = providers.MIB
KIB = 1024


@dataclass(frozen=True)
class Plan:
    """How much work a run does."""

    name: str
    rounds: int  # pairs (or samples) per latency figure
    import_rounds: int
    suite_rounds: int
    fan_out: int
    daytona_fan_out: int  # see fan() below
    sandboxes: int  # local: this many sandboxes ...
    per_sandbox: int  # ... running this many commands each at once
    alive: int  # local: this many sandboxes alive at once (creation time, memory each)
    sizes: providers.Sizes
    transfers: transfers.Sizes


QUICK = Plan(
    "quick",
    rounds=7,
    import_rounds=3,
    suite_rounds=1,
    fan_out=50,
    daytona_fan_out=50,
    sandboxes=5,
    per_sandbox=10,
    alive=20,
    sizes=providers.Sizes(rounds=7, stream_rounds=2, stream_bytes=8 * MIB),
    transfers=transfers.Sizes(
        rounds=3,
        tree_bytes=16 * MIB,
        smallest=4 * KIB,
        largest=64 * KIB,
        per_directory=100,
        file_bytes=16 * MIB,
    ),
)
FULL = Plan(
    "full",
    rounds=31,
    import_rounds=11,
    suite_rounds=5,
    fan_out=500,
    daytona_fan_out=250,
    sandboxes=50,
    per_sandbox=10,
    alive=200,
    sizes=providers.Sizes(rounds=31, stream_rounds=9, stream_bytes=256 * MIB),
    # 1-40 KiB files, 20.5 KiB on average: about 10,000 files in 200 MiB.
    transfers=transfers.Sizes(
        rounds=5,
        tree_bytes=200 * MIB,
        smallest=1 * KIB,
        largest=40 * KIB,
        per_directory=100,
        # The raw reference sends the large file in one request, and the emulators bound
        # a request's body at 64 MiB (ours sends an archive in parts of 32 MiB).
        file_bytes=48 * MIB,
    ),
)
SECTIONS = ("import", "fake", "local", "sprites", "e2b", "daytona", "transfer")


def fake_fan_out(commands: int) -> list[Row]:
    with config.override(adapters={"fake": Fake()}):
        handle = sandbox.create("fake", "bench-fanout")
        return fanout.fan_out_rows("fake", handle, fanout.FAKE, commands)


def hosted(name: str, plan: Plan) -> list[Row]:
    """A provider's comparison rows and its fan-out, against one child-process emulator."""
    provider = providers.PROVIDERS[name]
    with emulator_process(name) as served:
        rows = providers.measure(provider, served, plan.sizes)

        # Each spawned Daytona command is a toolbox session of its own, about nine
        # processes in the emulated sandbox: 500 at once exceed the sandbox's default
        # limit of 4096 processes (the session shells fail to start), so Daytona's
        # fan-out is smaller.
        commands = plan.daytona_fan_out if name == "daytona" else plan.fan_out

        def fan() -> list[Row]:
            with providers.our_sandbox(name, "bench-fanout") as handle:
                return fanout.fan_out_rows(name, handle, fanout.BASH, commands)

        rows += guarded(name, f"fan-out {commands}", fan)
        if name == "sprites":
            rows += guarded(
                name,
                "import + first request",
                lambda: first_call.sprites_rows(served.base_url, plan.import_rounds),
            )
        return rows


def section(name: str, plan: Plan) -> list[Row]:
    """The rows of one section; one that raised outright is one error row."""
    steps: dict[str, list[tuple[str, Callable[[], list[Row]]]]] = {
        "import": [("import times", lambda: inprocess.import_rows(plan.import_rounds))],
        "fake": [
            ("facade and first frame", lambda: inprocess.fake_rows(plan.rounds)),
            ("conformance suite", lambda: inprocess.suite_rows(plan.suite_rounds)),
            (f"fan-out {plan.fan_out}", lambda: fake_fan_out(plan.fan_out)),
        ],
        "local": [
            ("latencies", lambda: local_sandbox.latency_rows(plan.rounds)),
            (
                "fan-outs",
                lambda: local_sandbox.fan_out_rows(plan.fan_out, plan.sandboxes, plan.per_sandbox),
            ),
            (f"{plan.alive} alive", lambda: local_sandbox.alive_rows(plan.alive)),
        ],
        # Each provider's rows fail alone (transfers.rows guards them one by one).
        "transfer": [("transfers", lambda: transfers.rows(plan.transfers))],
    }
    if name not in steps:
        return guarded(name, "emulator", lambda: hosted(name, plan))
    return [row for measurement, rows in steps[name] for row in guarded(name, measurement, rows)]


def machine() -> dict[str, str]:
    """What the figures were measured on."""

    def run(*argv: str) -> str:
        try:
            return subprocess.run(
                argv, capture_output=True, text=True, timeout=10, check=False
            ).stdout.strip()
        except OSError:
            return ""

    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in run("lscpu").splitlines()
            if line.startswith("Model name")
        ),
        "",
    )
    return {
        "cpu": model,
        "nproc": run("nproc"),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def write_chart(results: Path, chart: Path) -> str:
    """Draw the chart with ``bench/chart.py`` if matplotlib is importable; say what happened."""
    if importlib.util.find_spec("matplotlib") is None:
        return "no chart (matplotlib is not installed: pip install -e '.[bench]')"
    drawn = subprocess.run(
        [sys.executable, str(BENCH / "chart.py"), str(results), str(chart)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if drawn.returncode:
        print(drawn.stderr, file=sys.stderr)
        return "no chart: bench/chart.py failed (stderr above)"
    return drawn.stdout.strip()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small N and sizes (< 2 minutes)")
    parser.add_argument(
        "--json",
        type=Path,
        default=BENCH / "results.json",
        help="where to write the results (default: bench/results.json)",
    )
    parser.add_argument(
        "--chart",
        type=Path,
        default=BENCH.parent / "docs" / "performance.png",
        help="where to draw the chart (default: docs/performance.png)",
    )
    parser.add_argument("--no-chart", action="store_true", help="do not draw the chart")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="run only these sections",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    # A terminated run still stops its emulators (their ``finally`` blocks run).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    config.configure("retry", attempts=1)
    began = time.monotonic()
    rows: list[Row] = []
    for name in args.only:
        rows += section(name, plan)
    seconds = time.monotonic() - began
    print(table(rows))
    results = {
        "plan": asdict(plan),
        "seconds": round(seconds, 1),
        "machine": machine(),
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "rows": [row.as_json() for row in rows],
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(results, indent=1) + "\n")
    footer = [
        f"{plan.name} run, {seconds:.0f} s; latency figures: medians of {plan.rounds} "
        f"alternating rounds, ratio = median per-round ours/reference [IQR]",
        f"results: {args.json}",
    ]
    if not args.no_chart:
        footer.append(write_chart(args.json, args.chart))
    print("\n".join(footer))


if __name__ == "__main__":
    main()
