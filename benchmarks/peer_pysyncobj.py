"""PySyncObj (Raft) as the total-order peer: n replicas on 127.0.0.1, one OS process each.

PySyncObj is what a Python team picks for replicated state: inherit from
``SyncObj``, mark the mutating methods ``@replicated``, and every call is ordered
by the Raft leader and applied at every replica. Here the replicated object is a
log of 16-byte messages (``put(origin, k, payload)``); PySyncObj runs with its
defaults (``SyncObjConf()``: batched ``appendEntries``, in-memory log compaction
every 5,000 entries, a tick thread every 50 ms or on network events).

Counted the way mailroom counts deliveries: a command applied at a replica is a
delivery there; *remote* deliveries are those at a replica other than the one
that submitted the command, and *ordered/s* is commands applied at every member
per second (deliveries / n). Every replica submits commands, one per call
(``obj.put(..., callback=done)``), and:

- **peak** (``--in-flight W``): keeps W commands of its own outstanding (submitted,
  callback not yet called; a new one goes as each callback arrives), for the
  measured window; W = 1 is one call at a time, the way a blocking client calls;
  the figures include each call's latency (submit to callback) in the window;
- **paced** (``--rate r --count c``): submits command k when due, open loop, as
  PySyncObj's own benchmark does; each command's latency is from when it was due
  to its application at the last other replica (as mailroom's rows), and the
  call's latency is to its callback;
- **fail-over** (``--failover``): submits at ``--rate`` for ``--seconds``; the
  driver kills the leader (SIGKILL) at ``--kill-at`` seconds; the fail-over time
  is from the kill to the first success of a command submitted after it, at any
  survivor.

The driver side (``peak``, ``paced``, ``failover``) starts a fresh cluster per run
and is what ``net_throughput.py`` uses for its PySyncObj row; run as a script
without ``--role`` it is the PySyncObj half of the replicated-object benchmark
(operations per second with one call at a time and with many in flight, p50/p99
call latency, fail-over time, memory per member, at n = 3, 5, 7)::

    python benchmarks/peer_pysyncobj.py [--n 3,5,7] [--in-flight 1,1000] [--seconds 2]
        [--rounds 5] [--kill-at 1.5] [--json FILE]

Needs ``pip install -e '.[bench]'`` (``pysyncobj``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import rounds
from peer_run import (
    PROFILER,
    Children,
    Clock,
    Counts,
    Window,
    attempt,
    child_parser,
    emit,
    latencies,
    payload,
    peak_figures,
    rss_mb,
    run_child,
    sleep_until,
    start_signal,
    wait_for_end,
)

INSTALL = "install it with `pip install -e '.[bench]'` (pysyncobj)"
READY_TIMEOUT = 60.0


def missing() -> str:
    """Why PySyncObj cannot run here ("" if it can)."""
    try:
        import pysyncobj  # noqa: F401
    except ImportError:
        return "Python package 'pysyncobj' is missing"
    return ""


# -- one replica ----------------------------------------------------------------------------


def make_log(args: argparse.Namespace, addrs: list[str], clock: Clock | None) -> Any:
    """This replica's SyncObj: a log of messages that counts what it applies."""
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class Log(SyncObj):  # type: ignore[misc]
        def __init__(self) -> None:
            # set before SyncObj.__init__: not part of the replicated (serialised) state
            self.me = args.pid
            self.counts = Counts()
            self.clock = clock
            self.expect = args.n * args.count
            self.done = threading.Event()
            conf = SyncObjConf(appendEntriesUseBatch=not args.no_batch)
            super().__init__(addrs[args.pid], [a for a in addrs if a != addrs[args.pid]], conf)

        @replicated  # type: ignore[misc]
        def put(self, origin: int, k: int, text: str) -> None:
            if k < 0:
                return  # the check that the path works, before the run: not counted
            c = self.counts
            c.all += 1
            if origin != self.me:
                c.remote += 1
                if self.clock is not None:
                    self.clock.got(origin, k, time.monotonic())
            if c.all == self.expect:
                self.done.set()

    return Log()


def make_counter(args: argparse.Namespace, addrs: list[str]) -> Any:
    """This replica's SyncObj holding PySyncObj's own ``ReplCounter`` battery; ``put``
    adds 1 to it (the same call shape as the log's, so every driver here works)."""
    from pysyncobj import SyncObj, SyncObjConf
    from pysyncobj.batteries import ReplCounter

    class Counted(SyncObj):  # type: ignore[misc]
        def __init__(self) -> None:
            self.me = args.pid
            self.counts = Counts()  # stays 0: a counter's rate is its calls completed
            self.done = threading.Event()
            self.counter = ReplCounter()
            conf = SyncObjConf(appendEntriesUseBatch=not args.no_batch)
            others = [a for a in addrs if a != addrs[args.pid]]
            super().__init__(addrs[args.pid], others, conf, consumers=[self.counter])

        def put(self, origin: int, k: int, text: str, **call: Any) -> Any:
            return self.counter.add(1, **call)

    return Counted()


def leader_pid(obj: Any, addrs: list[str]) -> int:
    leader = obj._getLeader()
    return addrs.index(str(leader)) if leader is not None and str(leader) in addrs else -1


def settled_leader(obj: Any, addrs: list[str], calm: float = 0.5) -> int:
    """The leader once this replica has seen the same one for ``calm`` seconds (an
    election in the start-up can move it; at most ``READY_TIMEOUT``)."""
    deadline = time.monotonic() + READY_TIMEOUT
    seen, since = leader_pid(obj, addrs), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = leader_pid(obj, addrs)
        if now != seen or now < 0:
            seen, since = now, time.monotonic()
        elif time.monotonic() - since >= calm:
            break
    return seen


def replica(args: argparse.Namespace) -> None:
    addrs = [f"127.0.0.1:{p}" for p in args.ports.split(",")]
    clock = Clock(args) if args.rate and not args.failover else None
    obj = make_counter(args, addrs) if args.counter else make_log(args, addrs, clock)
    deadline = time.monotonic() + READY_TIMEOUT
    while (obj._getLeader() is None or not obj.isReady()) and time.monotonic() < deadline:
        time.sleep(0.05)
    obj.put(args.pid, -1, "", sync=True, timeout=READY_TIMEOUT)  # the path works end to end
    start = start_signal(str(settled_leader(obj, addrs)))
    PROFILER.begin()
    if args.failover:
        result = probe(obj, args, start)
    elif clock is not None:
        result = paced(obj, args, clock, start)
    else:
        result = peak(obj, args, start)
    PROFILER.end()
    result["leader"] = leader_pid(obj, addrs)
    emit(result)
    wait_for_end()
    obj.destroy()


def peak(obj: Any, args: argparse.Namespace, start: float) -> dict[str, Any]:
    """Keep ``--in-flight`` commands outstanding until the window is over."""
    window = Window(obj.counts, start, args.warmup, args.seconds)
    slots = threading.Semaphore(args.in_flight)
    failed: Counter[int] = Counter()
    calls: list[float] = []

    def call(k: int) -> None:
        sent = time.monotonic()

        def done(_: object, err: int) -> None:
            now = time.monotonic()
            if err:
                failed[err] += 1
            elif window.begin <= now <= window.finish:
                calls.append(now - sent)
            slots.release()

        obj.put(args.pid, k, payload(k), callback=done)

    k = 0
    while not window.over.is_set():
        if slots.acquire(timeout=0.05):
            call(k)
            k += 1
    result = window.result()
    result.update(calls=calls, failed=dict(failed))
    return result


def paced(obj: Any, args: argparse.Namespace, clock: Clock, start: float) -> dict[str, Any]:
    """Command k when due, open loop; wait until every replica's commands are applied."""
    failed: Counter[int] = Counter()
    calls: list[float] = []

    def done_at(due: float) -> Callable[[object, int], None]:
        def done(_: object, err: int) -> None:
            if err:
                failed[err] += 1
            else:
                calls.append(time.monotonic() - due)

        return done

    clock.cpu0 = time.process_time()
    for k in range(args.count):
        due = clock.due(k, start)
        sleep_until(due)
        clock.sent.append(due)
        obj.put(args.pid, k, payload(k), callback=done_at(due))
    obj.done.wait(READY_TIMEOUT if not failed else 1.0)
    result = clock.result(obj.counts)
    result.update(calls=calls, failed=dict(failed))
    return result


def probe(obj: Any, args: argparse.Namespace, start: float) -> dict[str, Any]:
    """Submit at ``--rate`` for ``--seconds`` from the start; each call's (sent, done, ok)."""
    calls: list[tuple[float, float, bool]] = []

    def call(k: int, sent: float) -> None:
        def done(_: object, err: int) -> None:
            calls.append((sent, time.monotonic(), not err))

        obj.put(args.pid, k, payload(k), callback=done)

    total = round(args.rate * args.seconds)
    for k in range(total):
        due = start + k / args.rate
        sleep_until(due)
        call(k, time.monotonic())
    time.sleep(1.0)  # the last calls' callbacks
    return {"probes": list(calls), "rss_mb": rss_mb()}


def child_main() -> None:
    p = child_parser("one PySyncObj replica")
    p.add_argument("--ports", required=True)
    p.add_argument("--in-flight", type=int, default=1000)
    p.add_argument("--failover", action="store_true")
    p.add_argument("--no-batch", action="store_true", help="appendEntriesUseBatch=False")
    p.add_argument("--counter", action="store_true", help="a ReplCounter, not the log")
    run_child(replica, p.parse_args())


# -- the driver's side ----------------------------------------------------------------------


def free_ports(n: int) -> list[int]:
    """n loopback ports free now (PySyncObj binds them itself)."""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


@attrs.frozen
class Setup:
    """How the replicas are driven: ``in_flight`` outstanding calls per replica (peak;
    1 is one call at a time), PySyncObj's ``appendEntriesUseBatch`` (its default,
    on: throughput; off: "improve single request speed") and the replicated object
    (the log of messages, or with ``counter`` PySyncObj's ``ReplCounter``)."""

    in_flight: int = 1000
    batch: bool = True
    counter: bool = False

    @classmethod
    def parse(cls, text: str) -> Setup:
        """``"1000"``, ``"1:nobatch"``, ``"200:counter"`` or ``"1:nobatch:counter"``."""
        count, *options = text.split(":")
        if set(options) - {"nobatch", "counter"} or not count.isdigit() or int(count) < 1:
            raise ValueError(
                f"{text!r}: expected a number of calls, then optionally :nobatch, :counter"
            )
        return cls(int(count), "nobatch" not in options, "counter" in options)

    @property
    def tag(self) -> str:
        return f"{self.in_flight}{'' if self.batch else ':nobatch'}{':counter' * self.counter}"

    @property
    def name(self) -> str:
        off = "" if self.batch else ", appendEntriesUseBatch off"
        return f"{self.in_flight} in flight{off}{', ReplCounter' * self.counter}"

    def args(self) -> list[str]:
        return [
            "--in-flight",
            str(self.in_flight),
            *([] if self.batch else ["--no-batch"]),
            *(["--counter"] if self.counter else []),
        ]


def commands(n: int, setup: Setup, extra: Sequence[str]) -> list[list[str]]:
    """The command lines of n replicas on fresh ports."""
    ports = ",".join(str(p) for p in free_ports(n))
    return [
        [
            sys.executable,
            os.path.abspath(__file__),
            "--role",
            "pysyncobj",
            "--pid",
            str(pid),
            "--n",
            str(n),
            "--ports",
            ports,
            *setup.args(),
            *extra,
        ]
        for pid in range(n)
    ]


def run_peak(
    n: int, seconds: float, warmup: float, setup: Setup = Setup(), profile: str = ""
) -> dict[str, Any]:
    """One peak run: rates, CPU per remote delivery, memory, call latencies; calls
    completed per second (``call_rate``, summed over the replicas) and the CPU of every
    process per call (``cpu_per_call_us``), both within the window."""
    extra = ["--seconds", repr(seconds), "--warmup", repr(warmup)]
    if profile:
        extra += ["--profile", profile, "--tag", setup.tag.replace(":", "-")]
    with Children(commands(n, setup, extra), timeout=READY_TIMEOUT) as group:
        group.ready()
        group.start()
        results = group.results(warmup + seconds + 30.0)
    out = peak_figures(results)
    calls = [c for r in results for c in r["calls"]]
    out.update(
        call_p50_ms=1e3 * rounds.percentile(calls, 0.5),
        call_p99_ms=1e3 * rounds.percentile(calls, 0.99),
        failed=sum(sum(r["failed"].values()) for r in results),
        call_rate=sum(len(r["calls"]) / r["elapsed"] for r in results),
        cpu_per_call_us=1e6 * sum(r["cpu"] for r in results) / max(1, len(calls)),
    )
    return out


def run_paced(n: int, rate: float, count: int, setup: Setup = Setup()) -> dict[str, Any]:
    """One paced run (open loop, ``setup.in_flight`` does not apply): each command's
    latency to its application at the last other replica (``latency``), and each
    call's to its callback (``calls``)."""
    extra = ["--rate", repr(rate), "--count", str(count)]
    with Children(commands(n, setup, extra), timeout=READY_TIMEOUT) as group:
        group.ready()
        group.start()
        results = group.results(count / rate + 60.0)
    if any(r["failed"] for r in results):
        raise RuntimeError(f"PySyncObj commands failed: {[r['failed'] for r in results]}")
    return {
        "latency": latencies(results, n, count),
        "calls": [c for r in results for c in r["calls"]],
    }


#: Fresh starts of a fail-over run whose replicas settled on different leaders (an
#: election on a loaded machine can move the leader just as each reports it).
START_ATTEMPTS = 3


def run_failover(
    n: int, seconds: float, kill_at: float, setup: Setup = Setup(), rate: float = 100.0
) -> dict[str, Any]:
    """Kill the leader ``kill_at`` s into a run of probes at ``rate`` per replica: the
    time from the kill to the first success of a command submitted after it, at any
    survivor (None if none succeeded within the run)."""
    extra = ["--failover", "--rate", repr(rate), "--seconds", repr(seconds)]
    for _ in range(START_ATTEMPTS):
        with Children(commands(n, setup, extra), timeout=READY_TIMEOUT) as group:
            leaders = {int(x) for x in group.ready()}
            if len(leaders) != 1 or -1 in leaders:
                continue  # an election moved the leader as they settled: start them again
            leader = leaders.pop()
            start = group.start()
            sleep_until(start + kill_at)
            group.procs[leader].send_signal(signal.SIGKILL)
            killed = time.monotonic()
            alive = [i for i in range(n) if i != leader]
            results = group.results(seconds + 30.0, alive)
            break
    else:
        raise RuntimeError(f"the replicas disagreed on the leader {START_ATTEMPTS} times")
    after = [done for r in results for sent, done, ok in r["probes"] if ok and sent >= killed]
    return {
        "failover_s": (min(after) - killed) if after else None,
        "rss_mb": max(r["rss_mb"] for r in results),
        "leader": leader,
    }


def bench_main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="3,5,7", help="cluster sizes")
    p.add_argument(
        "--setups",
        default="1,1:nobatch,1000",
        help="outstanding calls per replica, each optionally :nobatch "
        "(appendEntriesUseBatch off); a row each",
    )
    p.add_argument("--seconds", type=float, default=2.0, help="the measured window")
    p.add_argument("--warmup", type=float, default=0.5)
    p.add_argument("--kill-at", type=float, default=1.5, help="seconds into a fail-over run")
    p.add_argument("--failover-seconds", type=float, default=6.0)
    p.add_argument("--json", default="")
    rounds.add_options(p)
    args = p.parse_args()
    if why := missing():
        print(f"PySyncObj skipped: {why}; {INSTALL}.", file=sys.stderr)
        raise SystemExit(2)
    flag = rounds.flags(rounds.check_load(args), rounds.settings_flag(args.rounds, args.seconds))
    if flag:
        print(flag, flush=True)
    sizes = [int(x) for x in args.n.split(",")]
    setups = [Setup.parse(x) for x in args.setups.split(",")]
    figures: dict[str, Any] = {"flag": flag, "rounds": {}}
    for n in sizes:
        log = rounds.RoundLog(f"n = {n}", args.rounds)
        per: dict[str, list[dict[str, Any]]] = {}
        for r in range(args.rounds):
            log.start(r)
            for setup in setups:
                per.setdefault(setup.name, []).append(
                    attempt(setup.name, run_peak, n, args.seconds, args.warmup, setup)
                )
            per.setdefault("fail-over", []).append(
                attempt("fail-over", run_failover, n, args.failover_seconds, args.kill_at)
            )
            log.end(r)
        figures["rounds"][str(n)] = {"load": log.records, "runs": per}
        print_cluster_table(n, per, flag)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)


def print_cluster_table(n: int, per: dict[str, list[dict[str, Any]]], flag: str) -> None:
    """Medians (min–max) over the rounds of one cluster size."""
    print(
        f"\nPySyncObj, n = {n} replicas on 127.0.0.1, medians (min–max) over "
        f"{len(per['fail-over'])} rounds{'; ' + flag if flag else ''}"
    )
    for name, runs in per.items():
        runs = [r for r in runs if r]
        if name == "fail-over":
            seen = [r["failover_s"] for r in runs if r["failover_s"] is not None]
            none = (
                f"; none within the run in {len(runs) - len(seen)}" if len(seen) < len(runs) else ""
            )
            s = rounds.Spread.of(seen)
            print(f"  fail-over after SIGKILL of the leader: {s.text('.3f')} s{none}")
            continue
        ordered = rounds.Spread.of([r["all_rate"] / n for r in runs])
        p50 = rounds.Spread.of([r["call_p50_ms"] for r in runs])
        p99 = rounds.Spread.of([r["call_p99_ms"] for r in runs])
        rss = rounds.Spread.of([r["rss_mb"] for r in runs])
        cpu = rounds.Spread.of([r["cpu_us"] for r in runs])
        print(
            f"  {name}: {ordered.text('.0f')} ops/s, call p50 {p50.text('.2f')} ms, "
            f"p99 {p99.text('.2f')} ms, CPU {cpu.text('.1f')} µs/remote delivery, "
            f"peak RSS {rss.text('.1f')} MB/member"
        )


if __name__ == "__main__":
    if "--role" in sys.argv:
        child_main()
    else:
        bench_main()
