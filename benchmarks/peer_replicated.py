"""mailroom's replicated objects as the peer of PySyncObj: n members on 127.0.0.1, one OS
process each (see ``peer_run`` for a run's life), as ``examples/kv`` runs them.

Each member is an ``AsyncReplica`` of a ``ReplCounter`` over ``mailroom.net``: a
``Group`` over the Sequencer protocol (total order; P0 is the sequencer and the
group's coordinator) with safe (uniform) delivery, under a heartbeat detector
(``--heartbeat``, ``--suspect-after``: the driver's ``Setup`` gives 0.1 s and 0.4 s,
PySyncObj's own defaults: it sends append entries every 0.1 s and a follower starts
an election after 0.4 to 1.4 s without them), HMAC-SHA256 frames. Each member
gathers the calls of one turn of its event loop into one group message (a batch),
as ``AsyncReplica`` always does. With ``--sync`` the node keeps a checkpoint (the
replica's base and log ride in it) and ``fsync``s it at every step, as the example
does; without it there is no checkpoint at all (PySyncObj's default keeps its log in memory too).

Every member is a client of its own replica: ``--in-flight W`` coroutines, each
calling ``await r.call.add(1)`` one after the other (W = 1: one call at a time), so
W calls are outstanding per member. A call completes when the operation is applied
at the caller's replica (under safe delivery: once every member holds it).

- **peak**: from the start time for ``--warmup`` + ``--seconds``; the calls that
  complete within the measured window, each with its latency (call to result);
- **fail-over** (``--failover``): every member calls at ``--rate`` per second (open
  loop: a call when due, whatever is outstanding) for ``--seconds``; the driver
  kills P0 (SIGKILL) at ``--kill-at``; the fail-over time is from the kill to the
  first completion of a call made after it, at any survivor (as PySyncObj's).

The driver's side is ``run_peak`` and ``run_failover``; ``replicated_throughput.py``
runs them against ``peer_pysyncobj``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from typing import Any

import attrs
import rounds
from peer_run import (
    PROFILER,
    Children,
    Counts,
    Window,
    build_env,
    child_parser,
    emit,
    rss_mb,
    run_child,
    sleep_until,
    start_signal,
    wait_for_end,
)

from mailroom.net import PeerTable, load_key
from mailroom.net.membership import group_endpoint
from mailroom.replicated import AsyncReplica, ReplCounter

PROTOCOL = "sequencer"
READY_TIMEOUT = 60.0


# -- one member ---------------------------------------------------------------------------


def build(args: argparse.Namespace) -> AsyncReplica:
    """Member ``args.pid``'s replica of a ``ReplCounter`` (its node not started yet)."""
    n, me = args.n, args.pid
    ports = [int(p) for p in args.ports.split(",")]
    table = PeerTable.of({p: f"127.0.0.1:{port}" for p, port in enumerate(ports)})
    endpoint = group_endpoint(
        PROTOCOL,
        me,
        n,
        members=range(n),
        heartbeat=args.heartbeat,
        suspect_after=args.suspect_after,
        safe=True,
        safe_quorum=args.safe_quorum,
    )
    options: dict[str, Any] = {"listen": socket.socket(fileno=args.fd)}
    if args.sync:
        options.update(checkpoint=os.path.join(args.dir, f"p{me}.ckpt"), sync=True)
    return AsyncReplica(ReplCounter(), endpoint, table, load_key(), safe=True, **options)


async def member(args: argparse.Namespace) -> None:
    r = build(args)
    await r.start()
    await asyncio.wait_for(r.wait_joined(), READY_TIMEOUT)
    for _ in range(int(READY_TIMEOUT * 100)):
        if r.node.stats.connected >= args.n - 1:
            break
        await asyncio.sleep(0.01)
    await asyncio.wait_for(r.call.add(0), READY_TIMEOUT)  # the path works end to end
    start = await asyncio.to_thread(start_signal, "0")  # P0: the sequencer
    PROFILER.begin()
    if args.failover:
        result = await probe(r, args, start)
    else:
        result = await peak(r, args, start)
    PROFILER.end()
    await asyncio.to_thread(emit, result)
    await asyncio.to_thread(wait_for_end)
    await r.close()


async def peak(r: AsyncReplica, args: argparse.Namespace, start: float) -> dict[str, Any]:
    """``--in-flight`` clients, each one call at a time, until the window is over."""
    counts = Counts()
    window = Window(counts, start, args.warmup, args.seconds)
    calls: list[float] = []

    async def client() -> None:
        while not window.over.is_set():
            sent = time.monotonic()
            await r.call.add(1)
            now = time.monotonic()
            counts.all += 1
            if window.begin <= now <= window.finish:
                calls.append(now - sent)

    clients = [asyncio.create_task(client()) for _ in range(args.in_flight)]
    await asyncio.to_thread(window.over.wait)
    for task in clients:
        task.cancel()
    await asyncio.gather(*clients, return_exceptions=True)
    result = window.result()
    result.update(calls=calls, failed={})
    return result


async def probe(r: AsyncReplica, args: argparse.Namespace, start: float) -> dict[str, Any]:
    """A call every 1/``--rate`` s for ``--seconds``; each call's (sent, done, ok)."""
    calls: list[tuple[float, float, bool]] = []

    async def call() -> None:
        sent = time.monotonic()
        try:
            await r.call.add(1)
            calls.append((sent, time.monotonic(), True))
        except Exception:  # OutcomeUnknown, a closed node: not a success
            calls.append((sent, time.monotonic(), False))

    tasks = []
    for k in range(round(args.rate * args.seconds)):
        await asyncio.sleep(max(0.0, start + k / args.rate - time.monotonic()))
        tasks.append(asyncio.create_task(call()))
    await asyncio.sleep(1.0)  # the last calls' results
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"probes": list(calls), "rss_mb": rss_mb()}


def child_main() -> None:
    p = child_parser("one mailroom member with a replicated counter")
    p.add_argument("--ports", required=True)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--in-flight", type=int, default=1)
    p.add_argument("--failover", action="store_true")
    p.add_argument("--sync", action="store_true", help="checkpoints, fsync'd every step")
    p.add_argument("--dir", default="", help="where the checkpoints go (with --sync)")
    p.add_argument("--heartbeat", type=float, default=0.5)
    p.add_argument("--suspect-after", type=float, default=2.0)
    p.add_argument("--safe-quorum", choices=("all", "majority"), default="all")
    run_child(lambda a: asyncio.run(member(a)), p.parse_args())


# -- the driver's side ----------------------------------------------------------------------


@attrs.frozen
class Setup:
    """How the members run: ``in_flight`` calls outstanding per member (1: one call at a
    time) and ``sync`` checkpoints (on: fsync'd every step; off: none)."""

    in_flight: int = 1
    sync: bool = False
    #: the failure detector's timings (PySyncObj's: appendEntriesPeriod, raftMinTimeout)
    heartbeat: float = 0.1
    suspect_after: float = 0.4
    #: safe delivery's count of holders: every member ("all") or a majority
    safe_quorum: str = "all"
    #: where the members import mailroom from ("": this checkout): another release's
    #: ``src``, for before/after in the same rounds
    pythonpath: str = ""
    #: the interpreter of a compiled build ("": none), whose members run it with nothing
    #: on PYTHONPATH: the compiled build beside the pure one in the same rounds
    compiled: str = ""

    @property
    def build(self) -> str:
        """Which build the members run (``peer_run.BUILDS``)."""
        return "before" if self.pythonpath else "compiled" if self.compiled else "pure"

    @property
    def tag(self) -> str:
        """The profile files' tag: every field that tells two rows apart (a ``[before]``
        or ``[compiled]`` row's members write beside, not over, this checkout's)."""
        sync = "-sync" * self.sync
        majority = "-majority" * (self.safe_quorum == "majority")
        build = f"-{self.build}" * (self.build != "pure")
        return f"{self.in_flight}{sync}{majority}{build}"

    @property
    def name(self) -> str:
        checkpoint = "sync checkpoints" if self.sync else "no checkpoint"
        majority = ", a majority holds" if self.safe_quorum == "majority" else ""
        return f"{self.in_flight} in flight, {checkpoint}{majority}"


class Members:
    """n member processes on fresh loopback ports (their listening sockets inherited),
    and a temporary directory for their checkpoints; everything ended on exit."""

    def __init__(self, n: int, setup: Setup, extra: list[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="mailroom-replbench-")
        self.socks = []
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(64)
            self.socks.append(s)
        ports = ",".join(str(s.getsockname()[1]) for s in self.socks)
        common = [
            "--role",
            "mailroom",
            "--n",
            str(n),
            "--ports",
            ports,
            "--dir",
            self.dir,
            "--in-flight",
            str(setup.in_flight),
            *(["--sync"] * setup.sync),
            "--heartbeat",
            repr(setup.heartbeat),
            "--suspect-after",
            repr(setup.suspect_after),
            "--safe-quorum",
            setup.safe_quorum,
        ]
        common += extra
        # each member checks it runs the build asked for (a tree from before
        # mailroom.compiled existed counts as pure)
        common += ["--build", "compiled" if setup.build == "compiled" else "pure"]
        script = os.path.abspath(__file__)
        python = setup.compiled or sys.executable
        cmds = [
            [python, script, "--pid", str(p), "--fd", str(s.fileno()), *common]
            for p, s in enumerate(self.socks)
        ]
        env = build_env(setup.build, setup.pythonpath)
        env.setdefault("MAILROOM_KEY", os.urandom(32).hex())
        self.children = Children(cmds, env, [s.fileno() for s in self.socks], READY_TIMEOUT)

    def __enter__(self) -> Children:
        return self.children

    def __exit__(self, *exc: object) -> None:
        try:
            self.children.close()
        finally:
            for s in self.socks:
                s.close()
            shutil.rmtree(self.dir, ignore_errors=True)


def run_peak(
    n: int, seconds: float, warmup: float, setup: Setup, profile: str = ""
) -> dict[str, Any]:
    """One peak run: calls completed per second (summed over the members), their p50
    and p99 latency, the CPU of every process per call, the largest member's memory."""
    extra = ["--seconds", repr(seconds), "--warmup", repr(warmup)]
    if profile:
        extra += ["--profile", profile, "--tag", setup.tag]
    with Members(n, setup, extra) as group:
        group.ready()
        group.start()
        results = group.results(warmup + seconds + 60.0)
    calls = [c for r in results for c in r["calls"]]
    return {
        "call_rate": sum(len(r["calls"]) / r["elapsed"] for r in results),
        "call_p50_ms": 1e3 * rounds.percentile(calls, 0.5),
        "call_p99_ms": 1e3 * rounds.percentile(calls, 0.99),
        "cpu_per_call_us": 1e6 * sum(r["cpu"] for r in results) / max(1, len(calls)),
        "rss_mb": max(r["rss_mb"] for r in results),
        "failed": 0,
    }


def run_failover(
    n: int, seconds: float, kill_at: float, setup: Setup = Setup(), rate: float = 100.0
) -> dict[str, Any]:
    """Kill P0 (the sequencer and coordinator) ``kill_at`` s into a run of calls at
    ``rate`` per member: the time from the kill to the first completion of a call
    made after it, at any survivor (None if none completed within the run)."""
    extra = ["--failover", "--rate", repr(rate), "--seconds", repr(seconds)]
    with Members(n, setup, extra) as group:
        group.ready()
        start = group.start()
        sleep_until(start + kill_at)
        group.procs[0].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        results = group.results(seconds + 30.0, range(1, n))
    after = [done for r in results for sent, done, ok in r["probes"] if ok and sent >= killed]
    return {
        "failover_s": (min(after) - killed) if after else None,
        "rss_mb": max(r["rss_mb"] for r in results),
        "leader": 0,
    }


if __name__ == "__main__":
    child_main()
