"""Ordered group delivery over loopback: mailroom.net against Redis Streams and PySyncObj.

n OS processes on 127.0.0.1 (n = 3, 5 and 8 by default), every process sending
16-byte messages, all rows measured in one invocation:

- ``Stack(Reliable, X)`` over ``mailroom.net`` (HMAC-SHA256 frames, checkpoints off,
  no trace) for X = CBCAST (causal order) and Sequencer, Skeen and LamportTotalOrder
  (total order), each twice: with one ``broadcast`` per message, as the ordinary
  application calls it (yielding to the event loop every ``--yield-every`` messages
  and whenever flow control says wait), and with ``broadcast_many`` of ``--batch``
  (64) messages per call (``peer_mailroom.py``); with ``--producers K``, a third time:
  one ``broadcast`` per message from K producer tasks per process, each yielding
  after every message, as a service whose request handlers each send (peak only);
- Redis Streams, the fastest honest setup a Python team would write: sync redis-py
  with hiredis, one connection per process, 64 ``XADD``s and the ``XREAD`` in the
  same pipeline, a ``redis-server`` of its own with persistence off, whose CPU is
  counted in the CPU per delivery (``peer_redis.py``);
- PySyncObj (Raft) as the total-order peer: one replica per process, commands
  submitted one per call from every replica with callbacks, 1000 and 5000
  outstanding per replica with PySyncObj's defaults and 1000 with
  ``appendEntriesUseBatch`` off (``--pysyncobj-in-flight``); a command applied at a
  replica is a delivery (``peer_pysyncobj.py``);
- a plain asyncio TCP echo of frames of a mailroom DATA frame's size (no codec, no
  MAC, no ordering): the floor of what a Python process moves.

A row missing its server or package (Redis, PySyncObj) is skipped with one line
saying how to install it.

**Figures.** *remote/s*: deliveries per second of a message at a process other than
its sender; *ordered/s*: messages per second delivered (or applied) at every member
(all deliveries / n); *CPU µs*: the CPU time of every process of the row (and
redis-server's) per remote delivery; *RSS MB*: the largest peak resident memory of
a member. Peak runs last ``--seconds`` (a measured window after ``--warmup``): each
process sends as fast as its system lets it and counts what it delivers within the
window. Latency: at each fraction of ``--loads`` (0.2, 0.8) of each row's own median
peak, every process sends at a fixed rate for ``--latency-seconds``; a message's
latency is from its scheduled send (a batch's: when its first message is due) to its
delivery at the last other process; p50 and p99.

**Discipline** (``rounds.py``): ``--rounds`` (5) alternating rounds per n (every row
once per round, in the same order); each row's median and range (min–max) over the
rounds; ratios to Redis and to the fastest PySyncObj row computed within each round
and summarised by their median; the load average printed at the start and end of
every round; a 1-minute load above ``--max-load`` (1.0) before the run refuses it
(``--load-policy flag`` runs it and marks the output, ``wait`` waits for the load to
fall). The latency runs take ``--latency-rounds`` (3) rounds the same way.

Every figure that README.md and docs/benchmarks.md quote comes from one command,
run on an idle machine: ``python benchmarks/figures.py --out results/``, which runs
this benchmark with its defaults (and ``bench_delivery.py``); by itself::

    python benchmarks/net_throughput.py [--n 3,5,8] [--rounds 5] [--seconds 1.5]
        [--warmup 0.5] [--loads 0.2,0.8] [--latency-seconds 2] [--latency-rounds 3]
        [--systems redis,pysyncobj,plain,CBCAST,Sequencer,Skeen,Lamport] [--batch 64]
        [--pipeline 64] [--pysyncobj-in-flight 1000,5000,1000:nobatch]
        [--yield-every 32] [--producers K] [--max-load 1.0]
        [--load-policy refuse|flag|wait] [--json FILE] [--baseline-src DIR]
        [--compiled PYTHON] [--encrypt] [--profile DIR]

``--baseline-src DIR`` adds rows ``[before]`` of every mailroom row, run with
the library in DIR (``git archive <commit> src | tar -x -C /tmp/old`` and
``--baseline-src /tmp/old/src``), for before/after in the same run (peak, and latency
for the one-per-call rows); ``--compiled PYTHON`` adds rows ``[compiled]`` of every
mailroom row, run by ``PYTHON``, the interpreter of a compiled build
(``MAILROOM_COMPILE=1 pip install .``, docs/compiled.md), each right after its pure
row in every round, with a column of their ratio per round (compiled / pure). The pure
rows import this checkout's ``src`` (first on PYTHONPATH), the compiled rows nothing
on PYTHONPATH, and every member process refuses to start (one line, exit 2) unless
``mailroom.compiled`` says it runs the build its row names; ``--encrypt``
adds rows with ChaCha20-Poly1305 frames; ``--profile DIR`` runs every process under
cProfile (the last round's files are kept; one thread per process, so PySyncObj's
tick thread is not in its profile) and prints each row's CPU by part (profiled
rates are not the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import secrets
import shutil
import socket
import subprocess
import sys
import time
from typing import Any

import attrs
import peer_pysyncobj
import rounds
from peer_mailroom import MAILROOM
from peer_pysyncobj import Setup
from peer_redis import INSTALL as REDIS_INSTALL
from peer_redis import RedisServer, hiredis_in_use
from peer_run import (
    GC_YOUNG,
    Children,
    attempt,
    build_env,
    check_compiled,
    latencies,
    peak_figures,
    sleep_until,
)

HERE = os.path.dirname(os.path.abspath(__file__))
ORDER = {
    "CBCAST": "causal",
    "Skeen": "total",
    "Sequencer": "total",
    "Lamport": "total",
    "redis": "total",
    "pysyncobj": "total",
    "plain": "none",
}
PEERS = ("redis", "pysyncobj", "plain")
CHILD_TIMEOUT = 60.0  # seconds for a process to say ready


@attrs.frozen
class Variant:
    """What a mailroom row's tag (``CBCAST@batch-compiled``) says: how each process
    sends (``one`` broadcast per message from one loop, a ``batch`` per call, or one
    per message from producer ``tasks``), which build of the library runs it
    (``peer_run.BUILDS``), and whether its frames are encrypted. The tag is the
    parts that differ from the default, joined by ``-``: ``""``, ``batch``,
    ``tasks-compiled``, ``batch-before``, ``encrypt``."""

    send: str = "one"
    build: str = "pure"
    encrypt: bool = False

    @classmethod
    def parse(cls, tag: str) -> Variant:
        parts = set(tag.split("-")) - {""}
        send = next((p for p in ("batch", "tasks") if p in parts), "one")
        build = next((p for p in ("before", "compiled") if p in parts), "pure")
        if parts - {send, build, "encrypt"}:
            raise ValueError(f"no row variant {tag!r}")
        return cls(send, build, "encrypt" in parts)

    @property
    def tag(self) -> str:
        parts = [self.send] * (self.send != "one") + [self.build] * (self.build != "pure")
        return "-".join(parts + ["encrypt"] * self.encrypt)

    def twin(self, build: str) -> Variant:
        """The same row in another build."""
        return attrs.evolve(self, build=build)


def name_of(row: str, args: argparse.Namespace) -> str:
    system, _, tag = row.partition("@")
    if system == "plain":
        return "plain asyncio TCP echo"
    if system == "redis":
        return f"Redis Streams (sync, {args.pipeline} XADD + XREAD a trip)"
    if system == "pysyncobj":
        return f"PySyncObj (Raft), {Setup.parse(tag).name}"
    v = Variant.parse(tag)
    send = {
        "one": "",
        "batch": f" broadcast_many({args.batch})",
        "tasks": f", {args.producers} producer tasks",
    }[v.send]
    build = f" [{v.build}]" if v.build != "pure" else ""
    return f"Stack(Reliable, {MAILROOM[system]}){send}{build}{' encrypted' * v.encrypt}"


def rows_of(args: argparse.Namespace, systems: list[str]) -> list[str]:
    """Every row, in the order each round runs them: a row's ``[compiled]`` and
    ``[before]`` twins right after it."""
    builds = ["pure"] + ["compiled"] * bool(args.compiled) + ["before"] * bool(args.baseline_src)
    sends = ["one"] + ["batch"] * (args.batch > 1) + ["tasks"] * (args.producers > 0)
    out: list[str] = []
    for system in systems:
        if system == "pysyncobj":
            out += [f"pysyncobj@{w}" for w in args.pysyncobj_in_flight.split(",")]
        elif system in MAILROOM:
            out += [row_of(system, Variant(send, build)) for send in sends for build in builds]
        else:
            out.append(system)
    mailroom = [s for s in systems if s in MAILROOM]
    if args.encrypt:
        out += [f"{s}@encrypt" for s in mailroom]
    return out


def row_of(system: str, variant: Variant) -> str:
    """A row's name: ``system`` or ``system@tag``."""
    return f"{system}@{variant.tag}" if variant.tag else system


def build_of(row_name: str) -> str:
    """The build a row's processes run (a peer's: pure, whose src goes unused)."""
    system, _, tag = row_name.partition("@")
    return Variant.parse(tag).build if system in MAILROOM else "pure"


# -- one run --------------------------------------------------------------------------------


def child_commands(
    row: str, n: int, mode: list[str], args: argparse.Namespace, server: RedisServer
) -> tuple[list[list[str]], list[socket.socket]]:
    """The command lines of a mailroom, plain or Redis row's n processes, and the
    listening sockets they inherit (mailroom and plain)."""
    system, _, tag = row.partition("@")
    common = ["--role", system, "--n", str(n), *mode]
    python = args.compiled if build_of(row) == "compiled" else sys.executable
    if system in MAILROOM:  # a pure row's tree may be from before mailroom.compiled
        common += ["--build", "compiled" if build_of(row) == "compiled" else "pure"]
    if args.profile:
        common += ["--profile", args.profile, "--tag", tag or "now"]
    if system == "redis":
        key = f"mailroom-bench-{secrets.token_hex(4)}"
        script = os.path.join(HERE, "peer_redis.py")
        extra = ["--redis-port", str(server.port), "--key", key, "--pipeline", str(args.pipeline)]
        return [[sys.executable, script, "--pid", str(p), *common, *extra] for p in range(n)], []
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        socks.append(s)
    ports = ",".join(str(s.getsockname()[1]) for s in socks)
    send = Variant.parse(tag).send if system in MAILROOM else "one"
    batch = args.batch if send == "batch" else 1
    extra = ["--ports", ports, "--batch", str(batch), "--yield-every", str(args.yield_every)]
    extra += ["--producers", str(args.producers)] * (send == "tasks")
    script = os.path.join(HERE, "peer_mailroom.py")
    cmds = [
        [python, script, "--pid", str(p), "--fd", str(s.fileno()), *common, *extra]
        for p, s in enumerate(socks)
    ]
    return cmds, socks


def has_latency(row: str) -> bool:
    """Rows with latency runs: every row but the echo, the encrypted rows, the producer
    tasks' rows (peak only) and the batched ``[before]`` rows (``[before]`` one per
    call is the unbatched p50 to compare with)."""
    system, _, tag = row.partition("@")
    if system not in MAILROOM:
        return system != "plain"
    v = Variant.parse(tag)
    return not v.encrypt and v.send != "tasks" and (v.send, v.build) != ("batch", "before")


def child_env(row: str, args: argparse.Namespace) -> dict[str, str]:
    """A row's processes' environment: its build's (``peer_run.build_env``)."""
    env = build_env(build_of(row), args.baseline_src)
    tag = row.partition("@")[2]
    encrypt = row.partition("@")[0] in MAILROOM and Variant.parse(tag).encrypt
    env["MAILROOM_BENCH_ENCRYPT"] = "1" if encrypt else ""
    return env


def peak_run(row: str, n: int, args: argparse.Namespace, server: RedisServer) -> dict[str, Any]:
    """One peak run of a row: its figures (``peer_run.peak_figures``)."""
    system, _, tag = row.partition("@")
    if system == "pysyncobj":
        return peer_pysyncobj.run_peak(
            n, args.seconds, args.warmup, Setup.parse(tag), profile=args.profile
        )
    if system == "redis":
        server.flush()
    mode = ["--seconds", repr(args.seconds), "--warmup", repr(args.warmup)]
    cmds, socks = child_commands(row, n, mode, args, server)
    try:
        with Children(
            cmds, child_env(row, args), [s.fileno() for s in socks], CHILD_TIMEOUT
        ) as group:
            group.ready()
            start = group.start()
            server_cpu = 0.0
            if system == "redis":  # redis-server's CPU within the same window
                sleep_until(start + args.warmup)
                cpu0 = server.cpu_seconds()
                sleep_until(start + args.warmup + args.seconds)
                server_cpu = server.cpu_seconds() - cpu0
            results = group.results(args.warmup + args.seconds + 60.0)
    finally:
        for s in socks:
            s.close()
    return peak_figures(results, server_cpu)


def paced_run(
    row: str, n: int, rate: float, args: argparse.Namespace, server: RedisServer
) -> list[float]:
    """One latency run of a row at ``rate`` messages/s per process: the latencies."""
    count = max(20, round(rate * args.latency_seconds))
    system, _, tag = row.partition("@")
    if system == "pysyncobj":
        return list(peer_pysyncobj.run_paced(n, rate, count, Setup.parse(tag))["latency"])
    if system == "redis":
        server.flush()
    cmds, socks = child_commands(
        row, n, ["--rate", repr(rate), "--count", str(count)], args, server
    )
    try:
        with Children(
            cmds, child_env(row, args), [s.fileno() for s in socks], CHILD_TIMEOUT
        ) as group:
            group.ready()
            group.start()
            results = group.results(count / rate + 60.0)
    finally:
        for s in socks:
            s.close()
    return latencies(results, n, count)


# -- one group size -------------------------------------------------------------------------


def run_size(
    n: int, rows: list[str], args: argparse.Namespace, server: RedisServer
) -> dict[str, Any]:
    """Alternating peak rounds, then alternating latency rounds, at group size n."""
    peaks: dict[str, list[dict[str, Any] | None]] = {row: [] for row in rows}
    log = rounds.RoundLog(f"n = {n} peak", args.rounds)
    for r in range(args.rounds):
        log.start(r)
        for row in rows:  # A, B, C, A, B, C: load on the machine touches every row alike
            peaks[row].append(attempt(f"{row} at n = {n}", peak_run, row, n, args, server))
        log.end(r)
    rate = {
        row: rounds.Spread.of([p["remote_rate"] for p in runs if p]).median
        for row, runs in peaks.items()
    }
    lat_rows = [row for row in rows if has_latency(row) and rate[row] > 0]
    loads = [float(x) for x in args.loads.split(",") if x]
    lat: dict[str, dict[str, list[dict[str, float]]]] = {row: {} for row in lat_rows}
    lat_log = rounds.RoundLog(f"n = {n} latency", args.latency_rounds)
    for r in range(args.latency_rounds if loads else 0):
        lat_log.start(r)
        for row in lat_rows:
            for load in loads:
                per_process = load * rate[row] / (n * (n - 1))
                values = attempt(
                    f"{row} at {load:.0%} at n = {n}", paced_run, row, n, per_process, args, server
                )
                if values:
                    lat[row].setdefault(str(load), []).append(
                        {
                            "p50_ms": 1e3 * rounds.percentile(values, 0.5),
                            "p99_ms": 1e3 * rounds.percentile(values, 0.99),
                        }
                    )
        lat_log.end(r)
    return {
        "peaks": peaks,
        "latency": lat,
        "load": {"peak": log.records, "latency": lat_log.records},
    }


def per_round(peaks: dict[str, list[dict[str, Any] | None]], key: str) -> dict[str, list[float]]:
    """Each row's ``key`` per round (0.0 where the run failed, so rounds stay aligned)."""
    return {row: [p[key] if p else 0.0 for p in runs] for row, runs in peaks.items()}


def best_of(rates: dict[str, list[float]], prefix: str) -> list[float]:
    """Per round, the fastest of the rows named ``prefix`` or ``prefix@...``."""
    chosen = [v for row, v in rates.items() if row.partition("@")[0] == prefix]
    return [max(col) for col in zip(*chosen, strict=True)] if chosen else []


def pure_twin(row_name: str) -> str:
    """The pure row of a mailroom row of another build (itself otherwise)."""
    system, _, tag = row_name.partition("@")
    if system not in MAILROOM:
        return row_name
    return row_of(system, Variant.parse(tag).twin("pure"))


def summary(n: int, measured: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Medians and ranges per row; ratios per round to Redis and the fastest PySyncObj,
    and a ``[compiled]`` or ``[before]`` row's to its pure row (``vs_pure``)."""
    peaks = measured["peaks"]
    rates = per_round(peaks, "remote_rate")
    bases = {"redis": best_of(rates, "redis"), "pysyncobj": best_of(rates, "pysyncobj")}
    out: dict[str, Any] = {}
    for row, runs in peaks.items():
        ok = [p for p in runs if p]
        figures: dict[str, Any] = {
            "name": name_of(row, args),
            "order": ORDER[row.partition("@")[0]],
            "rounds": len(ok),
            "remote_rate": rounds.Spread.of([p["remote_rate"] for p in ok]),
            "ordered_rate": rounds.Spread.of([p["all_rate"] / n for p in ok]),
            "cpu_us": rounds.Spread.of([p["cpu_us"] for p in ok]),
            "rss_mb": rounds.Spread.of([p["rss_mb"] for p in ok]),
        }
        mine = [x for x, p in zip(rates[row], runs, strict=True) if p]
        for peer, base in bases.items():
            theirs = [b for b, p in zip(base, runs, strict=False) if p]
            figures[f"vs_{peer}"] = rounds.Spread.of(rounds.ratios(mine, theirs))
        twin = pure_twin(row)
        pure = [x for x, p in zip(rates.get(twin, []), runs, strict=False) if p]
        ratios = rounds.ratios(mine, pure) if twin != row else []
        figures["vs_pure"] = rounds.Spread.of(ratios)
        for load, values in measured["latency"].get(row, {}).items():
            for q in ("p50_ms", "p99_ms"):
                figures[f"{q}@{load}"] = rounds.Spread.of([v[q] for v in values])
        out[row] = figures
    return out


def print_size(n: int, table: dict[str, Any], args: argparse.Namespace, flag: str) -> None:
    """The peak table and the latency table of group size n."""
    print(
        f"\nn = {n} processes on 127.0.0.1, payload 16 B; peak: medians (min–max) over "
        f"{args.rounds} alternating rounds of {args.seconds:g} s windows; ratios per "
        f"round, their median (min–max){'; ' + flag if flag else ''}"
    )
    w = max(len(f["name"]) for f in table.values()) + 2  # names end with two spaces
    cols = [
        ("remote/s", "remote_rate", ".0f", 25),
        ("ordered/s", "ordered_rate", ".0f", 10),
        ("vs Redis", "vs_redis", ".2f", 19),
        ("vs PySyncObj", "vs_pysyncobj", ".2f", 19),
        ("CPU µs", "cpu_us", ".1f", 8),
        ("RSS MB", "rss_mb", ".0f", 7),
    ]
    if any(f["vs_pure"].median == f["vs_pure"].median for f in table.values()):
        cols.append(("vs pure", "vs_pure", ".2f", 19))  # a [compiled] row / its pure row
    print(f"{'system':{w}s}{'order':>7s} " + " ".join(f"{h:>{k}s}" for h, _, _, k in cols))
    for f in table.values():
        cells = []
        for _, key, spec, width in cols:
            spread = f[key]
            median_only = key in ("ordered_rate", "cpu_us", "rss_mb")
            text = format(spread.median, spec) if median_only else spread.text(spec)
            cells.append(f"{'-' if spread.median != spread.median else text:>{width}s}")
        print(f"{f['name']:{w}s}{f['order']:>7s} " + " ".join(cells), flush=True)
    loads = [x for x in args.loads.split(",") if x]
    lat = {row: f for row, f in table.items() if f"p50_ms@{float(loads[0])}" in f} if loads else {}
    if not lat:
        return
    print(
        f"\nn = {n} latency in ms: median over {args.latency_rounds} rounds of each run's "
        "p50 / p99, from the scheduled send to the last other process's delivery, at a "
        "fraction of each row's own median peak"
    )
    head = "".join(f"{f'p50@{float(x):.0%}':>10s}{f'p99@{float(x):.0%}':>10s}" for x in loads)
    print(f"{'system':{w}s}{head}")
    for f in lat.values():
        cells = "".join(
            f"{f[f'{q}@{float(x)}'].median:10.2f}" for x in loads for q in ("p50_ms", "p99_ms")
        )
        print(f"{f['name']:{w}s}{cells}", flush=True)


# -- CPU by part (cProfile) -----------------------------------------------------------------

PARTS = [  # (part, substrings of the function's file), first match wins
    ("codec", ["mailroom/core/codec.py"]),
    ("HMAC", ["hmac.py", "_hashlib", "hashlib"]),
    ("Reliable", ["protocols/reliable.py"]),
    ("protocol", ["protocols/causal/", "protocols/total/", "protocols/_buffer.py"]),
    ("runtime (node, frames, Stack)", ["mailroom/net/", "core/stack.py"]),
    ("validation, ids, actions", ["mailroom/core/", "mailroom/clocks.py"]),
    ("attrs __init__", ["<attrs generated"]),
    ("PySyncObj", ["pysyncobj/"]),
    ("redis-py", ["redis/", "hiredis"]),
    (
        "asyncio and sockets",
        [
            "asyncio/",
            "selectors.py",
            "socket.py",
            "<method 'send",
            "<method 'recv",
            "<method 'poll",
        ],
    ),
]


def cpu_by_part(directory: str, prefix: str) -> dict[str, float]:
    """Share of profiled CPU time by part, over every process of a row's last run."""
    files = [
        os.path.join(directory, f) for f in os.listdir(directory) if f.startswith(f"{prefix}-P")
    ]
    if not files:
        return {}
    stats = pstats.Stats(*files)
    shares: dict[str, float] = {}
    total = 0.0
    for (filename, _, func), row in stats.stats.items():  # type: ignore[attr-defined]
        tottime = row[2]
        total += tottime
        where = f"{filename}:{func}"
        part = next((p for p, keys in PARTS if any(k in where for k in keys)), "other")
        if func in ("run_until_complete", "run_forever", "_run_once"):
            part = "asyncio and sockets"
        shares[part] = shares.get(part, 0.0) + tottime
    return {p: v / total for p, v in sorted(shares.items(), key=lambda x: -x[1])} if total else {}


def print_profile(n: int, rows: list[str], args: argparse.Namespace) -> dict[str, Any]:
    print(f"\nCPU by part (cProfile, n = {n}, last round, share of each row's busy time):")
    out = {}
    for row in rows:
        system, _, tag = row.partition("@")
        tag = Setup.parse(tag).tag.replace(":", "-") if system == "pysyncobj" else tag or "now"
        shares = cpu_by_part(args.profile, f"{system}-n{n}-{tag}")
        print(f"  {name_of(row, args)}: " + ", ".join(f"{p} {s:.0%}" for p, s in shares.items()))
        out[row] = shares
    return out


# -- main -----------------------------------------------------------------------------------


def versions() -> dict[str, str]:
    """What ran: Python, the peers' packages and redis-server."""
    from importlib import metadata

    out = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": str(os.cpu_count()),
    }
    for package in ("mailroom", "redis", "hiredis", "pysyncobj"):
        try:
            out[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            out[package] = "-"
    binary = shutil.which("redis-server")
    if binary:
        text = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
        out["redis-server"] = text.split()[2].removeprefix("v=") if text else "-"
    return out


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="3,5,8", help="group sizes, comma-separated")
    p.add_argument("--systems", default="redis,pysyncobj,plain,CBCAST,Sequencer,Skeen,Lamport")
    p.add_argument("--seconds", type=float, default=1.5, help="each peak run's measured window")
    p.add_argument("--warmup", type=float, default=0.5, help="sending before the window")
    p.add_argument("--loads", default="0.2,0.8", help="fractions of each row's peak")
    p.add_argument("--latency-seconds", type=float, default=2.0, help="length of a latency run")
    p.add_argument("--latency-rounds", type=int, default=3)
    p.add_argument(
        "--batch",
        type=int,
        default=64,
        help="messages per broadcast_many call in the batched rows (1: none)",
    )
    p.add_argument("--pipeline", type=int, default=64, help="Redis XADDs per round trip")
    p.add_argument(
        "--pysyncobj-in-flight",
        default="1000,5000,1000:nobatch",
        help="outstanding calls per PySyncObj replica, each optionally :nobatch "
        "(appendEntriesUseBatch off); a row each, ratios to the fastest per round",
    )
    p.add_argument(
        "--yield-every",
        type=int,
        default=32,
        help="one-message-per-call rows yield to the event loop this often",
    )
    p.add_argument("--profile", default="", help="write cProfile stats of each process here")
    p.add_argument("--json", default="", help="also write every figure to this file")
    p.add_argument("--encrypt", action="store_true", help="also run each mailroom row encrypted")
    p.add_argument(
        "--gc-young",
        type=int,
        default=0,
        help="every process of every row (the peers' too) sets the garbage collector's "
        "young-generation threshold to this before its window (mailroom.net.tune_collector, "
        "python -m mailroom.net --gc-young); 0 (default): Python's own (700)",
    )
    p.add_argument(
        "--baseline-src",
        default="",
        help="also run each mailroom row (peak only) "
        "with the library in this src directory, as rows marked [before]",
    )
    p.add_argument(
        "--compiled",
        default="",
        metavar="PYTHON",
        help="also run every mailroom row with this interpreter of a compiled build "
        "(nothing on PYTHONPATH), as rows marked [compiled], each right after its pure row",
    )
    p.add_argument(
        "--producers",
        type=int,
        default=0,
        help="also run every mailroom row one broadcast per message from this many "
        "producer tasks per process (peak only; 0: no such rows)",
    )
    rounds.add_options(p)
    return p


def main() -> None:
    p = parser()
    args = p.parse_args()
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - {*PEERS, *MAILROOM}
    if unknown:
        p.error(f"unknown systems {sorted(unknown)}; choose from {', '.join([*PEERS, *MAILROOM])}")
    try:
        [Setup.parse(x) for x in args.pysyncobj_in_flight.split(",")]
    except ValueError as exc:
        p.error(f"--pysyncobj-in-flight {exc}")
    if args.baseline_src and not os.path.isdir(os.path.join(args.baseline_src, "mailroom")):
        p.error(f"--baseline-src {args.baseline_src}: no mailroom package there")
    if args.producers < 0:
        p.error(f"--producers {args.producers}: a count of tasks is 0 (no such rows) or more")
    if args.compiled:
        check_compiled(args.compiled)
    flag = rounds.flags(rounds.check_load(args), rounds.settings_flag(args.rounds, args.seconds))
    if flag:
        print(flag, flush=True)
    os.environ.setdefault("MAILROOM_KEY", secrets.token_hex(32))  # a fresh key per run
    if args.gc_young < 0:
        p.error(f"--gc-young {args.gc_young}: a threshold is 0 (Python's own) or more")
    os.environ[GC_YOUNG] = str(args.gc_young)  # the children inherit it
    server = RedisServer()
    if "redis" in systems and not server.start():
        print(f"Redis Streams row skipped: {server.missing}; {REDIS_INSTALL}.", flush=True)
        systems.remove("redis")
    if "redis" in systems and not hiredis_in_use():
        print("warning: redis-py is not using hiredis; the Redis row is not the fastest setup")
    if "pysyncobj" in systems and (why := peer_pysyncobj.missing()):
        print(f"PySyncObj row skipped: {why}; {peer_pysyncobj.INSTALL}.", flush=True)
        systems.remove("pysyncobj")
    rows = rows_of(args, systems)
    sizes = [int(x) for x in args.n.split(",")]
    loads = [x for x in args.loads.split(",") if x]
    lat_rows = [r for r in rows if has_latency(r)]
    print(
        f"{len(rows)} rows x {args.rounds} rounds x {len(sizes)} sizes = "
        f"{len(rows) * args.rounds * len(sizes)} peak runs of {args.warmup + args.seconds:g} s; "
        f"{len(lat_rows)} rows x {len(loads)} loads x {args.latency_rounds} rounds x "
        f"{len(sizes)} sizes = {len(lat_rows) * len(loads) * args.latency_rounds * len(sizes)} "
        f"latency runs of {args.latency_seconds:g} s",
        flush=True,
    )
    print(
        f"{' '.join(sys.argv)}\n{rounds.load_text()} at the start; {versions()}; "
        f"gc young threshold {args.gc_young or 'Python default'}",
        flush=True,
    )
    figures: dict[str, Any] = {
        "argv": sys.argv,
        "flag": flag,
        "versions": versions(),
        "gc_young": args.gc_young,
        "compiled": args.compiled,
        "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "sizes": {},
    }
    try:
        for n in sizes:
            measured = run_size(n, rows, args, server)
            table = summary(n, measured, args)
            print_size(n, table, args, flag)
            entry = {"measured": measured, "summary": to_json(table)}
            if args.profile:
                entry["cpu_by_part"] = print_profile(n, rows, args)
            figures["sizes"][str(n)] = entry
    finally:
        server.stop()
    print(f"\n{rounds.load_text()} at the end")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)


def to_json(table: dict[str, Any]) -> dict[str, Any]:
    return {
        row: {k: v.to_dict() if isinstance(v, rounds.Spread) else v for k, v in f.items()}
        for row, f in table.items()
    }


if __name__ == "__main__":
    main()
