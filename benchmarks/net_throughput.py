"""Ordered group delivery over loopback: mailroom.net against Redis Streams and plain TCP.

n OS processes on 127.0.0.1 (n = 3, 5 and 8 by default), all measured in one run:

- ``Stack(Reliable, X)`` over ``mailroom.net`` (HMAC-SHA256 frames, codec,
  checkpoints off, no trace) for X = CBCAST (causal order) and Skeen, Sequencer
  and LamportTotalOrder (total order); every process broadcasts;
- a Redis Streams group, what a Python team would pick instead: one stream is one
  total order; every process ``XADD``s its messages (redis-py with hiredis,
  pipelined) and ``XREAD``s the stream from a ``redis-server`` that the benchmark
  starts on a free loopback port with no persistence (``--save "" --appendonly
  no``). Needs ``pip install -e '.[bench]'`` and ``apt-get install -y
  redis-server``; without them only that row is skipped, with a message saying so;
- a plain asyncio TCP echo of frames of the same size as a mailroom DATA frame (no
  codec, no MAC, no ordering): the floor of what a Python process can move.

Peak: every process sends ``--count`` x 3 / n 16-byte messages (the same total at
every n) as fast as flow control lets it (mailroom: ``can_send``; Redis: pipelines
of ``--pipeline`` commands); the figure is remote deliveries per second (a message
reaching another process's application), best of ``--repeat``, with each system's
ratio to Redis Streams.

Latency: at each fraction of ``--loads`` (0.2 and 0.8) of each system's own peak,
every process sends at a fixed rate for about ``--seconds``; a message's latency is
from its scheduled send time (so a sender held back by flow control counts) to its
delivery at the last remote process; p50 and p99 over all messages.

CPU: the processes' CPU time (``time.process_time``) per remote delivery in the
peak runs. ``--profile DIR`` runs every process under cProfile, writes
DIR/<system>-n<n>-<tag>-P<pid>.prof (tag: now, before, batch, batch-before) and
prints each system's CPU by part (codec, runtime, protocol, Reliable, HMAC, ...);
profiled rates are not the figures. ``--baseline-src DIR`` adds, for each mailroom
system, peak rows ``[before]`` (and ``batched [before]`` with ``--batch``) run
with the library in DIR (for example ``git archive <commit> src | tar -x -C /tmp/old``
and ``--baseline-src /tmp/old/src``).

    python benchmarks/net_throughput.py [--n 3,5,8] [--count 3000] [--repeat 2]
        [--systems plain,CBCAST,Skeen,Sequencer,Lamport,redis] [--loads 0.2,0.8]
        [--seconds 3] [--pipeline 64] [--profile DIR] [--baseline-src DIR] [--json FILE]
        [--encrypt] [--batch 64]

``--encrypt`` adds, for each mailroom system, peak rows run with encrypted data
frames (ChaCha20-Poly1305 instead of HMAC-SHA256; ``pip install -e '.[crypto]'``).

``--batch K`` (default 64, the Redis rows' pipeline depth) adds, for each mailroom
system, rows ``batched`` (peak and latency) where every process sends K messages at a time with
``Node.broadcast_many`` (one packet for the lot where the protocol batches, as
Sequencer does); ``--batch 1`` leaves them out. The unbatched rows stay as they were.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pstats
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import mailroom.protocols as protocols
from mailroom.core.codec import encode
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable, load_key
from mailroom.protocols import CBCASTPacket, Reliable, ReliablePacket

PAYLOAD_SIZE = 16
WINDOW = 256
MAILROOM = {"CBCAST": "CBCAST", "Skeen": "Skeen", "Sequencer": "Sequencer",
            "Lamport": "LamportTotalOrder"}  # fmt: skip
ORDER = {"CBCAST": "causal", "Skeen": "total", "Sequencer": "total", "Lamport": "total",
         "redis": "total", "plain": "none"}  # fmt: skip
STREAM = "mailroom-bench"


def payload(k: int) -> str:
    """The k-th message's 16-byte payload: its number, so receivers can time it."""
    return f"{k:0{PAYLOAD_SIZE}d}"


def frame_size(n: int = 3) -> int:
    """Bytes of a mailroom DATA frame carrying one CBCAST broadcast of a payload."""
    vc = (1000,) + (900,) * (n - 1)
    packet = ReliablePacket(0, 1, 1000, 1000, 1000, CBCASTPacket(0, vc, payload(0)))
    return 5 + 21 + len(encode(packet)) + 32


def name_of(system: str) -> str:
    if system.endswith("@batch-before"):
        return name_of(system.removesuffix("@batch-before")) + " batched [before]"
    if system.endswith("@before"):
        return name_of(system.removesuffix("@before")) + " [before]"
    if system.endswith("@encrypt"):
        return name_of(system.removesuffix("@encrypt")) + " encrypted"
    if system.endswith("@batch"):
        return name_of(system.removesuffix("@batch")) + " batched"
    if system == "plain":
        return "plain asyncio TCP echo"
    if system == "redis":
        return "Redis Streams (XADD/XREAD)"
    return f"Stack(Reliable, {MAILROOM[system]})"


# -- one process of a run ------------------------------------------------------------------


class Clock:
    """The send schedule (rate 0: as fast as allowed) and the delivery times."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.rate = args.rate
        self.n = args.n
        self.pid = args.pid
        self.count = args.count
        self.sent: list[float] = []
        self.delivered: dict[int, list[float]] = {
            o: [0.0] * args.count for o in range(args.n) if o != args.pid
        }
        self.cpu0 = time.process_time()

    def due(self, k: int, start: float) -> float:
        """When message k is scheduled; staggered so the processes do not send at once."""
        return start + (k + self.pid / self.n) / self.rate

    def got(self, origin: int, k: int, now: float) -> None:
        if self.rate:
            self.delivered[origin][k] = now

    def result(self, end: float, remote: int, every: int) -> dict[str, Any]:
        out: dict[str, Any] = {"end": end, "remote": remote, "all": every,
                               "cpu": time.process_time() - self.cpu0}  # fmt: skip
        if self.rate:
            out["sent"] = self.sent
            out["delivered"] = {str(o): t for o, t in self.delivered.items()}
        return out


async def pace(clock: Clock, k: int, start: float) -> None:
    """Wait until message k is due; record its scheduled time (rate 0: yield now and then)."""
    loop = asyncio.get_running_loop()
    if clock.rate:
        due = clock.due(k, start)
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        clock.sent.append(due)
    elif k % 32 == 31:
        await asyncio.sleep(0)


async def mailroom_node(args: argparse.Namespace) -> dict[str, Any]:
    n = args.n
    ports = [int(p) for p in args.ports.split(",")]
    table = PeerTable.of({p: f"127.0.0.1:{port}" for p, port in enumerate(ports)})
    top = getattr(protocols, MAILROOM[args.system])(args.pid, n)
    stack = Stack(Reliable(args.pid, n, rto=1.0, window=WINDOW, capacity=WINDOW), top)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    clock = Clock(args)
    counts = {"remote": 0}
    expect = n * args.count

    def delivered(m: Any) -> None:
        if m.sender != args.pid:
            counts["remote"] += 1
            clock.got(m.sender, int(m.payload), loop.time())
        if node.stats.delivered == expect:
            done.set()

    node = Node(stack, table, load_key(), listen=socket.socket(fileno=args.fd),
                on_deliver=delivered,
                encrypt=os.environ.get("MAILROOM_BENCH_ENCRYPT") == "1")  # fmt: skip
    await node.start()
    while node.stats.connected < n - 1:
        await asyncio.sleep(0.01)
    start = await _start_signal(args)
    clock.cpu0 = time.process_time()
    if args.batch > 1 and not clock.rate:
        await send_batches(node, args.count, args.batch)
    if args.batch > 1 and clock.rate:
        await send_paced_batches(node, clock, args.count, args.batch, start)
    for k in range(args.count if args.batch <= 1 else 0):
        await pace(clock, k, start)
        if not node.can_send():
            await node.wait_can_send()
        node.broadcast(payload(k))
    await done.wait()
    result = clock.result(loop.time(), counts["remote"], node.stats.delivered)
    await _emit(result)
    await _until_terminated()
    await node.close()
    return result


async def send_paced_batches(
    node: Node, clock: Clock, count: int, batch: int, start: float
) -> None:
    """Send ``batch`` messages at a time at the schedule's rate: each batch when its
    first message is due (its latency counts from then, for every message in it)."""
    for k in range(0, count, batch):
        await pace(clock, k, start)
        last = min(count, k + batch)
        clock.sent += [clock.sent[-1]] * (last - k - 1)
        if not node.can_send():
            await node.wait_can_send()
        node.broadcast_many([payload(j) for j in range(k, last)])


async def send_batches(node: Node, count: int, batch: int) -> None:
    """Send messages 0..count-1 as fast as flow control lets, ``batch`` per call."""
    for k in range(0, count, batch):
        if not node.can_send():
            await node.wait_can_send()
        node.broadcast_many([payload(j) for j in range(k, min(count, k + batch))])
        await asyncio.sleep(0)


async def redis_node(args: argparse.Namespace) -> dict[str, Any]:
    import redis.asyncio as aioredis

    n = args.n
    loop = asyncio.get_running_loop()
    writer = aioredis.Redis(host="127.0.0.1", port=args.redis_port)
    reader = aioredis.Redis(host="127.0.0.1", port=args.redis_port)
    await writer.ping()
    await reader.ping()
    key = f"{STREAM}-{args.run}"
    clock = Clock(args)
    counts = {"remote": 0, "all": 0}
    expect = n * args.count
    me = str(args.pid).encode()

    async def read() -> None:
        last = "0-0"
        while counts["all"] < expect:
            got = await reader.xread({key: last}, count=10_000, block=1000)
            for _, entries in got:
                now = loop.time()
                for entry_id, fields in entries:
                    last = entry_id
                    counts["all"] += 1
                    origin = fields[b"o"]
                    if origin != me:
                        counts["remote"] += 1
                        clock.got(int(origin), int(fields[b"p"]), now)

    start = await _start_signal(args)
    clock.cpu0 = time.process_time()
    reading = asyncio.create_task(read())
    k = 0
    while k < args.count:
        if clock.rate:  # one message when due; the backlog in one pipeline if behind
            await pace(clock, k, start)
            last = k + 1
            while last < args.count and clock.due(last, start) <= loop.time():
                clock.sent.append(clock.due(last, start))
                last += 1
        else:
            last = min(args.count, k + args.pipeline)
        pipe = writer.pipeline(transaction=False)
        for j in range(k, last):
            pipe.xadd(key, {"o": me, "p": payload(j)})
        await pipe.execute()
        k = last
    await reading
    result = clock.result(loop.time(), counts["remote"], counts["all"])
    await _emit(result)
    await _until_terminated()
    await writer.aclose()
    await reader.aclose()
    return result


async def plain_node(args: argparse.Namespace) -> dict[str, Any]:
    n = args.n
    ports = [int(p) for p in args.ports.split(",")]
    loop = asyncio.get_running_loop()
    size = frame_size(n)
    frame = (size - 4).to_bytes(4, "big") + b"f" * (size - 4)
    done = asyncio.Event()
    counts = {"received": 0, "echoed": 0}
    expect = (n - 1) * args.count
    clock = Clock(args)

    class Conn(asyncio.Protocol):
        """Length-prefixed frames; ``echo`` sends each received frame back."""

        def __init__(self, echo: bool) -> None:
            self.echo = echo
            self.buf = bytearray()
            self.transport: Any = None

        def connection_made(self, transport: Any) -> None:
            self.transport = transport

        def data_received(self, data: bytes) -> None:
            self.buf += data
            pos, frames = 0, []
            while len(self.buf) - pos >= 4:
                size = int.from_bytes(self.buf[pos : pos + 4], "big")
                if len(self.buf) - pos - 4 < size:
                    break
                frames.append(bytes(self.buf[pos : pos + 4 + size]))
                pos += 4 + size
            del self.buf[:pos]
            if self.echo:
                counts["received"] += len(frames)
                self.transport.write(b"".join(frames))
            else:
                counts["echoed"] += len(frames)
            if counts["received"] == expect and counts["echoed"] == expect:
                done.set()

    server = await loop.create_server(lambda: Conn(True), sock=socket.socket(fileno=args.fd))
    conns = []
    for p, port in enumerate(ports):
        if p != args.pid:
            _, proto = await loop.create_connection(lambda: Conn(False), "127.0.0.1", port)
            conns.append(proto)
    await _start_signal(args)
    clock.cpu0 = time.process_time()
    for k in range(args.count):
        for c in conns:
            c.transport.write(frame)
        if k % 32 == 31:
            await asyncio.sleep(0)
    await done.wait()
    result = clock.result(loop.time(), counts["received"], counts["received"])
    await _emit(result)
    await _until_terminated()
    server.close()
    return result


async def _start_signal(args: argparse.Namespace) -> float:
    """Say "ready", read the common start time from the driver, sleep until then."""
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    start = float(line)
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, start - loop.time()))
    return start


async def _emit(result: dict[str, Any]) -> None:
    """Print the result in a thread: with latency samples it is larger than a pipe's
    buffer, and the driver reads the processes one by one, so a blocking print would
    stop this process's event loop before its last frames are written, and the
    processes still waiting for them would never finish."""

    def write() -> None:
        print(json.dumps(result), flush=True)

    await asyncio.to_thread(write)


async def _until_terminated() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


# -- Redis ----------------------------------------------------------------------------------


class RedisServer:
    """A redis-server of our own on a free loopback port, no persistence; or why not."""

    INSTALL = ("install it with `apt-get install -y redis-server` (the server) and "
               "`pip install -e '.[bench]'` (redis-py with hiredis)")  # fmt: skip

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.missing = ""
        self.dir = ""

    def start(self) -> bool:
        binary = shutil.which("redis-server")
        try:
            import hiredis  # noqa: F401
            import redis  # noqa: F401
        except ImportError as exc:
            self.missing = f"Python package {exc.name!r} is missing"
            return False
        if binary is None:
            self.missing = "redis-server is not on PATH"
            return False
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="mailroom-redis-")
        cmd = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", self.dir, "--daemonize", "no",
               "--loglevel", "warning"]  # fmt: skip
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        import redis as sync_redis

        for _ in range(100):
            try:
                sync_redis.Redis(host="127.0.0.1", port=self.port).ping()
                return True
            except sync_redis.ConnectionError:
                time.sleep(0.05)
        self.missing = "redis-server did not answer"
        self.stop()
        return False

    def flush(self) -> None:
        import redis as sync_redis

        sync_redis.Redis(host="127.0.0.1", port=self.port).flushall()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)


# -- the driver ---------------------------------------------------------------------------

_runs = 0


def one_run(system: str, n: int, count: int, rate: float, opts: argparse.Namespace,
            redis_port: int = 0) -> dict[str, Any]:  # fmt: skip
    """Start n processes of ``system``; the run's rates, CPU and (at a rate) latencies.
    ``X@before`` runs X with the library from ``--baseline-src`` instead; ``X@encrypt``
    runs X with encrypted data frames (``Node(..., encrypt=True)``)."""
    global _runs
    _runs += 1
    system, _, tag = system.partition("@")
    env = dict(os.environ)
    if tag in ("before", "batch-before"):
        env["PYTHONPATH"] = os.path.abspath(opts.baseline_src)
    env["MAILROOM_BENCH_ENCRYPT"] = "1" if tag == "encrypt" else ""
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        socks.append(s)
    ports = ",".join(str(s.getsockname()[1]) for s in socks)
    procs: list[subprocess.Popen[str]] = []
    try:
        for pid, s in enumerate(socks):
            cmd = [sys.executable, __file__, "--role", system, "--pid", str(pid), "--n", str(n),
                   "--ports", ports, "--fd", str(s.fileno()), "--count", str(count),
                   "--rate", repr(rate), "--redis-port", str(redis_port), "--run", str(_runs),
                   "--pipeline", str(opts.pipeline),
                   "--batch", str(opts.batch if tag.startswith("batch") else 1)]  # fmt: skip
            if opts.profile:
                cmd += ["--profile", opts.profile, "--tag", tag or "now"]
            pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
            procs.append(subprocess.Popen(cmd, pass_fds=(s.fileno(),), text=True, env=env, **pipes))
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {system} process failed to start")
        start_at = time.monotonic() + 0.2  # the event loop's clock is CLOCK_MONOTONIC
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write(f"{start_at!r}\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"a {system} process failed")
            results.append(json.loads(line))
        elapsed = max(r["end"] for r in results) - start_at
        remote = sum(r["remote"] for r in results)
        out: dict[str, Any] = {
            "elapsed": elapsed,
            "remote_rate": remote / elapsed,
            "all_rate": sum(r["all"] for r in results) / elapsed,
            "cpu_us": 1e6 * sum(r["cpu"] for r in results) / max(remote, 1),
        }
        if rate:
            out["latency"] = latencies(results, n, count)
        return out
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for s in socks:
            s.close()


def latencies(results: list[dict[str, Any]], n: int, count: int) -> list[float]:
    """Per message: from its scheduled send to its delivery at the last remote process."""
    out = []
    for origin in range(n):
        sent = results[origin]["sent"]
        for k in range(count):
            last = max(results[r]["delivered"][str(origin)][k] for r in range(n) if r != origin)
            out.append(last - sent[k])
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- CPU by part (cProfile) -----------------------------------------------------------------

PARTS = [  # (part, substrings of the function's file), first match wins
    ("codec", ["mailroom/core/codec.py"]),
    ("HMAC", ["hmac.py", "_hashlib", "hashlib"]),
    ("Reliable", ["protocols/reliable.py"]),
    ("protocol", ["protocols/causal/", "protocols/total/", "protocols/_buffer.py"]),
    ("runtime (node, frames, Stack)", ["mailroom/net/", "core/stack.py"]),
    ("validation, ids, actions", ["mailroom/core/", "mailroom/clocks.py"]),
    ("attrs __init__", ["<attrs generated"]),
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


def cpu_by_part(directory: str, system: str) -> dict[str, float]:
    """Share of profiled time by part, over every process of the system's last run."""
    files = [os.path.join(directory, f) for f in os.listdir(directory)
             if f.startswith(f"{system}-P")]  # fmt: skip
    if not files:
        return {}
    stats = pstats.Stats(*files)
    shares: dict[str, float] = {}
    total = 0.0
    for (filename, _, func), row in stats.stats.items():  # type: ignore[attr-defined]
        tottime = row[2]
        if "method 'poll'" in func or "method 'select'" in func:
            continue  # waiting for the network is idle time, not CPU (cProfile keeps wall time)
        total += tottime
        where = f"{filename}:{func}"
        part = next((p for p, keys in PARTS if any(k in where for k in keys)), "other")
        if func in ("run_until_complete", "run_forever", "_run_once"):
            part = "asyncio and sockets"
        shares[part] = shares.get(part, 0.0) + tottime
    return {p: v / total for p, v in sorted(shares.items(), key=lambda x: -x[1])}


# -- main -----------------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    args.system = args.role
    node = {"plain": plain_node, "redis": redis_node}.get(args.role, mailroom_node)
    if not args.profile:
        asyncio.run(node(args))
        return
    import cProfile

    prof = cProfile.Profile()
    try:
        prof.runcall(asyncio.run, node(args))
    finally:
        name = f"{args.role}-n{args.n}-{args.tag}-P{args.pid}.prof"
        prof.dump_stats(os.path.join(args.profile, name))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", default="3,5,8", help="group sizes, comma-separated")
    p.add_argument(
        "--count",
        type=int,
        default=3000,
        help="messages per process in a peak run at n = 3 (3/n times as many at n)",
    )
    p.add_argument("--repeat", type=int, default=2, help="peak runs per system; the best is kept")
    p.add_argument("--systems", default="plain,CBCAST,Skeen,Sequencer,Lamport,redis")
    p.add_argument("--loads", default="0.2,0.8", help="fractions of each system's peak")
    p.add_argument("--seconds", type=float, default=3.0, help="length of a latency run")
    p.add_argument("--pipeline", type=int, default=64, help="Redis commands per round trip")
    p.add_argument("--profile", default="", help="write cProfile stats of each process here")
    p.add_argument("--json", default="", help="also write every figure to this file")
    p.add_argument("--encrypt", action="store_true", help="also run each mailroom system encrypted")
    p.add_argument(
        "--batch",
        type=int,
        default=64,
        help="also run each mailroom system (peak only) sending this many messages per "
        "broadcast_many call (1: no batched rows)",
    )
    p.add_argument(
        "--baseline-src",
        default="",
        help="also run each mailroom system (peak "
        "only) with the library in this src directory, as rows marked [before]",
    )
    p.add_argument("--tag", default="now", help=argparse.SUPPRESS)
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ports", help=argparse.SUPPRESS)
    p.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    p.add_argument("--redis-port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--run", default="0", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role is not None:
        args.n = int(args.n)
        child(args)
        return
    os.environ.setdefault("MAILROOM_KEY", secrets.token_hex(32))  # a fresh key per run
    systems = [s for s in args.systems.split(",") if s]
    unknown = set(systems) - {"plain", "redis", *MAILROOM}
    if unknown:
        p.error(
            f"unknown systems {sorted(unknown)}; choose from plain, redis, {', '.join(MAILROOM)}"
        )
    sizes = [int(x) for x in args.n.split(",")]
    loads = [float(x) for x in args.loads.split(",") if x]
    server = RedisServer()
    if "redis" in systems and not server.start():
        print(f"Redis Streams row skipped: {server.missing}; {RedisServer.INSTALL}.", flush=True)
        systems.remove("redis")
    figures: dict[str, Any] = {}
    try:
        for n in sizes:
            figures[str(n)] = run_size(n, systems, loads, args, server)
    finally:
        server.stop()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=1)


def run_size(n: int, systems: list[str], loads: list[float], args: argparse.Namespace,
             server: RedisServer) -> dict[str, Any]:  # fmt: skip
    """Peak, then latency at each load, for every system at group size n; print the table."""
    best: dict[str, dict[str, Any]] = {}
    if args.baseline_src:
        systems = [*systems, *(f"{s}@before" for s in systems if s in MAILROOM)]
    if args.encrypt:
        systems = [*systems, *(f"{s}@encrypt" for s in systems if s in MAILROOM)]
    if args.batch > 1:
        batched = [f"{s}@batch" for s in systems if s in MAILROOM]
        if args.baseline_src:
            batched += [f"{s}@batch-before" for s in systems if s in MAILROOM]
        systems = [*systems, *batched]
    count = max(10, round(args.count * 3 / n))  # the same number of messages at every n
    for _ in range(args.repeat):
        for system in systems:  # interleaved, so load on the machine affects all alike
            if system == "redis":
                server.flush()
            r = one_run(system, n, count, 0.0, args, server.port)
            if system not in best or r["remote_rate"] > best[system]["remote_rate"]:
                best[system] = r
    lat: dict[str, dict[float, list[float]]] = {
        s: {} for s in systems if s != "plain" and ("@" not in s or s.endswith("@batch"))
    }
    for load in loads:
        for system in lat:
            if system == "redis":
                server.flush()
            rate = load * best[system]["remote_rate"] / (n * (n - 1))  # per process
            sends = max(20, round(rate * args.seconds))
            lat[system][load] = one_run(system, n, sends, rate, args, server.port)["latency"]
    base = best.get("redis", best.get("plain", {"remote_rate": float("nan")}))
    base_name = "Redis" if "redis" in best else "plain"
    print(f"\nn = {n} processes on 127.0.0.1, {count} messages each for the peak, payload "
          f"{PAYLOAD_SIZE} B, best of {args.repeat}")  # fmt: skip
    w = max(len(name_of(system)) for system in systems) + 2  # names end with two spaces
    head = f"{'system':{w}s} {'order':>6s} {'remote/s':>9s} {'vs ' + base_name:>9s} {'CPU µs':>7s}"
    for load in loads:
        head += f" {f'p50@{load:.0%}':>9s} {f'p99@{load:.0%}':>9s}"
    print(head + "   (latency in ms)")
    rows = {}
    for system in systems:
        r = best[system]
        order = ORDER[system.partition("@")[0]]
        line = (f"{name_of(system):{w}s} {order:>6s} {r['remote_rate']:9.0f} "
                f"{r['remote_rate'] / base['remote_rate']:9.2f} {r['cpu_us']:7.1f}")  # fmt: skip
        row = {"remote_rate": r["remote_rate"], "cpu_us": r["cpu_us"], "latency": {}}
        for load in loads:
            if system in lat:
                values = lat[system][load]
                p50, p99 = 1e3 * percentile(values, 0.5), 1e3 * percentile(values, 0.99)
                line += f" {p50:9.2f} {p99:9.2f}"
                row["latency"][str(load)] = {"p50_ms": p50, "p99_ms": p99,
                                             "mean_ms": 1e3 * statistics.fmean(values)}  # fmt: skip
            else:
                line += f" {'-':>9s} {'-':>9s}"
        print(line, flush=True)
        rows[system] = row
    if args.profile:
        print(f"\nCPU by part (cProfile, n = {n}, share of each system's busy time):")
        for system in systems:
            kind, _, before = system.partition("@")
            shares = cpu_by_part(args.profile, f"{kind}-n{n}-{before or 'now'}")
            text = ", ".join(f"{part} {share:.0%}" for part, share in shares.items())
            print(f"  {name_of(system)}: {text}")
            rows[system]["cpu_by_part"] = shares
    return rows


if __name__ == "__main__":
    main()
