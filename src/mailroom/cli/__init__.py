"""The ``mailroom`` command: demo, simulate, check, sweep, node, status."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from mailroom import __version__
from mailroom.cli.check import add_check_parser, run_check
from mailroom.cli.demo import RUNS, introduce, run_demo
from mailroom.cli.demo_group import GROUP_RUNS, run_group_demo
from mailroom.cli.demo_total import TOTAL_RUNS, run_total_demo
from mailroom.cli.options import add_command
from mailroom.cli.simulate import PROTOCOLS, add_simulate_parser, run_simulate
from mailroom.cli.status import add_node_parser, add_status_parser, run_node, run_status
from mailroom.cli.sweep import add_sweep_parser, run_sweep_cli

__all__ = ["PROTOCOLS", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mailroom",
        description="Ordered message delivery: FIFO, causal and total order.",
    )
    parser.add_argument("--version", action="version", version=f"mailroom {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = add_command(
        sub,
        "demo",
        help="Alice, Bob and Carol's messages, step by step, under each protocol",
        description="Alice, Bob and Carol exchange three messages on a network that "
        "reorders them; each step shows the clocks and what waits in the mail room. "
        "The story is told in docs/story.md.",
    )
    demo.add_argument(
        "--protocol",
        type=str.lower,
        choices=[*RUNS, *TOTAL_RUNS, *GROUP_RUNS, "all"],
        default="all",
        help="which protocol to show (default: all)",
    )
    add_simulate_parser(sub)
    add_check_parser(sub)
    add_sweep_parser(sub)
    add_node_parser(sub)
    add_status_parser(sub)
    return parser


def _run(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "demo":
        chosen = [*RUNS, *TOTAL_RUNS, *GROUP_RUNS] if args.protocol == "all" else [args.protocol]
        introduce(sys.stdout)
        run_demo(sys.stdout, [p for p in chosen if p in RUNS])
        run_total_demo(sys.stdout, [p for p in chosen if p in TOTAL_RUNS])
        run_group_demo(sys.stdout, chosen)
        return 0
    if args.command == "simulate":
        return run_simulate(args, args.subparser)
    if args.command == "sweep":
        return run_sweep_cli(args)
    if args.command == "node":
        return run_node(args)
    if args.command == "status":
        return run_status(args)
    return run_check(args, args.subparser)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command; a closed pipe (``mailroom demo | head``) or Ctrl-C ends it quietly."""
    try:
        return _run(argv)
    except BrokenPipeError:
        # the reader went away: silence the flush at exit, as a shell tool would
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except KeyboardInterrupt:
        print("mailroom: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
