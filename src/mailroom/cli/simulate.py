"""``mailroom simulate``: a random workload in the simulator, checked by the reference checkers.

The run is checked for the properties its protocol promises (the others are
shown as "not promised"); ``--trace`` writes it as JSON Lines with a header that
says what produced it, so that ``mailroom check`` checks the same promises.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from mailroom.cli.options import COMMAND_HELP, add_command
from mailroom.cli.simulate_group import group_problem, run_group, write_trace
from mailroom.sim.metrics import UNITS
from mailroom.sim.registry import PROTOCOLS, make_endpoints
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import PROPERTIES, check

__all__ = ["PROTOCOLS", "UNITS", "add_simulate_parser", "run_simulate"]


HELP = COMMAND_HELP["simulate"]
DESCRIPTION = (
    "Run a seeded random workload in the deterministic simulator, print its metrics and "
    "check the properties the protocol promises. Metadata bytes are measured through the "
    "wire codec (every encoded byte but the payload's)."
)


def add_simulate_parser(sub: Any) -> argparse.ArgumentParser:
    sim = add_command(sub, "simulate", help=HELP, description=DESCRIPTION)
    sim.add_argument(
        "--protocol",
        type=str.lower,
        choices=sorted(PROTOCOLS),
        default="rst",
        help="protocol (case-insensitive; default rst)",
    )
    sim.add_argument(
        "-n", "--processes", type=int, default=4, help="number of processes, at least 2"
    )
    sim.add_argument("--messages", type=int, default=100, help="number of messages to send")
    sim.add_argument("--seed", type=int, default=0, help="seed of the workload and the network")
    sim.add_argument(
        "--delay",
        type=float,
        nargs=2,
        default=(1.0, 10.0),
        metavar=("MIN", "MAX"),
        help="uniform packet delay range, in time units (default 1 10)",
    )
    sim.add_argument("--duplicate", type=float, default=0.0, help="duplication probability")
    sim.add_argument(
        "--loss",
        type=float,
        default=0.0,
        help="loss probability; with loss every protocol runs over the reliable layer",
    )
    sim.add_argument(
        "--trace", help="write the trace as JSON Lines (with a header line) to this file"
    )
    grp = sim.add_argument_group(
        "group membership",
        "run every process as a group member (views, flush, view-synchronous delivery) "
        "under a heartbeat failure detector; crashes are crash-stop",
    )
    grp.add_argument(
        "--group",
        action="store_true",
        help="wrap the protocol (a broadcast protocol) in a Group with a HeartbeatDetector",
    )
    grp.add_argument(
        "--crash",
        action="append",
        default=[],
        metavar="PID@TIME",
        type=_at,
        help="process PID stops for good at TIME (repeatable; needs --group)",
    )
    grp.add_argument(
        "--join",
        action="append",
        default=[],
        metavar="PID@TIME",
        type=_at,
        help="a new process PID (>= --processes) joins the running group at TIME "
        "(repeatable; needs --group)",
    )
    grp.add_argument("--heartbeat", type=float, default=1.0, help="heartbeat interval (default 1)")
    grp.add_argument(
        "--suspect-after",
        type=float,
        default=None,
        help="suspect a member silent for this long (default: 3 x the largest delay + 1)",
    )
    return sim


def _at(text: str) -> tuple[int, float]:
    """PID@TIME, as --crash and --join take it."""
    pid, sep, time = text.partition("@")
    try:
        if not sep:
            raise ValueError
        at = (int(pid), float(time))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not PID@TIME (e.g. 2@30)") from None
    if at[0] < 0 or not math.isfinite(at[1]) or at[1] < 0:
        raise argparse.ArgumentTypeError(f"{text!r} needs a pid >= 0 and a time >= 0")
    return at


def _open_trace(path: str) -> Any:
    """Open the trace file before simulating, so a bad path fails fast."""
    try:
        return open(path, "w", encoding="utf-8")
    except OSError as exc:
        print(f"mailroom simulate: cannot write {path}: {exc.strerror or exc}", file=sys.stderr)
        return None


def run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.processes < 2:
        parser.error("--processes must be at least 2")
    if args.messages < 0:
        parser.error("--messages must not be negative")
    lo, hi = args.delay
    if not 0 <= lo <= hi:
        parser.error("--delay needs 0 <= MIN <= MAX")
    if not 0 <= args.duplicate < 1:
        parser.error("--duplicate must be a probability in [0, 1)")
    if not 0 <= args.loss < 1:
        parser.error("--loss must be a probability in [0, 1)")
    _, mode, promised = PROTOCOLS[args.protocol]
    if (args.crash or args.join) and not args.group:
        parser.error("--crash and --join need --group")
    if args.group:
        problem = group_problem(args, mode)
        if problem:
            parser.error(problem)
    out = None
    if args.trace:
        out = _open_trace(args.trace)
        if out is None:
            return 2
    if args.group:
        return run_group(args, out)
    rto = 2 * hi + 1.0 if args.loss else None
    network = NetworkModel(delay=(lo, hi), duplicate=args.duplicate, loss=args.loss)
    sim = Simulation(
        make_endpoints(args.protocol, args.processes, rto=rto),
        network,
        seed=args.seed,
        run=f"{args.protocol}-seed{args.seed}",
    )
    random_workload(sim, args.messages, mode=mode, seed=args.seed)
    sim.run()
    if rto is not None:
        print(f"{args.protocol} over the reliable layer (retransmission after {rto:g})\n")
    for key, value in sim.metrics.summary().items():
        print(f"{key:32s} {value:10.4g} {UNITS.get(key, '')}".rstrip())
    unpromised = tuple(p for p in PROPERTIES if p not in promised)
    report = check(
        sim.trace, promised, mode="summary", not_promised=unpromised, protocol=args.protocol
    )
    print(f"\nchecked {len(sim.trace)} events; {args.protocol} promises {', '.join(promised)}")
    print(report.summary())
    settings = {"messages": args.messages, "reliable": rto is not None}
    if out is not None and not write_trace(sim, args, out, promised, settings):
        return 2
    broken = [p for p in promised if report.count(p)]
    return 1 if broken else 0
