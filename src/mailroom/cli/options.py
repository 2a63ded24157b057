"""What the subcommands share: how one is added to the parser, and how one fails."""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: Each subcommand's one-line help (``mailroom --help`` lists them without importing
#: the subcommands' modules; each module adds its own parser with this line).
COMMAND_HELP: dict[str, str] = {
    "demo": "Alice, Bob and Carol's messages, step by step, under each protocol",
    "simulate": "simulate a random workload and check the properties its protocol promises",
    "check": "check traces for the properties their protocol promises",
    "sweep": "run a grid of simulations on Spark; metrics per run as Parquet, plots against n",
    "node": "run one member of a group over TCP (as python -m mailroom.net)",
    "status": "what a running member sees: view, members, links, held messages, lag",
}


def add_command(sub: Any, name: str, *, help: str, description: str) -> argparse.ArgumentParser:
    """Add subcommand ``name`` to ``sub``; its parser is ``args.subparser`` once parsed
    (for ``parser.error``: a bad argument is a one-line message and exit 2)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help, description=description)
    parser.set_defaults(subparser=parser)
    return parser


def fail(command: str, reason: str) -> int:
    """``mailroom COMMAND: reason`` (its first line) on stderr; exit status 2."""
    lines = reason.strip().splitlines() or ["failed"]
    print(f"mailroom {command}: {lines[0]}", file=sys.stderr)
    return 2


def first_line(exc: BaseException | str) -> str:
    """The first line of an exception's message (at most 300 characters), or its type."""
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__
