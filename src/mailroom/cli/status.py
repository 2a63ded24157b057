"""``mailroom node`` (run a group member: what ``python -m mailroom.net`` does) and
``mailroom status ADDRESS`` (ask a running member's status endpoint what it sees)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mailroom.cli.options import COMMAND_HELP, add_command, fail, first_line

#: Seconds ``mailroom status`` waits for an answer.
TIMEOUT = 10.0


def add_node_parser(sub: Any) -> None:
    from mailroom.net import cli as net_cli  # (the runtime: imported when a node runs)

    sub.add_parser(
        "node",
        parents=[net_cli.build_parser("mailroom node", add_help=False)],
        help=COMMAND_HELP["node"],
        description="Run one process of a group over TCP with a scripted workload: "
        "a member of a peer table's group, or of a growable group found from seed "
        "addresses. See docs/runtime.md.",
    )


def add_status_parser(sub: Any) -> None:
    status = add_command(
        sub,
        "status",
        help=COMMAND_HELP["status"],
        description="Ask a running member's status endpoint (mailroom node --status "
        "ADDRESS, a loopback address) for its view, members and incarnations, links, "
        "held messages, retransmissions, checkpoint size and delivery lag.",
    )
    status.add_argument("address", metavar="ADDRESS", help="the member's --status host:port")
    status.add_argument("--json", action="store_true", help="print the status as JSON")


def run_node(args: argparse.Namespace) -> int:
    from mailroom.net import cli as net_cli

    return net_cli.start(args)


def run_status(args: argparse.Namespace) -> int:
    import urllib.request

    from mailroom.net.status_text import render

    url = f"http://{args.address}/status"
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT) as answer:
            data = json.loads(answer.read())
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", None) or exc
        return fail("status", f"cannot read the status at {args.address}: {first_line(reason)}")
    if not isinstance(data, dict) or "pid" not in data:
        return fail("status", f"{args.address} did not answer with a member's status")
    print(json.dumps(data, indent=2) if args.json else render(data))
    return 0


__all__ = ["add_node_parser", "add_status_parser", "run_node", "run_status"]
