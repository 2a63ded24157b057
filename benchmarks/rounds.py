"""The measuring discipline of the benchmarks here: alternating rounds, medians, load.

- **Alternating rounds**: every row (a system, or a protocol) runs once per round,
  in the same order (A, B, C, A, B, C, ...), so a change in the machine's load
  touches every row alike.
- **Medians and ranges**: a row is its median over the rounds and its range
  (min–max); a ratio to a peer is taken *within* each round (row / peer, same
  round) and summarised by the median of those ratios, never as a ratio of medians.
- **Load**: the load average (``/proc/loadavg``) is printed at the start and end of
  every round, and before anything runs a 1-minute load above ``--max-load``
  refuses the run (exit 2), flags it, or waits for the load to fall
  (``--load-policy refuse|flag|wait``).

Nothing here imports mailroom: the same helpers serve every benchmark and peer.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence

import attrs

LOADAVG = "/proc/loadavg"


def loadavg() -> tuple[float, float, float]:
    """The 1-, 5- and 15-minute load averages."""
    try:
        with open(LOADAVG) as f:
            one, five, fifteen = (float(x) for x in f.read().split()[:3])
    except OSError:
        one, five, fifteen = os.getloadavg()
    return one, five, fifteen


def load_text() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*loadavg())


def add_options(parser: argparse.ArgumentParser, rounds: int = 5) -> None:
    """The options every benchmark that follows this discipline takes."""
    parser.add_argument(
        "--rounds", type=int, default=rounds, help="alternating rounds (every row once each)"
    )
    parser.add_argument(
        "--max-load",
        type=float,
        default=1.0,
        help="highest 1-minute load average at which the run starts as it is",
    )
    parser.add_argument(
        "--load-policy",
        choices=("refuse", "flag", "wait"),
        default="refuse",
        help="above --max-load: refuse (exit 2), flag the output, or wait up to "
        "--load-wait seconds for the load to fall (then refuse)",
    )
    parser.add_argument(
        "--load-wait", type=float, default=900.0, help="longest wait under --load-policy wait"
    )


def check_load(args: argparse.Namespace) -> str:
    """Before a run: "" if the 1-minute load is at most ``--max-load``, a flag line
    to print if the policy is ``flag``; exits with 2 and one line on stderr if refused."""
    one = loadavg()[0]
    if one <= args.max_load:
        return ""
    if args.load_policy == "flag":
        return (
            f"FLAGGED: 1-minute load {one:.2f} above --max-load {args.max_load:g} "
            "when the run started; do not quote these figures"
        )
    if args.load_policy == "wait":
        deadline = time.monotonic() + args.load_wait
        while one > args.max_load and time.monotonic() < deadline:
            time.sleep(min(10.0, max(0.0, deadline - time.monotonic())))
            one = loadavg()[0]
        if one <= args.max_load:
            return ""
    print(
        f"refused: 1-minute load {one:.2f} is above --max-load {args.max_load:g} "
        "(wait for an idle machine, or pass --load-policy flag or wait)",
        file=sys.stderr,
    )
    raise SystemExit(2)


def settings_flag(rounds: int, seconds: float | None = None) -> str:
    """A flag line when a run is below the discipline (at least 5 rounds; peak runs
    of at least a second), e.g. a smoke run: "" when it is not."""
    short = []
    if rounds < 5:
        short.append(f"{rounds} rounds (fewer than 5)")
    if seconds is not None and seconds < 1.0:
        short.append(f"{seconds:g} s peak windows (under 1 s)")
    return f"FLAGGED: {' and '.join(short)}; do not quote these figures" if short else ""


def flags(*lines: str) -> str:
    """The flag lines that apply, joined."""
    return "; ".join(line for line in lines if line)


@attrs.frozen
class Spread:
    """A row's median and range over rounds."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            nan = float("nan")
            return cls(nan, nan, nan)
        return cls(statistics.median(values), min(values), max(values))

    def text(self, spec: str = ".2f") -> str:
        """``1.23 (1.01–1.52)``; just the median when the range is one value."""
        if self.low == self.high:
            return format(self.median, spec)
        return f"{self.median:{spec}} ({self.low:{spec}}–{self.high:{spec}})"

    def to_dict(self) -> dict[str, float]:
        return {"median": self.median, "min": self.low, "max": self.high}


def ratios(row: Sequence[float], base: Sequence[float]) -> list[float]:
    """Per-round ratios row[r] / base[r] (rounds where both ran and base is positive)."""
    return [a / b for a, b in zip(row, base, strict=False) if b > 0]


def ratio_spread(rows: Mapping[str, Sequence[float]], name: str, base: str) -> Spread:
    """The median and range of ``name``'s per-round ratios to ``base``."""
    if name not in rows or base not in rows:
        return Spread.of([])
    return Spread.of(ratios(rows[name], rows[base]))


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0 <= q <= 1) by rank; nan for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class RoundLog:
    """Prints and keeps the load at the start and end of every round."""

    def __init__(self, label: str, total: int) -> None:
        self.label = label
        self.total = total
        self.records: list[dict[str, object]] = []

    def start(self, index: int) -> None:
        self.records.append({"round": index + 1, "start": list(loadavg())})
        print(f"{self.label} round {index + 1}/{self.total}: start {load_text()}", flush=True)

    def end(self, index: int) -> None:
        self.records[-1]["end"] = list(loadavg())
        print(f"{self.label} round {index + 1}/{self.total}: end   {load_text()}", flush=True)


def proc_cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of process ``pid`` so far, from /proc/<pid>/stat
    (clock-tick resolution, 10 ms on Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rpartition(")")[2].split()
    # fields[0] is the state (field 3 of stat(5)); utime and stime are fields 14 and 15
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
