"""Replicated objects against PySyncObj, in the same run: operations per second, latency,
fail-over, memory and CPU, at n = 3, 5 and 7 members (processes on 127.0.0.1).

Three systems, each a replicated counter at every member, every member a client of
its own replica keeping ``--in-flight`` calls outstanding (1: one call at a time;
e.g. 200 and 2000 many in flight):

- **mailroom, no checkpoint**: ``AsyncReplica(ReplCounter())`` over a ``Group`` on
  the Sequencer protocol (total order) with safe (uniform) delivery, as
  ``examples/kv`` runs it but without its checkpoint (``peer_replicated.py``);
- **mailroom, sync checkpoints**: the same with the node's checkpoint ``fsync``'d
  at every step (``sync=True``), exactly as the example runs;
- **PySyncObj** 0.3.17 (Raft): its own ``ReplCounter`` battery, its defaults
  (``appendEntriesUseBatch`` on, the log in memory, no journal file), calls with
  callbacks, ``--in-flight`` outstanding per replica: its fastest client pattern
  (``peer_pysyncobj.py``).

PySyncObj writes nothing to disk per command by default, so the like-for-like
comparison is *mailroom, no checkpoint* against PySyncObj; *mailroom, sync
checkpoints* against the same PySyncObj row shows what durability on disk costs
(PySyncObj has no fsync-per-operation setting to match it).

**Figures** (within a measured window of ``--seconds`` after ``--warmup``): *ops/s*:
calls completed (their operation applied at the caller's replica) per second, summed
over the members; *p50*, *p99*: the latency of those calls, from the call to its
result; *CPU µs/op*: the CPU of every process of the run (all threads) per
completed call; *RSS MB*: the largest member's peak resident memory (VmHWM) at the
end of the run. *Fail-over*: every member calls at ``--failover-rate`` per second;
``--kill-at`` seconds in, the driver kills (SIGKILL) PySyncObj's leader or
mailroom's P0 (the sequencer and the group's coordinator); the time from the kill
to the first completed call made after it, at any survivor. Both detect the loss
with PySyncObj's default timings: its leader sends append entries every 0.1 s and a
follower starts an election after 0.4 to 1.4 s without them (``raftMinTimeout``,
``raftMaxTimeout``); mailroom's members send heartbeats every 0.1 s and suspect a
member after 0.4 s of silence (``peer_replicated.Setup``; ``examples/kv`` runs with
0.5 s and 2 s, for machines under load).

**Discipline** (``rounds.py``): ``--rounds`` (5) alternating rounds per n, every row
once per round in the same order, fail-overs included (one kill per system per
round, so the median is over ``--rounds`` kills); medians and ranges; the ratios
mailroom / PySyncObj taken within each round; the load printed every round; a
1-minute load above ``--max-load`` refuses the run (``--load-policy``).

    python benchmarks/replicated_throughput.py [--n 3,5,7] [--in-flight 1,200,2000]
        [--seconds 2] [--warmup 0.5] [--rounds 5] [--kill-at 1.5]
        [--failover-seconds 6] [--json FILE] [--profile DIR] [--smoke] [--gc-freeze]
        [--baseline-src DIR] [--compiled PYTHON]

``--gc-freeze``: every process of every row (PySyncObj's replicas too) calls
``gc.freeze()`` after start-up, before the measured window, as a long-running
service does once it has started (docs/replicated-performance.md, "Speed"): Python's collector
then leaves the start-up heap out of its full passes, which mailroom's members make
often with thousands of calls in flight (measured: 0.53x the CPU per operation of
PySyncObj with it, 0.62-0.65x without, PySyncObj's unchanged).

``--baseline-src DIR`` adds a ``[before]`` row of every mailroom row, its members
importing mailroom from ``DIR`` (another checkout's ``src``, e.g. ``git worktree add
/tmp/old HEAD~1`` then ``--baseline-src /tmp/old/src``), run in the same rounds: a
change's before and after under the same load (fail-over runs leave it out).

``--compiled PYTHON`` adds a ``[compiled]`` row of every mailroom row, right after it
in every round, its members run by ``PYTHON``, the interpreter of a compiled build
(``MAILROOM_COMPILE=1 pip install .``, docs/compiled.md) with nothing on PYTHONPATH,
and a column of its ratio per round to the pure row (compiled / pure); the pure rows'
members import this checkout's ``src``. Every member refuses to start (one line, exit
2) unless ``mailroom.compiled`` says it runs the build its row names, and the run is
refused before any round if ``PYTHON`` does not import a compiled build.

``--smoke`` runs tiny settings (n = 3, one round, short windows) to check that
everything works: its figures mean nothing. Needs ``pip install -e '.[bench]'``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Callable
from typing import Any

import peer_pysyncobj
import peer_replicated
import rounds
from peer_run import GC_FREEZE, attempt, check_compiled

SYSTEMS = {
    "mailroom": "mailroom, no checkpoint",
    "mailroom-sync": "mailroom, sync checkpoints",
    "mailroom-majority": "mailroom, no checkpoint, safe by majority",
    "pysyncobj": "PySyncObj",
    "pysyncobj-nobatch": "PySyncObj, appendEntriesUseBatch off",
}
PYSYNCOBJ = ("pysyncobj", "pysyncobj-nobatch")
BASE = "pysyncobj"
#: the suffix of a mailroom row run from ``--baseline-src``
BEFORE = "-before"
#: the suffix of a mailroom row run by ``--compiled``'s interpreter
COMPILED = "-compiled"
#: (key, what, format) of the peak figures, in the table's order.
MEASURES = (
    ("call_rate", "ops/s", ".0f"),
    ("call_p50_ms", "p50 ms", ".2f"),
    ("call_p99_ms", "p99 ms", ".2f"),
    ("cpu_per_call_us", "CPU µs/op", ".0f"),
    ("rss_mb", "RSS MB/member", ".1f"),
)
SMOKE = [
    "--n",
    "3",
    "--in-flight",
    "1,20",
    "--nobatch-at",
    "1,20",
    "--seconds",
    "1.0",
    "--warmup",
    "0.3",
    "--rounds",
    "1",
    "--kill-at",
    "1.0",
    "--failover-seconds",
    "5.0",
]


def peak(system: str, n: int, in_flight: int, args: argparse.Namespace) -> dict[str, Any]:
    """One peak run of ``system`` with ``in_flight`` calls outstanding per member."""
    if system in PYSYNCOBJ:
        setup = peer_pysyncobj.Setup(in_flight, batch=system == BASE, counter=True)
        return peer_pysyncobj.run_peak(n, args.seconds, args.warmup, setup, args.profile)
    system, build = split(system)
    quorum = "majority" if system == "mailroom-majority" else "all"
    mine = peer_replicated.Setup(
        in_flight,
        sync=system == "mailroom-sync",
        safe_quorum=quorum,
        pythonpath=args.baseline_src if build == "before" else "",
        compiled=args.compiled if build == "compiled" else "",
    )
    return peer_replicated.run_peak(n, args.seconds, args.warmup, mine, args.profile)


def failover(system: str, n: int, args: argparse.Namespace) -> dict[str, Any]:
    """One fail-over run of ``system`` (mailroom without checkpoints)."""
    timing = (n, args.failover_seconds, args.kill_at)
    if system == BASE:
        setup = peer_pysyncobj.Setup(1, batch=True, counter=True)
        return peer_pysyncobj.run_failover(*timing, setup, args.failover_rate)
    return peer_replicated.run_failover(*timing, peer_replicated.Setup(), args.failover_rate)


def row_name(system: str, setting: str) -> str:
    return f"{system}@{setting}"


def split(system: str) -> tuple[str, str]:
    """A row's system and build: ``mailroom-compiled`` is (``mailroom``, ``compiled``)."""
    for suffix in (BEFORE, COMPILED):
        if system.endswith(suffix):
            return system.removesuffix(suffix), suffix.removeprefix("-")
    return system, "pure"


def label(system: str) -> str:
    """A system's column heading (a ``[before]`` or ``[compiled]`` row's: its
    system's, marked)."""
    base, build = split(system)
    return SYSTEMS[base] + (f" [{build}]" if build != "pure" else "")


def measure_n(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Every round at size n: each row's figures per round (None where a run failed)."""
    log = rounds.RoundLog(f"n = {n}", args.rounds)
    runs: dict[str, list[dict[str, Any] | None]] = {}
    for r in range(args.rounds):
        log.start(r)
        for w in args.in_flight:
            for system in systems_at(w, args):
                name = row_name(system, str(w))
                runs.setdefault(name, []).append(attempt(name, peak, system, n, w, args))
        for system in ("mailroom", BASE) if args.failover else ():
            name = row_name(system, "failover")
            got = attempt(name, failover, system, n, args)
            if got is None:  # it did not start (e.g. the replicas saw different leaders)
                got = attempt(f"{name} (again)", failover, system, n, args)
            if got is not None and got["failover_s"] is None:
                print(f"  warning: {name}: no call completed after the kill", flush=True)
                got = None
            runs.setdefault(name, []).append(got)
        log.end(r)
    return {"load": log.records, "runs": runs}


def systems_at(in_flight: int, args: argparse.Namespace) -> tuple[str, ...]:
    """The rows at a setting: PySyncObj with its batching off only at ``--nobatch-at``."""
    skip = () if in_flight in args.nobatch_at else ("pysyncobj-nobatch",)
    return tuple(s for s in args.systems if s not in skip)


def fastest(
    runs: dict[str, list[dict[str, Any] | None]],
    setting: str,
) -> list[dict[str, Any] | None]:
    """Per round, the run of PySyncObj's faster variant at ``setting`` (batching on or
    off, by calls per second): the base of the ratios, its fastest honest setup."""
    on = runs[row_name(BASE, setting)]
    off = runs.get(row_name("pysyncobj-nobatch", setting), [None] * len(on))
    return [
        b if a is None or (b is not None and b["call_rate"] > a["call_rate"]) else a
        for a, b in zip(on, off, strict=True)
    ]


def values(runs: list[dict[str, Any] | None], key: str) -> list[float]:
    """A row's ``key`` per round, nan where the run failed (rounds stay aligned)."""
    return [float(run[key]) if run else math.nan for run in runs]


def spread(xs: list[float]) -> rounds.Spread:
    return rounds.Spread.of([x for x in xs if not math.isnan(x)])


def ratio(row: list[float], base: list[float]) -> rounds.Spread:
    """Per-round ratios row / base, over the rounds where both ran."""
    both = [(a, b) for a, b in zip(row, base, strict=True) if not math.isnan(a + b)]
    return rounds.Spread.of(rounds.ratios([a for a, _ in both], [b for _, b in both]))


def summarise(
    runs: dict[str, list[dict[str, Any] | None]],
    args: argparse.Namespace,
) -> dict[str, dict[str, Any]]:
    """Per setting and measure: each system's spread, and mailroom's ratios to the
    faster PySyncObj variant of each round (fail-over: PySyncObj's default)."""
    out: dict[str, dict[str, Any]] = {}
    settings: list[tuple[str, tuple[tuple[str, str, str], ...], tuple[str, ...]]] = [
        (str(w), MEASURES, systems_at(w, args)) for w in args.in_flight
    ]
    if args.failover:
        settings.append(("failover", (("failover_s", "fail-over s", ".3f"),), ("mailroom", BASE)))
    for setting, measures, systems in settings:
        base_runs = (
            fastest(runs, setting) if setting != "failover" else runs[row_name(BASE, setting)]
        )
        for key, what, spec in measures:
            per = {s: values(runs[row_name(s, setting)], key) for s in systems}
            base = values(base_runs, key)
            entry: dict[str, Any] = {"setting": setting, "measure": what, "spec": spec}
            entry["systems"] = {s: spread(v).to_dict() for s, v in per.items()}
            entry["ratios"] = {
                s: ratio(v, base).to_dict() for s, v in per.items() if s not in PYSYNCOBJ
            }
            entry["vs_pure"] = {  # a [compiled] or [before] row / its pure row, per round
                s: ratio(v, per[split(s)[0]]).to_dict()
                for s, v in per.items()
                if split(s)[1] != "pure" and split(s)[0] in per
            }
            out[f"{setting}/{key}"] = entry
    return out


def table(
    n: int, summary: dict[str, dict[str, Any]], flag: str, count: int, systems: list[str]
) -> str:
    """The markdown table of size n: medians (min–max) and ratios mailroom / PySyncObj."""
    shown = [s for s in systems if any(s in entry["systems"] for entry in summary.values())]
    mine = [s for s in shown if s not in PYSYNCOBJ]
    other = [s for s in mine if split(s)[1] != "pure"]
    head = [label(s) for s in shown] + [f"{label(s)} / PySyncObj" for s in mine]
    head += [f"{label(s)} / pure" for s in other]
    lines = [
        f"n = {n} members on 127.0.0.1, medians (min–max) over {count} rounds; "
        "ratios mailroom / PySyncObj per round, to its faster variant of the round "
        "(ops/s: above 1 is faster; the rest: below 1 is less)"
        f"{'; ' + flag if flag else ''}",
        "| in flight per member | measure | " + " | ".join(head) + " |",
        "|---|---|" + "---|" * len(head),
    ]

    def cell(d: dict[str, float] | None, spec: str) -> str:
        if d is None:
            return "—"
        return rounds.Spread(d["median"], d["min"], d["max"]).text(spec)

    for entry in summary.values():
        cells = [cell(entry["systems"].get(s), entry["spec"]) for s in shown]
        cells += [cell(entry["ratios"].get(s), ".2f") for s in mine]
        cells += [cell(entry.get("vs_pure", {}).get(s), ".2f") for s in other]
        lines.append(f"| {entry['setting']} | {entry['measure']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="3,5,7", help="group sizes")
    p.add_argument("--in-flight", default="1,200,2000", help="calls outstanding per member")
    p.add_argument(
        "--nobatch-at",
        default="1,200,2000",
        help="settings at which PySyncObj runs with appendEntriesUseBatch off too "
        "(its docs: for single-request speed); '' for none",
    )
    p.add_argument("--seconds", type=float, default=2.0, help="the measured window")
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--kill-at", type=float, default=1.5, help="seconds into a fail-over run")
    p.add_argument("--failover-seconds", type=float, default=6.0)
    p.add_argument("--failover-rate", type=float, default=100.0, help="calls/s per member")
    p.add_argument("--json", default="", help="write every figure, per round, here")
    p.add_argument("--profile", default="", help="cProfile every member into this directory")
    p.add_argument("--smoke", action="store_true", help="tiny settings: a check, not figures")
    p.add_argument(
        "--gc-freeze",
        action="store_true",
        help="every process of every row, PySyncObj's too, calls gc.freeze() after start-up",
    )
    p.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help=f"the rows, comma-separated, PySyncObj's among them (default: all of "
        f"{', '.join(SYSTEMS)})",
    )
    p.add_argument(
        "--no-failover", dest="failover", action="store_false", help="leave the fail-over runs out"
    )
    p.add_argument(
        "--baseline-src",
        default="",
        help="adds a [before] row of every mailroom row, its members importing "
        "mailroom from this directory (another checkout's src)",
    )
    p.add_argument(
        "--compiled",
        default="",
        metavar="PYTHON",
        help="adds a [compiled] row of every mailroom row, right after it, its members "
        "run by this interpreter of a compiled build (nothing on PYTHONPATH)",
    )
    rounds.add_options(p)
    args = p.parse_args(argv)
    if args.smoke:  # the smoke settings, then anything given explicitly after them
        args = p.parse_args([*SMOKE, *(argv if argv is not None else sys.argv[1:])])
    try:
        args.sizes = [int(x) for x in args.n.split(",")]
        args.in_flight = [int(x) for x in args.in_flight.split(",")]
        args.nobatch_at = [int(x) for x in args.nobatch_at.split(",") if x]
    except ValueError:
        p.error("--n, --in-flight and --nobatch-at take comma-separated whole numbers")
    args.systems = [x.strip() for x in args.systems.split(",") if x.strip()]
    if unknown := sorted(set(args.systems) - set(SYSTEMS)):
        p.error(f"--systems: no system {', '.join(unknown)} (choose from {', '.join(SYSTEMS)})")
    if BASE not in args.systems:
        p.error(f"--systems must include {BASE}, the base of the ratios")
    if args.baseline_src and not os.path.isdir(os.path.join(args.baseline_src, "mailroom")):
        p.error(f"--baseline-src {args.baseline_src}: no mailroom package there")
    mine = [s for s in args.systems if s not in PYSYNCOBJ]
    if args.compiled:
        check_compiled(args.compiled)
        args.systems = [x for s in args.systems for x in [s, s + COMPILED][: 1 + (s in mine)]]
    args.systems += [s + BEFORE for s in mine] if args.baseline_src else []
    if min(args.sizes) < 2 or min(args.in_flight) < 1 or args.rounds < 1:
        p.error("need n >= 2, at least one call in flight and at least one round")
    if args.kill_at >= args.failover_seconds:
        p.error("--kill-at must fall within --failover-seconds")
    return args


def main(argv: list[str] | None = None, out: Callable[[str], None] = print) -> None:
    args = parse(argv)
    if why := peer_pysyncobj.missing():
        print(f"refused: {why}; {peer_pysyncobj.INSTALL}", file=sys.stderr)
        raise SystemExit(2)
    flag = rounds.flags(rounds.check_load(args), rounds.settings_flag(args.rounds, args.seconds))
    if flag:
        out(flag)
    if args.gc_freeze:  # the children inherit it
        os.environ[GC_FREEZE] = "1"
        out("every process (mailroom's and PySyncObj's) freezes its heap after start-up")
    figures: dict[str, Any] = {"flag": flag, "protocol": peer_replicated.PROTOCOL}
    figures.update(gc_freeze=args.gc_freeze)
    figures.update(systems=SYSTEMS, in_flight=args.in_flight, n={}, compiled=args.compiled)
    tables = []
    for n in args.sizes:
        got = measure_n(n, args)
        got["summary"] = summarise(got["runs"], args)
        figures["n"][str(n)] = got
        tables.append(table(n, got["summary"], flag, args.rounds, args.systems))
        out("\n" + tables[-1])
    out(f"\n{rounds.load_text()} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    if args.profile:
        out(f"cProfile files in {os.path.abspath(args.profile)}/ (profiled rates are not figures)")


if __name__ == "__main__":
    main()
