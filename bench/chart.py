"""Draw the ratios of a results file: ``python bench/chart.py results.json [out.png]``.

Left: latency ratios ours/reference (lower is better; dashed lines at the
targets 1.0 for the SDKs and 1.2 for the raw clients). Right: throughput
ratios ours/raw (higher is better; dashed lines at 0.8, and at 0.9 for
Sprites). Each bar is the median per-round ratio, its whisker the
interquartile range. Needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

DEFAULT = Path(__file__).resolve().parent.parent / "docs" / "performance.png"
COLOURS = {"raw": "#4c72b0", "SDK": "#dd8452"}


def _bars(
    ax: Any, rows: Sequence[Mapping[str, Any]], title: str, targets: Sequence[tuple[float, str]]
) -> None:
    labels = [
        f"{row['section']}: {row['measurement']}"
        + ("" if " vs " in row["measurement"] else f" vs {row['reference_name']}")
        for row in rows
    ]
    ratios = [row["ratio"] for row in rows]
    below = [row["ratio"] - row["spread"][0] for row in rows]
    above = [row["spread"][1] - row["ratio"] for row in rows]
    positions = range(len(rows))
    ax.barh(
        positions,
        ratios,
        xerr=[below, above],
        capsize=3,
        color=[COLOURS.get(row["reference_name"], "#55a868") for row in rows],
    )
    ax.set_yticks(list(positions), labels, fontsize=8)
    ax.invert_yaxis()
    for n, (value, text) in enumerate(targets):
        ax.axvline(value, linestyle="--", color="grey", linewidth=1)
        ax.text(
            value,
            1.005 + 0.025 * n,
            text,
            fontsize=7,
            ha="center",
            color="grey",
            transform=ax.get_xaxis_transform(),
        )
    ax.set_title(title, fontsize=10, pad=12 + 8 * len(targets))
    ax.set_xlabel("ours / reference (median, IQR whiskers)", fontsize=8)


def draw(results: Mapping[str, Any], out: Path) -> None:
    """Write the chart of ``results`` (the JSON ``bench/run.py`` writes) to ``out``."""
    rows = [row for row in results["rows"] if row.get("ratio") is not None and row.get("spread")]
    latency = [row for row in rows if row["kind"] == "latency"]
    throughput = [row for row in rows if row["kind"] == "throughput"]
    figure = Figure(figsize=(12, max(3.0, 0.45 * len(latency) + 1.5)))
    left, right = figure.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    _bars(
        left,
        latency,
        "Latency (lower is better)",
        [(1.0, "SDK bar"), (1.2, "raw bar"), (2.0, "local bar")],
    )
    _bars(
        right,
        throughput,
        "Throughput (higher is better)",
        [(0.8, "raw bar"), (0.9, "Sprites bar")],
    )
    right.set_xlim(0, max([1.1, *(row["spread"][1] * 1.05 for row in throughput)]))
    machine = results.get("machine", {})
    figure.suptitle(
        f"managoat_sandbox, local and on the emulators: "
        f"{results.get('plan', {}).get('name')} run, "
        f"{machine.get('nproc', '?')} cores, Python {machine.get('python', '?')}",
        fontsize=10,
    )
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110)


def main(argv: Sequence[str]) -> None:
    if not argv:
        raise SystemExit(__doc__.splitlines()[0])
    out = Path(argv[1]) if len(argv) > 1 else DEFAULT
    draw(json.loads(Path(argv[0]).read_text()), out)
    print(f"chart: {out}")


if __name__ == "__main__":
    main(sys.argv[1:])
