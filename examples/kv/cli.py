"""The command line: three members at once (the demo), or one member.

python -m examples.kv [--port 8081] [--dir DIR] [--check]
python -m examples.kv --pid N --peers PEERS.TOML --http HOST:PORT [--checkpoint FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from examples.kv.demo import run_demo
from examples.kv.member import run_member
from mailroom.core.errors import LocalError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m examples.kv",
        description="A replicated key-value store over HTTP (three mailroom.net members). "
        "Without --pid: start three members on 127.0.0.1 and print their addresses.",
    )
    demo = p.add_argument_group("the demo (no --pid)")
    demo.add_argument(
        "--port", type=int, default=8081, help="HTTP ports PORT..PORT+2 (0: free ports)"
    )
    demo.add_argument("--dir", help="folder for the key, peer table, checkpoints and logs")
    demo.add_argument("--check", action="store_true", help="write, read back, stop (exit 0)")
    demo.add_argument(
        "--workload",
        type=int,
        metavar="N",
        help="4 clients make N requests each, recorded as histories in --dir for "
        "mailroom check --model dict; then stop",
    )
    one = p.add_argument_group("one member (--pid)")
    one.add_argument("--pid", type=int, help="this member's pid in the peer table")
    one.add_argument("--peers", metavar="PEERS.TOML", help="the peer table (addresses, key_file)")
    one.add_argument("--key-file", help="group key file (default: key_file in the peer table)")
    one.add_argument("--http", default="127.0.0.1:8081", metavar="HOST:PORT", help="HTTP address")
    one.add_argument("--checkpoint", help="checkpoint file: resume from it, keep it current")
    one.add_argument("--history", help="record the replica's history here (JSON Lines)")
    one.add_argument("--protocol", default="sequencer", choices=["sequencer", "skeen", "lamport"])
    one.add_argument("--heartbeat", type=float, default=0.5, help="seconds between heartbeats")
    one.add_argument(
        "--suspect-after", type=float, default=2.0, help="seconds of silence before suspicion"
    )
    one.add_argument(
        "--write-timeout", type=float, default=30.0, help="seconds a write may wait (then 503)"
    )
    one.add_argument(
        "--no-sync", dest="sync", action="store_false", help="do not fsync each step (faster)"
    )
    one.add_argument(
        "--max-connections", type=int, default=256, help="open HTTP connections (past it: 503)"
    )
    one.add_argument(
        "--idle-timeout", type=float, default=10.0, help="seconds to send a request, or closed"
    )
    p.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--http-fd", type=int, help=argparse.SUPPRESS)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.pid is not None and args.peers is None:
        parser.error("--pid needs --peers")
    if args.workload is not None and args.workload < 1:
        parser.error("--workload must be at least 1")
    if args.write_timeout <= 0:
        parser.error("--write-timeout must be positive")
    if args.max_connections < 1 or not args.idle_timeout > 0:
        parser.error("--max-connections and --idle-timeout must be positive")
    try:
        if args.pid is None:
            return run_demo(args)
        return asyncio.run(run_member(args))
    except LocalError as exc:
        print(f"error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
