"""``mailroom sweep``: a grid of simulations run as Spark tasks, one metrics row per run.

Writes ``OUT/runs.parquet`` (one row per run), ``OUT/summary.csv`` and
``OUT/summary.md`` (means over seeds) and, with matplotlib, plots against n
(``delay.png``, ``buffer.png``, ``metadata.png``, ``sweep.png``/``.svg``).
Exit codes: 0 when every run kept its protocol's promises, 1 when some run
broke one, 2 for a grid that cannot be run or no Spark, with a one-line reason.
"""

from __future__ import annotations

import argparse
import csv
import importlib.util
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mailroom.cli.options import COMMAND_HELP, add_command, fail, first_line
from mailroom.sim.registry import PROTOCOLS
from mailroom.sim.sweep import SweepError, SweepGrid

#: the summary table's columns: (header, column, format)
TABLE = (
    ("protocol", "protocol", "{}"),
    ("n", "n", "{}"),
    ("runs", "runs", "{}"),
    ("delay mean", "delay_mean", "{:.2f}"),
    ("delay p99", "delay_p99", "{:.2f}"),
    ("held mean", "buffer_mean", "{:.2f}"),
    ("held max", "buffer_max", "{:.1f}"),
    ("meta bytes/packet", "meta_mean", "{:.1f}"),
    ("meta bytes/packet p99", "meta_p99", "{:.1f}"),
    ("meta bytes/message", "meta_per_message", "{:.1f}"),
    ("violations", "violations", "{}"),
    ("wall s", "wall_s", "{:.3f}"),
)
#: printed under the table: what the columns measure, with their units
UNITS_NOTE = (
    "means over seeds; delays in simulated time units; held = messages waiting in a "
    "process's mail room; meta = bytes on the wire that are not payload (through the "
    "codec), per data packet and, for all packets, per application message"
)


HELP = COMMAND_HELP["sweep"]
DESCRIPTION = (
    "Run protocol x n x network x seed simulations as Spark tasks (local[*] by default) "
    "and write one metrics row per run."
)


def add_sweep_parser(sub: Any) -> argparse.ArgumentParser:
    sw = add_command(sub, "sweep", help=HELP, description=DESCRIPTION)
    sw.add_argument("--grid", help="a TOML grid file (its settings; options given here win)")
    sw.add_argument(
        "--protocol", help=f"comma-separated, from {','.join(PROTOCOLS)} (default rst,cbcast,ks)"
    )
    sw.add_argument("--n", help="comma-separated process counts, each >= 2 (default 4,8,16)")
    sw.add_argument(
        "--seeds", help="how many seeds (0..K-1), or a comma-separated list (default 3)"
    )
    sw.add_argument("--messages", help="application messages per run (default 50)")
    sw.add_argument("--delay", help="comma-separated MIN:MAX delay ranges (default 1:10)")
    sw.add_argument("--loss", help="comma-separated loss probabilities in [0, 1) (default 0)")
    sw.add_argument("--duplicate", help="comma-separated duplication probabilities (default 0)")
    sw.add_argument(
        "--reliable",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="stack every protocol on the reliable layer (default: when any loss is set)",
    )
    sw.add_argument("--out", default="sweep-out", help="output directory (default sweep-out)")
    sw.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    sw.add_argument("--quiet", action="store_true", help="no progress line")
    return sw


def _fail(reason: str) -> int:
    return fail("sweep", reason)


def _grid(args: argparse.Namespace) -> SweepGrid:
    given = {
        key: getattr(args, key)
        for key in ("protocol", "n", "seeds", "messages", "delay", "loss", "duplicate", "reliable")
        if getattr(args, key) is not None
    }
    if isinstance(given.get("protocol"), str):
        given["protocol"] = given["protocol"].lower()  # names are case-insensitive
    if args.grid:
        return SweepGrid.from_toml(args.grid, given)
    return SweepGrid.from_mapping(given)


def run_sweep_cli(args: argparse.Namespace) -> int:
    try:
        grid = _grid(args)
    except SweepError as exc:
        return _fail(str(exc))
    if importlib.util.find_spec("pyspark") is None:
        return _fail("pyspark is not installed (pip install 'mailroom[spark]')")
    from mailroom.spark import get_session
    from mailroom.spark.sweep import run_sweep

    try:
        spark = get_session(args.master)
    except Exception as exc:  # no Java, a bad master URL...
        return _fail(f"cannot start Spark at {args.master}: {first_line(exc)}")
    runs = grid.runs()
    reliable = " over the reliable layer" if grid.uses_reliable else ""
    print(f"sweeping {len(runs)} runs{reliable} on Spark {args.master}")
    show = not args.quiet and sys.stderr.isatty()
    start = time.perf_counter()
    result = run_sweep(spark, grid, args.out, progress=sys.stderr if show else None)
    elapsed = time.perf_counter() - start
    out = Path(args.out)
    write_summary(result.summary, out)
    print(format_table(result.summary))
    print(UNITS_NOTE)
    print(f"{result.runs} runs in {elapsed:.1f} s; rows written to {result.path}/")
    print(f"summary in {out}/summary.csv and {out}/summary.md")
    try:
        plots = _plot(result.summary, out)
    except ImportError:
        print("plots skipped: matplotlib is not installed (pip install 'mailroom[viz]')")
    else:
        print(f"plots: {', '.join(str(p) for p in plots)}")
    broken = sum(int(r["violations"]) for r in result.summary)
    if broken:
        print(f"{broken} violation(s) of promised properties; see the violations column")
    return 1 if broken else 0


def _plot(summary: Sequence[Mapping[str, Any]], out: Path) -> list[Path]:
    from mailroom.diagram.charts import plot_sweep

    return plot_sweep(summary, out)


def _cells(summary: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Headers and formatted rows; a network column only when the sweep has several."""
    several = len({r["network"] for r in summary}) > 1
    spec = list(TABLE[:1]) + ([("network", "network", "{}")] if several else []) + list(TABLE[1:])
    rows = [[fmt.format(r[col]) for _, col, fmt in spec] for r in summary]
    return [h for h, _, _ in spec], rows


def format_table(summary: Sequence[Mapping[str, Any]]) -> str:
    """The summary as an aligned text table (means over seeds)."""
    headers, rows = _cells(summary)
    widths = [max(len(c) for c in col) for col in zip(headers, *rows, strict=True)]
    lines = [
        "  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True))
        for line in [headers, *rows]
    ]
    return "\n".join(lines)


def write_summary(summary: Sequence[Mapping[str, Any]], out: Path) -> None:
    """``summary.csv`` (every column) and ``summary.md`` (the table) in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    if summary:
        with open(out / "summary.csv", "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(summary[0]))
            writer.writeheader()
            writer.writerows(summary)
    headers, rows = _cells(summary)
    md = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    md += ["| " + " | ".join(r) + " |" for r in rows]
    md += ["", UNITS_NOTE[0].upper() + UNITS_NOTE[1:] + "."]
    (out / "summary.md").write_text("\n".join(md) + "\n", encoding="utf-8")
