"""``python -m mailroom.net``: run one process of a group with a scripted workload.

Each process broadcasts ``--count`` small messages (``--interval`` apart, and
never faster than the reliable layer's window allows), writes ``--done`` (its
counters as JSON) once it has delivered ``--expect`` messages, and keeps
serving its peers (retransmissions, acknowledgements) until SIGTERM or SIGINT,
when it closes cleanly and writes ``--stats``. With ``--checkpoint`` a killed
process restarted with the same arguments resumes where its checkpoint left it:
it does not send again what it already sent.

    python -m mailroom.net --pid 0 --peers peers.toml --protocol cbcast \\
        --count 100 --expect 300 --trace p0.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.core.registry import PROTOCOLS as REGISTRY
from mailroom.core.stack import Stack
from mailroom.net.config import PeerTable, load_key
from mailroom.net.node import Busy, Node, QuietLog
from mailroom.protocols import Reliable

#: The protocols the runtime hosts, from the one registry (mailroom.core.registry).
PROTOCOLS: dict[str, Callable[[int, int], Any]] = {
    name: REGISTRY[name][0]
    for name in ("cbcast", "skeen", "sequencer", "lamport", "fifo", "rst", "unordered")
}
#: Protocols that offer broadcast(); the others send to each peer in turn.
BROADCASTING = {"cbcast", "skeen", "sequencer", "lamport", "fifo", "unordered"}


def make_endpoint(protocol: str, pid: int, n: int, *, reliable: bool, rto: float) -> Any:
    """``Stack(Reliable, protocol)`` (or the protocol alone) for process ``pid`` of ``n``."""
    top = PROTOCOLS[protocol](pid, n)
    return Stack(Reliable(pid, n, rto=rto, max_rto=max(rto, 2.0)), top) if reliable else top


def parse_delays(items: Sequence[str]) -> dict[int, float]:
    delays = {}
    for item in items:
        pid, sep, seconds = item.partition("=")
        if not sep or not pid.isdigit():
            raise LocalError(f"--delay {item!r} is not PID=SECONDS")
        delays[int(pid)] = float(seconds)
    return delays


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m mailroom.net", description=__doc__.split("\n")[0])
    p.add_argument(
        "--pid", type=int, required=True, help="this process's id, 0..n-1, a key of the peer table"
    )
    p.add_argument(
        "--peers",
        required=True,
        metavar="PEERS.TOML",
        help="the peer table: [peers.PID] name and address (host:port) of every member",
    )
    p.add_argument("--key-file", help="group key file (default: key_file in peers.toml, "
                   "else $MAILROOM_KEY)")  # fmt: skip
    p.add_argument("--protocol", choices=sorted(PROTOCOLS), default="cbcast")
    p.add_argument("--no-reliable", action="store_true", help="run the protocol alone")
    p.add_argument("--rto", type=float, default=0.5, help="retransmission timeout (s)")
    p.add_argument("--count", type=int, default=0, help="messages this process sends")
    p.add_argument("--interval", type=float, default=0.0, help="pause between sends (s)")
    p.add_argument("--start-after", type=float, default=0.0, help="pause before sending (s)")
    p.add_argument("--expect", type=int, default=0, help="deliveries before writing --done")
    p.add_argument("--done", help="file written (counters as JSON) when --expect is reached")
    p.add_argument("--stats", help="file written (counters as JSON) at exit")
    p.add_argument("--trace", help="JSON Lines trace of this process's events")
    p.add_argument("--run", default="run", help="run name in the trace")
    p.add_argument("--checkpoint", help="checkpoint file: resume from it, keep it current")
    p.add_argument("--sync", action="store_true",
                   help="fsync the trace and checkpoint log at every step")  # fmt: skip
    p.add_argument("--encrypt", action="store_true",
                   help="encrypt data frames (every member must agree)")  # fmt: skip
    p.add_argument("--handshake-timeout", type=float, default=None, metavar="SECONDS",
                   help="close connections not authenticated in time (default 10)")  # fmt: skip
    p.add_argument("--listen-fd", type=int, help="an inherited listening socket to use")
    p.add_argument("--delay", action="append", default=[], metavar="PID=SECONDS",
                   help="hold frames to PID back (a slow link)")  # fmt: skip
    p.add_argument("-v", "--verbose", action="store_true")
    return p


async def run(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    """Run one process until ``stop`` is set (by default: until SIGTERM or SIGINT)."""
    peers = PeerTable.load(args.peers)
    key = load_key(args.key_file or peers.key_file)
    endpoint = make_endpoint(
        args.protocol, args.pid, peers.n, reliable=not args.no_reliable, rto=args.rto
    )
    listen = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    node = Node(
        endpoint,
        peers,
        key,
        checkpoint=args.checkpoint,
        trace=args.trace,
        run=args.run,
        delays=parse_delays(args.delay),
        listen=listen,
        encrypt=args.encrypt,
        sync=args.sync,
        handshake_timeout=args.handshake_timeout,
    )
    handed = [0]
    reached = asyncio.Event()
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)

    def delivered(_: object) -> None:
        handed[0] += 1
        if args.expect and node.stats.delivered >= args.expect:
            reached.set()

    node.on_deliver = delivered

    async def workload() -> None:
        await asyncio.sleep(args.start_after)
        broadcast = args.protocol in BROADCASTING
        others = [p for p in range(peers.n) if p != args.pid]
        for k in range(node.stats.sent + 1, args.count + 1):
            payload = {"from": args.pid, "k": k}
            while True:
                await node.wait_can_send()
                try:
                    if broadcast:
                        node.broadcast(payload)
                    else:
                        node.send(payload, to=others[k % len(others)])
                    break
                except Busy:  # the node stalled after wait_can_send returned: wait again
                    await asyncio.sleep(0)
            if args.interval:
                await asyncio.sleep(args.interval)
            elif k % 16 == 0:
                await asyncio.sleep(0)

    async def finish() -> None:
        if args.expect:
            if node.stats.delivered >= args.expect:
                reached.set()
            await reached.wait()
            if args.done:
                _write(args.done, node, handed[0])

    asyncio.get_running_loop().set_exception_handler(_quiet_loop_errors())
    await node.start()
    tasks = [asyncio.create_task(workload()), asyncio.create_task(finish())]
    await stop.wait()
    for t in tasks:
        t.cancel()
    await node.close()
    if args.stats:
        _write(args.stats, node, handed[0])
    return 0


def _quiet_loop_errors() -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """The event loop's error handler, rate-limited: an accept that fails with EMFILE
    (asyncio pauses accepting for a second and retries) is logged a few times, then
    counted, not logged with a traceback each time."""
    quiet = QuietLog()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        quiet(logging.ERROR, "%s: %s", context.get("message"), exc)

    return handle


def _write(path: str, node: Node, handed: int | None = None) -> None:
    data = node.stats.to_dict()
    if handed is not None:
        data["handed"] = handed  # deliveries the application received
    data["duplicates"] = int(node.endpoint.duplicates)
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format=f"%(asctime)s P{args.pid} %(levelname)s %(message)s",
    )
    try:
        return asyncio.run(run(args))
    except LocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the listening address is taken
        print(f"error: {exc.strerror or exc}", file=sys.stderr)
        return 2


__all__ = ["PROTOCOLS", "build_parser", "main", "make_endpoint", "run"]
