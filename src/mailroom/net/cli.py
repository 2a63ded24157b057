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

With ``--members`` (or ``--join``) the process is a member of a process group
(``Group`` around the protocol, with a heartbeat failure detector): a member that
stays silent for ``--suspect-after`` seconds is excluded by a view change and
the others go on; ``--join`` starts a joiner that asks the named members to let
it in (or, restarted from its ``--checkpoint``, rejoins as its next
incarnation) and gets the application state (the ids of the messages delivered
so far) at the view that admits it; ``--safe`` makes its deliveries safe (uniform:
a message is delivered once every member of the view holds it, so what any member
delivered survives its crash). Each view is printed as a line:

    view 2 members [0, 1] joined [] left [2]

Without a peer table, ``--size N --seeds ADDRESSES`` makes the process a member of a
growable group found from seed addresses (``mailroom.net.discovery``); ``--status``
and ``--metrics`` serve what it sees (``mailroom.net.status``, ``mailroom.net.metrics``).
``mailroom node`` takes the same options.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import socket
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Excluded, ViewChange
from mailroom.core.endpoint import capabilities
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, Payload
from mailroom.core.registry import PROTOCOLS as REGISTRY
from mailroom.core.stack import Stack
from mailroom.net.collector import YOUNG, tune_collector
from mailroom.net.config import PeerTable, load_key, parse_address
from mailroom.net.discovery import format_address
from mailroom.net.membership import group_endpoint
from mailroom.net.metrics import metrics_routes
from mailroom.net.node import Busy, Node, QuietLog
from mailroom.net.settings import BUSY_GAP, LAZY_ALONE, LAZY_WAIT, MAX_IN_FLIGHT
from mailroom.net.status import serve, status_routes
from mailroom.protocols import Reliable

#: The protocols the runtime hosts: every one of the registry (mailroom.core.registry).
PROTOCOLS: dict[str, Callable[[int, int], Any]] = {
    name: factory for name, (factory, _, _) in sorted(REGISTRY.items())
}
#: Protocols that offer broadcast() on their own; the others send to each peer in turn.
#: (In a group, the registry's mode decides: ``Group`` broadcasts for broadcast protocols.)
BROADCASTING = {"cbcast", "tagged", "skeen", "sequencer", "lamport", "fifo", "unordered"}


def make_endpoint(protocol: str, pid: int, n: int, *, reliable: bool, rto: float) -> Any:
    """``Stack(Reliable, protocol)`` (or the protocol alone) for process ``pid`` of ``n``."""
    top = PROTOCOLS[protocol](pid, n)
    return Stack(Reliable(pid, n, rto=rto, max_rto=max(rto, 2.0)), top) if reliable else top


def parse_pids(text: str, what: str) -> list[int]:
    """``"0,1,2"`` as pids; LocalError if it is not a comma-separated list of them."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    if not items or not all(item.isdigit() for item in items):
        raise LocalError(f"{what} {text!r} is not a comma-separated list of pids")
    return sorted({int(item) for item in items})


class GroupApp:
    """The scripted workload's application in a group: its state is the ids of the
    messages delivered so far, handed to joiners; each view is printed as a line."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.delivered: list[list[int]] = []
        #: the state this process received when it last joined, and the view id it
        #: came with (None: it was a founder)
        self.received: Any = None
        self.received_view: int | None = None
        self.view: list[Any] | None = None
        self.joined = asyncio.Event()

    def deliver(self, m: Message) -> None:
        self.delivered.append([m.id.origin, m.id.seq])

    def on_view(self, change: ViewChange) -> None:
        view = change.view
        if change.state is not None:  # a joiner: the group's state replaces its own
            self.delivered = [[int(o), int(s)] for o, s in change.state]
            self.received = self.delivered[:]
            self.received_view = view.id
        self.view = [view.id, list(view.members)]
        self.joined.set()
        extra = f" state {len(self.delivered)} messages" if change.state is not None else ""
        print(
            f"view {view.id} members {list(view.members)} joined {list(change.joined)} "
            f"left {list(change.left)}{extra}",
            flush=True,
        )

    def on_excluded(self, ex: Excluded) -> None:
        self.delivered = []
        self.view = None
        self.joined.clear()
        again = ", rejoining" if ex.rejoining else ""
        print(f"excluded from view {ex.view.id} members {list(ex.view.members)}{again}", flush=True)

    def state(self, view: int) -> list[list[int]]:
        return [m[:] for m in self.delivered]

    def saved(self) -> dict[str, Any]:
        """What the checkpoint keeps of the application."""
        return {
            "delivered": self.delivered,
            "received": self.received,
            "received_view": self.received_view,
            "view": self.view,
        }

    def resume(self, data: Any) -> None:
        if isinstance(data, dict):
            self.delivered = [[int(o), int(s)] for o, s in data.get("delivered", [])]
            self.received = data.get("received")
            self.received_view = data.get("received_view")
            self.view = data.get("view")


def parse_delays(items: Sequence[str]) -> dict[int, float]:
    delays = {}
    for item in items:
        pid, sep, seconds = item.partition("=")
        if not sep or not pid.isdigit():
            raise LocalError(f"--delay {item!r} is not PID=SECONDS")
        delays[int(pid)] = float(seconds)
    return delays


def build_parser(
    prog: str = "python -m mailroom.net", *, add_help: bool = True
) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0], add_help=add_help)
    p.add_argument(
        "--pid", type=int, required=True, help="this process's id, 0..n-1, a key of the peer table"
    )
    p.add_argument(
        "--peers",
        metavar="PEERS.TOML",
        help="the peer table: [peers.PID] name and address (host:port) of every member "
        "(a growable group's: size, seeds and the addresses known)",
    )
    p.add_argument(
        "--key-file", help="group key file (default: key_file in peers.toml, else $MAILROOM_KEY)"
    )
    p.add_argument(
        "--protocol",
        choices=sorted(PROTOCOLS),
        default="cbcast",
        help="the ordering protocol (inside each view of a group): "
        f"{', '.join(sorted(PROTOCOLS))} (default: cbcast)",
    )
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
    p.add_argument(
        "--sync", action="store_true", help="fsync the trace and checkpoint log at every step"
    )
    p.add_argument(
        "--encrypt", action="store_true", help="encrypt data frames (every member must agree)"
    )
    p.add_argument(
        "--handshake-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="close connections not authenticated in time (default 10)",
    )
    p.add_argument("--listen-fd", type=int, help="an inherited listening socket to use")
    p.add_argument(
        "--linger",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="let the sends of several turns gather this long before they go "
        "(default 0: each turn's sends go when the turn ends)",
    )
    p.add_argument(
        "--busy-gap",
        type=float,
        default=BUSY_GAP,
        metavar="SECONDS",
        help="sends that come within this long of the last ones sent wait for the "
        f"rest of it, gathered (default {BUSY_GAP}; 0: never)",
    )
    p.add_argument(
        "--lazy-wait",
        type=float,
        default=LAZY_WAIT,
        metavar="SECONDS",
        help="acknowledgements and reports nothing waits on go to a peer at "
        f"most once per this long (default {LAZY_WAIT}; 0: at once)",
    )
    p.add_argument(
        "--lazy-alone",
        type=float,
        default=LAZY_ALONE,
        metavar="SECONDS",
        help="... riding the next frame to the peer, or alone once this long passed "
        f"without one (default {LAZY_ALONE}; at least --lazy-wait)",
    )
    p.add_argument(
        "--max-in-flight",
        type=int,
        default=MAX_IN_FLIGHT,
        metavar="N",
        help="wait to send while N of this node's broadcasts are not delivered "
        f"back to it (default {MAX_IN_FLIGHT}; 0: no bound)",
    )
    p.add_argument(
        "--delay",
        action="append",
        default=[],
        metavar="PID=SECONDS",
        help="hold frames to PID back (a slow link)",
    )
    p.add_argument(
        "--gc-young",
        type=int,
        default=0,
        metavar="OBJECTS",
        help="set the garbage collector's young-generation threshold for this "
        f"process: more throughput, a little more latency (e.g. {YOUNG}; "
        "default 0: Python's own)",
    )
    _group_options(p)
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _group_options(p: argparse.ArgumentParser) -> None:
    """The option groups of a group member: membership, a growable group, operations."""
    g = p.add_argument_group("group membership")
    g.add_argument(
        "--members",
        metavar="PIDS",
        help="be a member of a group whose first view is PIDS (e.g. 0,1,2)",
    )
    g.add_argument(
        "--join",
        metavar="PIDS",
        nargs="?",
        const="",
        help="join a running group through these members (e.g. 0,1), or, in a "
        "growable group, through those its seeds name; with an existing "
        "--checkpoint, rejoin as the next incarnation",
    )
    g.add_argument(
        "--safe",
        action="store_true",
        help="safe (uniform) delivery: a message is delivered once every member "
        "of the view holds it (a broadcast protocol)",
    )
    g.add_argument(
        "--safe-quorum",
        choices=("all", "majority"),
        default="all",
        help="with --safe: deliver once every member (all, the default) or a "
        "majority of the view (majority) holds a message",
    )
    g.add_argument(
        "--heartbeat",
        type=float,
        default=0.5,
        metavar="SECONDS",
        help="heartbeat interval of the failure detector (default 0.5)",
    )
    g.add_argument(
        "--suspect-after",
        type=float,
        default=2.0,
        metavar="SECONDS",
        help="suspect a member silent this long (default 2)",
    )
    d = p.add_argument_group("a growable group (found from seed addresses)")
    d.add_argument(
        "--size",
        type=int,
        metavar="N",
        help="the group's size: pids 0..N-1, members found through seeds",
    )
    d.add_argument(
        "--seeds",
        metavar="ADDRESSES",
        help="host:port of members to find the group by, comma-separated",
    )
    d.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="where the others reach this process (default: its peer-table entry, "
        "else its listening socket's name)",
    )
    o = p.add_argument_group("operations")
    o.add_argument(
        "--status",
        metavar="ADDRESS",
        help="serve the status (mailroom status ADDRESS) at a loopback one",
    )
    o.add_argument(
        "--metrics",
        metavar="ADDRESS",
        help="serve Prometheus metrics at http://ADDRESS/metrics "
        "(needs prometheus_client: the metrics extra)",
    )


def table_of(args: argparse.Namespace) -> PeerTable:
    """The peer table the options describe: ``--peers``, made growable by ``--size`` and
    ``--seeds``; without ``--peers``, a growable table of ``--size`` and ``--seeds``."""
    seeds = tuple(parse_address(a.strip()) for a in (args.seeds or "").split(",") if a.strip())
    if args.peers is None:
        if args.size is None:
            raise LocalError(
                "pass --peers PEERS.TOML, or --size N with --seeds for a growable group"
            )
        return PeerTable({}, size=args.size, seeds=seeds)
    table = PeerTable.load(args.peers)
    if args.size is None and not seeds:
        return table
    size = args.size if args.size is not None else table.size or table.n
    return attrs.evolve(table, size=size, seeds=table.seeds + seeds)


def endpoint_of(args: argparse.Namespace, peers: PeerTable) -> tuple[Any, list[int] | None]:
    """The endpoint the options ask for, and the contacts of ``--join`` (else None)."""
    contacts = parse_pids(args.join, "--join") if args.join else [] if args.join == "" else None
    if contacts == [] and not peers.growable:
        raise LocalError("--join without members needs a growable group (--size, --seeds)")
    if args.members is not None and args.join is not None:
        raise LocalError("--members starts a group, --join joins one: pass one of them")
    if args.members is None and args.join is None:
        if args.safe or args.safe_quorum != "all":
            raise LocalError("--safe is a group's option: pass --members or --join too")
        endpoint = make_endpoint(
            args.protocol, args.pid, peers.n, reliable=not args.no_reliable, rto=args.rto
        )
        return endpoint, None
    if args.safe_quorum != "all" and not args.safe:
        raise LocalError("--safe-quorum counts the holders of safe delivery: pass --safe too")
    members = parse_pids(args.members, "--members") if args.members is not None else None
    for pid in contacts or members or []:
        if pid >= peers.n:
            raise LocalError(f"P{pid} is not in the peer table (pids 0..{peers.n - 1})")
    endpoint = group_endpoint(
        args.protocol,
        args.pid,
        peers.n,
        members=members,
        contacts=contacts or (),
        reliable=not args.no_reliable,
        heartbeat=args.heartbeat,
        suspect_after=args.suspect_after,
        safe=args.safe,
        safe_quorum=args.safe_quorum,
    )
    return endpoint, contacts


def node_of(args: argparse.Namespace, app: GroupApp | None) -> Node:
    """The node the options describe, hosting ``app`` (a group's application) if any."""
    peers = table_of(args)
    key = load_key(args.key_file or peers.key_file)
    endpoint, contacts = endpoint_of(args, peers)
    listen = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    hooks: dict[str, Any] = {}
    if app is not None:
        hooks = {
            "app_state": app.saved,
            "on_view": app.on_view,
            "get_state": app.state,
            "on_excluded": app.on_excluded,
        }
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
        rejoin=contacts,
        address=args.address,
        linger=args.linger,
        busy_gap=args.busy_gap,
        lazy_wait=args.lazy_wait,
        lazy_alone=args.lazy_alone,
        max_in_flight=args.max_in_flight or None,
        **hooks,
    )
    if app is not None and node.joined:  # resumed its view: the application too
        app.resume(node.resumed_state)
        app.joined.set()
    return node


class Workload:
    """The scripted workload: ``--count`` sends, counting deliveries up to ``--expect``."""

    def __init__(self, args: argparse.Namespace, node: Node, app: GroupApp | None) -> None:
        self.args = args
        self.node = node
        self.app = app
        self.handed = 0
        self.reached = asyncio.Event()
        node.on_deliver = self.delivered

    def delivered(self, m: Message) -> None:
        self.handed += 1
        if self.app is not None:
            self.app.deliver(m)
        if self.args.expect and self.node.stats.delivered >= self.args.expect:
            self.reached.set()

    async def send(self) -> None:
        """Send messages ``node.stats.sent + 1`` .. ``--count`` (a restart resumes)."""
        args, node = self.args, self.node
        await asyncio.sleep(args.start_after)
        for k in range(node.stats.sent + 1, args.count + 1):
            await self._send_one({"from": args.pid, "k": k}, k)
            if args.interval:
                await asyncio.sleep(args.interval)
            elif k % 16 == 0:
                await asyncio.sleep(0)

    async def _send_one(self, payload: Payload, k: int) -> None:
        args, node = self.args, self.node
        broadcast = "broadcast" in capabilities(node.endpoint)
        while True:
            if self.app is not None:
                await self.app.joined.wait()  # sends wait for a view (and the state)
            await node.wait_can_send()
            view = node.view
            others = [p for p in range(node.peers.n) if p != args.pid]
            if view is not None:  # in a group: unicasts go to the view's other members
                others = [p for p in view.members if p != args.pid]
            try:
                if broadcast:
                    node.broadcast(payload)
                elif others:
                    node.send(payload, to=others[k % len(others)])
                else:
                    raise Busy("no other member to send to")
                return
            except Busy:  # the node stalled after wait_can_send returned: wait again
                await asyncio.sleep(0 if view is None else args.heartbeat)
            except LocalError:  # a group whose view is changing takes no unicast now
                await asyncio.sleep(args.heartbeat)

    async def finish(self) -> None:
        """Write ``--done`` once ``--expect`` deliveries are reached."""
        args = self.args
        if args.expect:
            if self.node.stats.delivered >= args.expect:
                self.reached.set()
            await self.reached.wait()
            if args.done:
                _write(args.done, self.node, self.handed, self.app)


async def run(args: argparse.Namespace, stop: asyncio.Event | None = None) -> int:
    """Run one process until ``stop`` is set (by default: until SIGTERM or SIGINT)."""
    in_group = args.members is not None or args.join is not None
    app = GroupApp(args.pid) if in_group else None
    node = node_of(args, app)
    work = Workload(args, node, app)
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
    asyncio.get_running_loop().set_exception_handler(_quiet_loop_errors())
    wanted = _endpoints(args, node)  # before starting: a missing library is an error now
    await node.start()
    try:
        servers = await _serve(wanted)
    except LocalError:
        await node.close()
        raise
    tasks = [asyncio.create_task(work.send()), asyncio.create_task(work.finish())]
    await stop.wait()
    for t in tasks:
        t.cancel()
    for server in servers:
        server.close()
    await node.close()
    if args.stats:
        _write(args.stats, node, work.handed, app)
    return 0


def _endpoints(args: argparse.Namespace, node: Node) -> list[tuple[str, str, Any, bool]]:
    """(name, address, routes, loopback only) of the endpoints asked for."""
    wanted = []
    if args.status:
        wanted.append(("status", args.status, status_routes(node), True))
    if args.metrics:
        wanted.append(("metrics", args.metrics, metrics_routes(node), False))
    return wanted


async def _serve(wanted: list[tuple[str, str, Any, bool]]) -> list[asyncio.Server]:
    """Start the status endpoint and the metrics; each says where it listens (with port 0,
    the port it took)."""
    servers = []
    for name, address, routes, loopback in wanted:
        server = await serve(address, routes, loopback=loopback)
        servers.append(server)
        host, port = server.sockets[0].getsockname()[:2]
        print(f"{name} at {format_address((host, port))}", flush=True)
    return servers


def _quiet_loop_errors() -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
    """The event loop's error handler, rate-limited: an accept that fails with EMFILE
    (asyncio pauses accepting for a second and retries) is logged a few times, then
    counted, not logged with a traceback each time."""
    quiet = QuietLog()

    def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        quiet(logging.ERROR, "%s: %s", context.get("message"), exc)

    return handle


def _write(path: str, node: Node, handed: int | None = None, app: GroupApp | None = None) -> None:
    data: dict[str, Any] = node.stats.to_dict()
    if handed is not None:
        data["handed"] = handed  # deliveries the application received
    data["duplicates"] = int(node.endpoint.duplicates)
    if app is not None:
        data["view"] = app.view
        data["received_state"] = app.received
        data["received_view"] = app.received_view
    tmp = Path(path + ".tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def main(argv: Sequence[str] | None = None) -> int:
    return start(build_parser().parse_args(argv))


def start(args: argparse.Namespace) -> int:
    """Run the process the parsed options describe (``mailroom node`` shares it)."""
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format=f"%(asctime)s P{args.pid} %(levelname)s %(message)s",
    )
    before = gc.get_threshold()
    try:
        if args.gc_young:
            tune_collector(args.gc_young)
        return asyncio.run(run(args))
    except LocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. the listening address is taken
        print(f"error: {exc.strerror or exc}", file=sys.stderr)
        return 2
    finally:  # (a caller in the same process gets its own collector back)
        gc.set_threshold(*before)


__all__ = [
    "PROTOCOLS",
    "GroupApp",
    "Workload",
    "build_parser",
    "endpoint_of",
    "main",
    "make_endpoint",
    "node_of",
    "parse_pids",
    "run",
    "start",
    "table_of",
]
