"""The speed bars of the compiled build in one invocation: every row they name, pure and
compiled side by side, the peers in the same rounds, and each row's median ratio
against its bar.

    python benchmarks/speed_bars.py --compiled .venv-compiled/bin/python [--rounds 5]
        [--seconds 1.5] [--replicated-seconds 2] [--warmup 0.5] [--n 3,5,8]
        [--parts net,replicated] [--baseline-src DIR] [--json FILE]
        [--max-load 1.0] [--load-policy refuse|flag|wait]

It runs the rows with ``net_throughput.py``'s and ``replicated_throughput.py``'s own
functions (nothing is measured differently here), every mailroom row twice, by this
checkout's ``src`` (pure) and by ``--compiled``'s interpreter (``[compiled]``), each
right after the other in every round, with the discipline of ``rounds.py``:

- **net** (``net_throughput.py``, ratios to the Redis Streams row of the same round,
  sync redis-py with hiredis and 64 ``XADD`` + ``XREAD`` a trip): CBCAST and the
  Sequencer one ``broadcast`` per message from 64 producer tasks per process (bar
  1.5x at n = 3, 1.2x at n = 5 and 8) and from a single producer per process (1.0x
  at n = 3, 5 and 8); their ``broadcast_many(64)`` at n = 3 (2.0x); Skeen and
  LamportTotalOrder one message per call at n = 3 (0.5x);
- **replicated** (``replicated_throughput.py``, ratios to PySyncObj's faster variant of
  the same round, batching on or off): replicated objects one call at a time, safe
  delivery counting a majority, at n = 3 and 5: operations per second (1.0x) and p50
  latency (mailroom's no higher than PySyncObj's: a ratio of at most 1.0).

The bars are the compiled build's. The last lines give, per row, the median of the
per-round ratios for each build against the bar (``met`` or ``MISSED``), and the
compiled / pure ratio; with ``--baseline-src DIR`` (the ``src`` of the tree before a
change) also every row run from it, ``[before]``, and the pure build's ratio to it
(no slower than 5%: bar 0.95x; p50 no more than 1.05x). ``--rounds`` below 5 or
windows under a second flag the output (a smoke run: its figures mean nothing).

A peer that is not installed (``pip install -e '.[bench]'``, ``apt-get install -y
redis-server``) leaves its rows out with one line saying so, and its bars unmet.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import secrets
import sys
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import net_throughput as net
import peer_pysyncobj
import replicated_throughput as rt
import rounds
from peer_redis import INSTALL as REDIS_INSTALL
from peer_redis import RedisServer
from peer_run import check_compiled

#: (system, how each process sends, {n: bar}) of the net rows: ratios to Redis
NET_BARS: tuple[tuple[str, str, dict[int, float]], ...] = (
    ("CBCAST", "tasks", {3: 1.5, 5: 1.2, 8: 1.2}),
    ("Sequencer", "tasks", {3: 1.5, 5: 1.2, 8: 1.2}),
    ("CBCAST", "one", {3: 1.0, 5: 1.0, 8: 1.0}),
    ("Sequencer", "one", {3: 1.0, 5: 1.0, 8: 1.0}),
    ("CBCAST", "batch", {3: 2.0}),
    ("Sequencer", "batch", {3: 2.0}),
    ("Skeen", "one", {3: 0.5}),
    ("Lamport", "one", {3: 0.5}),
)
SENDS = {"tasks": "64 producers", "one": "1 producer", "batch": "broadcast_many(64)"}
PRODUCERS = 64
BATCH = 64
#: the replicated rows: safe by majority, one call at a time, at these sizes
REPLICATED = "mailroom-majority"
REPLICATED_SIZES = (3, 5)
#: the pure build against the tree before a change: no slower than 5%
NO_SLOWER = 0.95


@attrs.frozen
class Bar:
    """One line of the verdict: a row's median ratio per round to its peer (or, for
    ``pure vs before``, to the same row of the older tree) against its bar."""

    what: str
    ratio: float
    bar: float
    peer: str
    #: the ratio must be at most the bar (a latency), not at least
    at_most: bool = False
    compiled_vs_pure: float = math.nan

    @property
    def met(self) -> bool:
        if math.isnan(self.ratio):
            return False
        return self.ratio <= self.bar if self.at_most else self.ratio >= self.bar

    def text(self) -> str:
        """``CBCAST 64 producers n=3 compiled: 1.31x Redis (bar 1.5x) MISSED; ...``"""
        ratio = "-" if math.isnan(self.ratio) else f"{self.ratio:.2f}x"
        bar = f"{self.bar:.2f}".removesuffix("0") + "x"  # 1.5x, 1.0x, 0.95x
        bound = f"at most {bar}" if self.at_most else bar
        line = f"{self.what}: {ratio} {self.peer} (bar {bound}) {'met' if self.met else 'MISSED'}"
        if not math.isnan(self.compiled_vs_pure):
            line += f"; compiled / pure {self.compiled_vs_pure:.2f}x"
        return line


def median_ratio(row: Sequence[float], base: Sequence[float]) -> float:
    """The median of the per-round ratios row / base over the rounds where both ran
    (a failed run is 0 or nan); nan if none did."""
    both = [(a, b) for a, b in zip(row, base, strict=True) if a > 0 and b > 0]
    return rounds.Spread.of([a / b for a, b in both]).median


# -- net --------------------------------------------------------------------------------------


def net_args(args: argparse.Namespace, systems: list[str]) -> argparse.Namespace:
    """net_throughput.py's arguments for these rows: peak runs only (no latency runs)."""
    argv = ["--systems", ",".join(systems), "--producers", str(PRODUCERS)]
    argv += ["--batch", str(BATCH), "--loads", "", "--rounds", str(args.rounds)]
    argv += ["--seconds", repr(args.seconds), "--warmup", repr(args.warmup)]
    argv += ["--compiled", args.compiled] if args.compiled else []
    argv += ["--baseline-src", args.baseline_src] if args.baseline_src else []
    return net.parser().parse_args(argv)


def net_rows(n: int, nargs: argparse.Namespace, systems: list[str]) -> list[str]:
    """The rows run at size n: Redis, and the mailroom rows with a bar at n, in every
    build, in net_throughput.py's order."""
    wanted = {(system, send) for system, send, bars in NET_BARS if n in bars}

    def keep(row: str) -> bool:
        system, _, tag = row.partition("@")
        return system not in net.MAILROOM or (system, net.Variant.parse(tag).send) in wanted

    return [row for row in net.rows_of(nargs, systems) if keep(row)]


def net_bars(n: int, measured: dict[str, Any], builds: list[str], has_redis: bool) -> list[Bar]:
    """Every net bar at size n, for every build that ran."""
    rates = net.per_round(measured["peaks"], "remote_rate")
    redis = rates.get("redis", [])
    out = []
    for system, send, bars in NET_BARS:
        if n not in bars:
            continue
        pure = rates[net.row_of(system, net.Variant(send))]
        for build in builds:
            mine = rates[net.row_of(system, net.Variant(send, build))]
            what = f"{system} {SENDS[send]} n={n} {build}"
            if build == "before":  # the pure build against the older tree
                out.append(
                    Bar(
                        f"{system} {SENDS[send]} n={n} pure vs before",
                        median_ratio(pure, mine),
                        NO_SLOWER,
                        "before",
                    )
                )
                continue
            vs_redis = median_ratio(mine, redis) if has_redis else math.nan
            extra = median_ratio(mine, pure) if build == "compiled" else math.nan
            out.append(Bar(what, vs_redis, bars[n], "Redis", compiled_vs_pure=extra))
    return out


def run_net(args: argparse.Namespace, flag: str, say: Callable[[str], None]) -> dict[str, Any]:
    systems = ["redis", "CBCAST", "Sequencer", "Skeen", "Lamport"]
    server = RedisServer()
    has_redis = server.start()
    if not has_redis:
        say(f"Redis Streams row skipped: {server.missing}; {REDIS_INSTALL}.")
        systems.remove("redis")
    nargs = net_args(args, systems)
    out: dict[str, Any] = {}
    try:
        for n in args.sizes:
            rows = net_rows(n, nargs, systems)
            measured = net.run_size(n, rows, nargs, server)
            table = net.summary(n, measured, nargs)
            net.print_size(n, table, nargs, flag)
            bars = net_bars(n, measured, args.builds, has_redis)
            out[str(n)] = {"measured": measured, "summary": net.to_json(table), "bars": bars}
    finally:
        server.stop()
    return out


# -- replicated -------------------------------------------------------------------------------


def replicated_args(args: argparse.Namespace) -> argparse.Namespace:
    """replicated_throughput.py's arguments: one call at a time, safe by majority, both
    PySyncObj variants, no fail-over runs."""
    sizes = [n for n in args.sizes if n in REPLICATED_SIZES]
    argv = ["--n", ",".join(map(str, sizes)), "--in-flight", "1", "--nobatch-at", "1"]
    argv += ["--systems", f"{REPLICATED},pysyncobj,pysyncobj-nobatch", "--no-failover"]
    argv += ["--rounds", str(args.rounds), "--warmup", repr(args.warmup)]
    argv += ["--seconds", repr(args.replicated_seconds)]
    argv += ["--compiled", args.compiled] if args.compiled else []
    argv += ["--baseline-src", args.baseline_src] if args.baseline_src else []
    return rt.parse(argv)


def replicated_bars(n: int, runs: dict[str, Any], builds: list[str]) -> list[Bar]:
    """Operations per second and p50 of every build against PySyncObj's faster variant."""
    base = rt.fastest(runs, "1")
    out = []
    for key, what, at_most in (("call_rate", "ops/s", False), ("call_p50_ms", "p50", True)):
        theirs = rt.values(base, key)
        pure = rt.values(runs[rt.row_name(REPLICATED, "1")], key)
        for build in builds:
            suffix = {"pure": "", "compiled": rt.COMPILED, "before": rt.BEFORE}[build]
            mine = rt.values(runs[rt.row_name(REPLICATED + suffix, "1")], key)
            name = f"replicated 1 call at a time (majority) {what} n={n}"
            if build == "before":
                ratio = median_ratio(pure, mine)
                bar = 1 / NO_SLOWER if at_most else NO_SLOWER
                out.append(Bar(f"{name} pure vs before", ratio, bar, "before", at_most))
                continue
            extra = median_ratio(mine, pure) if build == "compiled" else math.nan
            ratio = median_ratio(mine, theirs)
            out.append(Bar(f"{name} {build}", ratio, 1.0, "PySyncObj", at_most, extra))
    return out


def run_replicated(
    args: argparse.Namespace, flag: str, say: Callable[[str], None]
) -> dict[str, Any]:
    if why := peer_pysyncobj.missing():
        say(f"replicated rows skipped: {why}; {peer_pysyncobj.INSTALL}.")
        return {}
    rargs = replicated_args(args)
    out: dict[str, Any] = {}
    for n in rargs.sizes:
        got = rt.measure_n(n, rargs)
        summary = rt.summarise(got["runs"], rargs)
        say("\n" + rt.table(n, summary, flag, rargs.rounds, rargs.systems))
        bars = replicated_bars(n, got["runs"], args.builds)
        out[str(n)] = {"runs": got["runs"], "load": got["load"], "summary": summary}
        out[str(n)]["bars"] = bars
    return out


# -- main -------------------------------------------------------------------------------------


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--compiled",
        default="",
        metavar="PYTHON",
        help="the interpreter of a compiled build (MAILROOM_COMPILE=1 pip install .); "
        "without it only the pure rows run, and the bars are not judged",
    )
    p.add_argument("--n", default="3,5,8", help="group sizes (of 3, 5 and 8)")
    p.add_argument("--parts", default="net,replicated", help="net, replicated or both")
    p.add_argument("--seconds", type=float, default=1.5, help="a net row's measured window")
    p.add_argument(
        "--replicated-seconds", type=float, default=2.0, help="a replicated row's window"
    )
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--baseline-src", default="", help="also run every row from this src")
    p.add_argument("--json", default="", help="also write every figure, per round, here")
    rounds.add_options(p)
    args = p.parse_args(argv)
    try:
        args.sizes = [int(x) for x in args.n.split(",") if x]
    except ValueError:
        p.error(f"--n {args.n}: comma-separated whole numbers")
    if not args.sizes or set(args.sizes) - {3, 5, 8}:
        p.error(f"--n {args.n}: the bars are at n = 3, 5 and 8")
    args.parts = [x for x in args.parts.split(",") if x]
    if not args.parts or set(args.parts) - {"net", "replicated"}:
        p.error(f"--parts {','.join(args.parts)}: choose net, replicated or both")
    if args.baseline_src and not os.path.isdir(os.path.join(args.baseline_src, "mailroom")):
        p.error(f"--baseline-src {args.baseline_src}: no mailroom package there")
    if args.rounds < 1:
        p.error("--rounds: at least one")
    args.builds = (
        ["pure"] + ["compiled"] * bool(args.compiled) + ["before"] * bool(args.baseline_src)
    )
    return args


def main(argv: list[str] | None = None, say: Callable[[str], None] = print) -> list[Bar]:
    args = parse(argv)
    if args.compiled:
        check_compiled(args.compiled)
    flag = rounds.flags(rounds.check_load(args), rounds.settings_flag(args.rounds, args.seconds))
    if flag:
        say(flag)
    os.environ.setdefault("MAILROOM_KEY", secrets.token_hex(32))  # a fresh key per run
    say(f"{' '.join(sys.argv)}\n{rounds.load_text()} at the start; builds {args.builds}")
    results: dict[str, Any] = {"argv": sys.argv, "flag": flag, "builds": args.builds}
    if "net" in args.parts:
        results["net"] = run_net(args, flag, say)
    if "replicated" in args.parts:
        results["replicated"] = run_replicated(args, flag, say)
    bars = [
        b
        for part in ("net", "replicated")
        for v in results.get(part, {}).values()
        for b in v["bars"]
    ]
    say(f"\n{rounds.load_text()} at the end")
    say(
        f"\nBars (medians of the per-round ratios over {args.rounds} rounds; the bars "
        f"are the compiled build's){'; ' + flag if flag else ''}:"
    )
    for bar in bars:
        say(f"  {bar.text()}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=lambda b: attrs.asdict(b) | {"met": b.met})
    return bars


if __name__ == "__main__":
    main()
