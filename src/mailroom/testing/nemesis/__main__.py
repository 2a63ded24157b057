"""``python -m mailroom.testing.nemesis``: run fault schedules against real process groups.

    # one run: 3 CBCAST members, 12 faults drawn from seed 7
    python -m mailroom.testing.nemesis run --system cbcast --faults 12 --seed 7 --out runs/a
    # a scripted schedule (see docs/faults.md for the forms)
    python -m mailroom.testing.nemesis run --system pysyncobj \\
        --schedule "kill 0 for 3; pause 1 for 4" --out runs/b
    # the long matrix: every system x every fault kind, then a mixed schedule each
    python -m mailroom.testing.nemesis matrix --per-kind 5 --mixed 20 --seed 1 --out runs/long
    # the results table of finished runs
    python -m mailroom.testing.nemesis table runs/long
    # the replicated objects (a ReplDict, safe delivery on) under kills and restarts
    python -m mailroom.testing.nemesis run --system replicated --kinds kill --faults 10 --out runs/r
    # ... applying an operation once a majority holds it
    python -m mailroom.testing.nemesis run --system replicated --safe-quorum majority \
        --kinds kill --faults 50 --out runs/m

Needs root, ``ip netns`` and ``nft``; clock faults need libfaketime (Debian
``faketime``), PySyncObj runs need ``pip install 'mailroom[nemesis]'``.
"""

from __future__ import annotations

import argparse
import math
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs

from mailroom.testing.nemesis.faults import (
    KINDS,
    Fault,
    ScheduleError,
    parse_schedule,
    random_schedule,
)
from mailroom.testing.nemesis.group import MailroomGroup
from mailroom.testing.nemesis.network import missing_support
from mailroom.testing.nemesis.raft import RaftGroup
from mailroom.testing.nemesis.replicated import ReplicatedGroup
from mailroom.testing.nemesis.report import findings, load_results, table
from mailroom.testing.nemesis.runner import Judged, RunResult, Timing, run_schedule

SYSTEMS = (
    "cbcast",
    "sequencer",
    "skeen",
    "lamport",
    "fifo",
    "pysyncobj",
    "replicated",
    "replicated-skeen",
    "replicated-lamport",
)
#: What a fault costs on top of its hold, for sizing the workload (s): the harness's gap
#: and a recovery of a few suspicion timeouts.
PER_FAULT = 6.0


def workload(faults: Sequence[Fault], interval: float, timing: Timing) -> int:
    """Messages per member so that sending lasts past the last fault's recovery."""
    seconds = timing.warmup + sum(f.hold + PER_FAULT for f in faults) + 10
    return max(100, math.ceil(seconds / interval))


def _check_quorum(name: str, safe_quorum: str) -> bool:
    """Whether ``name`` is a replicated system; ScheduleError if another is given a
    ``safe_quorum`` other than "all"."""
    replicated = name.startswith("replicated")
    if safe_quorum != "all" and not replicated:
        raise ScheduleError(f"--safe-quorum is for the replicated systems, not {name}")
    return replicated


def make_system(
    name: str,
    n: int,
    folder: Path,
    count: int,
    interval: float,
    suspect_after: float,
    safe_quorum: str = "all",
) -> Judged:
    """The system ``name``; ``safe_quorum`` is for the replicated ones (ScheduleError
    for another system unless "all")."""
    replicated = _check_quorum(name, safe_quorum)
    if name == "pysyncobj":
        return RaftGroup(n, folder, count=count, interval=interval)
    heartbeat = suspect_after / 10
    if replicated:  # "replicated" (sequencer) or "replicated-PROTOCOL"
        protocol = name.partition("-")[2] or "sequencer"
        return ReplicatedGroup(
            protocol,
            n,
            folder,
            count=count,
            interval=interval,
            heartbeat=heartbeat,
            suspect_after=suspect_after,
            safe_quorum=safe_quorum,
        )
    return MailroomGroup(
        name,
        n,
        folder,
        count=count,
        interval=interval,
        heartbeat=heartbeat,
        suspect_after=suspect_after,
    )


def _say(text: str) -> None:
    print(text, flush=True)


def run_one(system: str, faults: list[Fault], folder: Path, args: argparse.Namespace) -> RunResult:
    timing = Timing(recover=args.recover, settle=args.settle)
    count = args.count or workload(faults, args.interval, timing)
    timing = attrs.evolve(timing, workload=count * args.interval)
    sut = make_system(
        system, args.n, folder, count, args.interval, args.suspect_after, args.safe_quorum
    )
    return run_schedule(sut, faults, seed=args.seed, timing=timing, log=_say)


def _schedule(args: argparse.Namespace) -> list[Fault]:
    if args.schedule:
        text = args.schedule
        if text.startswith("@"):
            text = Path(text[1:]).read_text()
        return parse_schedule(text)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else list(KINDS)
    return random_schedule(
        args.seed, args.n, args.faults, kinds, args.suspect_after, mono=args.clock_mono
    )


def cmd_run(args: argparse.Namespace) -> int:
    faults = _schedule(args)
    result = run_one(args.system, faults, Path(args.out), args)
    print(table([{**result.to_dict(), "path": args.out}]))
    print(findings([{**result.to_dict(), "path": args.out}]))
    return 0


def cmd_matrix(args: argparse.Namespace) -> int:
    out = Path(args.out)
    systems = [s.strip() for s in args.systems.split(",")]
    for system in systems:  # before any run
        if system not in SYSTEMS:
            raise ScheduleError(f"unknown system {system!r} (one of {', '.join(SYSTEMS)})")
        _check_quorum(system, args.safe_quorum)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else list(KINDS)
    for system in systems:
        for k, kind in enumerate(kinds):
            faults = random_schedule(
                args.seed + k,
                args.n,
                args.per_kind,
                [kind],
                args.suspect_after,
                mono=args.clock_mono,
            )
            run_one(system, faults, out / system / kind, args)
        if args.mixed:
            faults = random_schedule(
                args.seed, args.n, args.mixed, kinds, args.suspect_after, mono=args.clock_mono
            )
            run_one(system, faults, out / system / "mixed", args)
    results = load_results([out])
    (out / "results.md").write_text(table(results) + "\n" + findings(results))
    print(table(results))
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    results = load_results([Path(p) for p in args.folders])
    print(table(results))
    print(findings(results))
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mailroom.testing.nemesis", description=__doc__.split("\n")[0]
    )
    sub = p.add_subparsers(dest="command", required=True)

    def common(q: argparse.ArgumentParser) -> None:
        q.add_argument("-n", type=int, default=3, help="members (default 3)")
        q.add_argument("--seed", type=int, default=1, help="seed of the drawn schedules")
        q.add_argument("--kinds", help=f"fault kinds to draw from (default all: {','.join(KINDS)})")
        q.add_argument(
            "--clock-mono", action="store_true", help="clock faults move the monotonic clock too"
        )
        q.add_argument("--interval", type=float, default=0.05, help="client pause between sends")
        q.add_argument(
            "--count",
            type=int,
            default=0,
            help="messages per client (default: enough for the schedule)",
        )
        q.add_argument(
            "--suspect-after",
            type=float,
            default=1.0,
            help="mailroom's suspicion timeout (heartbeat a tenth of it)",
        )
        q.add_argument(
            "--recover",
            type=float,
            default=30.0,
            help="how long to wait for the group to deliver after a heal",
        )
        q.add_argument(
            "--settle",
            type=float,
            default=240.0,
            help="how long to wait for the group to form, and for the workload "
            "to end after the last fault (s)",
        )
        q.add_argument(
            "--safe-quorum",
            choices=["all", "majority"],
            default="all",
            help="the replicated systems apply an operation once every member "
            "holds it (all) or a majority does",
        )
        q.add_argument("--out", required=True, help="folder for the run's files")

    run = sub.add_parser("run", help="one system, one schedule")
    run.add_argument("--system", choices=SYSTEMS, default="cbcast")
    run.add_argument("--faults", type=int, default=10, help="faults to draw (default 10)")
    run.add_argument("--schedule", help="a scripted schedule, or @FILE")
    common(run)
    run.set_defaults(func=cmd_run)
    matrix = sub.add_parser("matrix", help="every system x every fault kind (the long run)")
    matrix.add_argument("--systems", default="cbcast,sequencer,skeen,pysyncobj")
    matrix.add_argument("--per-kind", type=int, default=5, help="faults per kind and system")
    matrix.add_argument("--mixed", type=int, default=20, help="faults of a mixed schedule")
    common(matrix)
    matrix.set_defaults(func=cmd_matrix)
    tab = sub.add_parser("table", help="the results table of finished runs")
    tab.add_argument("folders", nargs="+")
    tab.set_defaults(func=cmd_table)
    sub.add_parser("proxy", help="(internal) the fault-injecting proxy", add_help=False)
    sub.add_parser("replica", help="(internal) one PySyncObj replica", add_help=False)
    return p


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["proxy"]:
        from mailroom.testing.nemesis.proxy import main as proxy_main

        return proxy_main(argv[1:])
    if argv[:1] == ["replica"]:
        from mailroom.testing.nemesis.raft_replica import main as replica_main

        return replica_main(argv[1:])
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the run's namespaces and processes are removed
    signal.signal(signal.SIGTERM, _interrupted)
    if args.func is not cmd_table:
        why = missing_support()
        if why is not None:
            print(f"error: the nemesis {why}", file=sys.stderr)
            return 2
    try:
        return int(args.func(args))
    except ScheduleError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
