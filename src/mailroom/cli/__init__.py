"""The ``mailroom`` command: demo, simulate, check, sweep."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from mailroom.cli.check import add_check_parser, run_check
from mailroom.cli.demo import RUNS, run_demo
from mailroom.cli.demo_total import TOTAL_RUNS, run_total_demo
from mailroom.cli.simulate import PROTOCOLS, run_simulate
from mailroom.cli.sweep import add_sweep_parser, run_sweep_cli


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mailroom",
        description="Ordered message delivery: FIFO, causal and total order.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="seed 000's Alice/Bob/Carol run, step by step")
    demo.add_argument(
        "--protocol",
        choices=[*RUNS, *TOTAL_RUNS, "all"],
        default="all",
        help="which protocol to show (default: all)",
    )

    sim = sub.add_parser("simulate", help="simulate a random workload and check the trace")
    sim.add_argument("--protocol", choices=sorted(PROTOCOLS), default="rst")
    sim.add_argument("-n", "--processes", type=int, default=4, help="number of processes")
    sim.add_argument("--messages", type=int, default=100, help="number of messages to send")
    sim.add_argument("--seed", type=int, default=0)
    sim.add_argument(
        "--delay",
        type=float,
        nargs=2,
        default=(1.0, 10.0),
        metavar=("MIN", "MAX"),
        help="uniform packet delay range",
    )
    sim.add_argument("--duplicate", type=float, default=0.0, help="duplication probability")
    sim.add_argument("--trace", help="write the trace as JSON Lines to this file")

    add_check_parser(sub)
    add_sweep_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        chosen = [*RUNS, *TOTAL_RUNS] if args.protocol == "all" else [args.protocol]
        run_demo(sys.stdout, [p for p in chosen if p in RUNS])
        run_total_demo(sys.stdout, [p for p in chosen if p in TOTAL_RUNS])
        return 0
    if args.command == "simulate":
        return run_simulate(args, parser)
    if args.command == "sweep":
        return run_sweep_cli(args)
    return run_check(args, parser)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
