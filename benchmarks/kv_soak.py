"""Soak the replicated key-value service: three members as real processes, steady writes.

``examples/kv`` (a ``ReplDict`` per member, safe delivery, checkpoints ``fsync``'d at
every step) runs as its README says, on free 127.0.0.1 ports; ``--clients`` threads
write random keys of a fixed set (``--keys``, so the state itself stays the same size)
through random members over HTTP/1.1, one request at a time each, for ``--minutes``.
Every ``--every`` seconds it prints that window's writes per second, errors, p50 and
p99 of the writes' latency, and what the members hold: resident memory, open files,
and their checkpoint and log bytes, the largest member's of each, with the ratio to
the first window (flat means bounded: a leak grows with the run, not with the load).
At the end the writes stop and every member must reach the same state (the
``/status`` digest) within ``--settle`` seconds; the members are stopped by pid.

    python benchmarks/kv_soak.py [--minutes 20] [--every 60] [--clients 4] [--keys 1000]

Exit status 0 if no write failed and the replicas agree, 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
MEMBER_LINE = re.compile(r"P(\d+): http://127\.0\.0\.1:(\d+)\s+\(pid (\d+)\)")
START_SECONDS = 60.0  # the members print their addresses within this, or the run fails


class Writes:
    """What the clients did in the current window (and in the whole run)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.latencies: list[float] = []
        self.errors = 0
        self.total = 0
        self.total_errors = 0
        self.last_error = ""

    def ok(self, seconds: float) -> None:
        with self.lock:
            self.latencies.append(seconds)
            self.total += 1

    def failed(self, why: str) -> None:
        with self.lock:
            self.errors += 1
            self.total_errors += 1
            self.last_error = why

    def take(self) -> tuple[list[float], int]:
        """This window's latencies and errors, and a new window."""
        with self.lock:
            out = self.latencies, self.errors
            self.latencies, self.errors = [], 0
            return out


def start(folder: Path) -> tuple[subprocess.Popen[str], list[tuple[int, int]]]:
    """The service's launcher, and each member's (HTTP port, pid)."""
    launcher = subprocess.Popen(
        [sys.executable, "-m", "examples.kv", "--port", "0", "--dir", str(folder)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert launcher.stdout is not None
    members: dict[int, tuple[int, int]] = {}
    deadline = time.monotonic() + START_SECONDS
    while len(members) < 3 and time.monotonic() < deadline:
        line = launcher.stdout.readline()
        if not line:
            break
        if match := MEMBER_LINE.match(line):
            members[int(match[1])] = (int(match[2]), int(match[3]))
    if len(members) < 3:
        launcher.kill()
        raise SystemExit(f"kv_soak: the service did not start within {START_SECONDS:g} s")
    threading.Thread(target=_drain, args=(launcher.stdout,), daemon=True).start()
    return launcher, [members[p] for p in sorted(members)]


def _drain(stream: IO[str]) -> None:
    for _ in stream:  # the launcher's log: read, so that it never blocks on a full pipe
        pass


def client(
    seed: int, ports: list[int], args: argparse.Namespace, writes: Writes, stop: threading.Event
) -> None:
    """PUT random keys through random members, one request at a time, until ``stop``."""
    rng = random.Random(seed)
    conns = {port: http.client.HTTPConnection("127.0.0.1", port, timeout=30) for port in ports}
    while not stop.is_set():
        port = rng.choice(ports)
        conn = conns[port]
        body = rng.randbytes(args.value_bytes // 2).hex()
        began = time.perf_counter()
        try:
            conn.request("PUT", f"/kv/k{rng.randrange(args.keys)}", body=body)
            reply = conn.getresponse()
            reply.read()
        except (OSError, http.client.HTTPException) as exc:
            writes.failed(f"{type(exc).__name__}: {exc}")
            conn.close()
            continue
        if reply.status == 204:
            writes.ok(time.perf_counter() - began)
        else:
            writes.failed(f"HTTP {reply.status}")
    for conn in conns.values():
        conn.close()


def held(pid: int, member: int, folder: Path) -> tuple[float, int, int]:
    """A member's resident memory (MB), open files, and checkpoint and log bytes."""
    with open(f"/proc/{pid}/status") as f:
        rss = int(re.search(r"VmRSS:\s+(\d+)", f.read())[1]) / 1024  # type: ignore[index]
    files = len(os.listdir(f"/proc/{pid}/fd"))
    size = 0
    for path in folder.glob(f"p{member}.*"):
        with contextlib.suppress(FileNotFoundError):  # a temporary file, renamed meanwhile
            size += path.stat().st_size
    return rss, files, size


def status(port: int) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/status")
        data: dict[str, Any] = json.loads(conn.getresponse().read())
        return data
    finally:
        conn.close()


def settled(members: list[tuple[int, int]], seconds: float) -> list[dict[str, Any]]:
    """The members' statuses once they agree (same applied count and digest), or the
    last ones seen after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        seen = [status(port) for port, _ in members]
        agree = len({(s["applied"], s["digest"]) for s in seen}) == 1
        if agree or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def stop_service(launcher: subprocess.Popen[str], members: list[tuple[int, int]]) -> None:
    """Ctrl-C to the launcher (it stops its members by pid); any left are killed by pid."""
    launcher.send_signal(signal.SIGINT)
    try:
        launcher.wait(30)
    except subprocess.TimeoutExpired:
        launcher.kill()
        launcher.wait(10)
    for _, pid in members:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def ratio(value: float, first: float) -> str:
    return f"{value / first:.2f}" if first else "-"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=20.0)
    p.add_argument("--every", type=float, default=60.0, help="seconds per window")
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--keys", type=int, default=1000, help="the keys written (the state's size)")
    p.add_argument("--value-bytes", type=int, default=128)
    p.add_argument("--settle", type=float, default=30.0, help="seconds to agree at the end")
    args = p.parse_args()
    if args.minutes <= 0 or args.every <= 0 or args.clients < 1 or args.keys < 1:
        p.error("--minutes, --every, --clients and --keys must be positive")
    if not 2 <= args.value_bytes <= 16384:
        p.error("--value-bytes must be 2..16384")
    with tempfile.TemporaryDirectory(prefix="kv-soak-") as tmp:
        return soak(args, Path(tmp))


def soak(args: argparse.Namespace, folder: Path) -> int:
    launcher, members = start(folder)
    writes, stop = Writes(), threading.Event()
    ports = [port for port, _ in members]
    threads = [
        threading.Thread(target=client, args=(seed, ports, args, writes, stop))
        for seed in range(args.clients)
    ]
    who = ", ".join(f"P{m} pid {pid}" for m, (_, pid) in enumerate(members))
    print(
        f"kv_soak: 3 members ({who}), {args.clients} clients, {args.keys} keys, "
        f"{args.minutes:g} min, load {os.getloadavg()[0]:.2f} at the start"
    )
    print(
        "| s | writes/s | errors | p50 ms | p99 ms | RSS MB | / first | open files "
        "| files KB | / first |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    first: tuple[float, float] | None = None
    began = time.monotonic()
    try:
        for thread in threads:
            thread.start()
        end, mark = began + args.minutes * 60, began
        while (now := time.monotonic()) < end:
            time.sleep(min(args.every, end - now))
            latencies, errors = writes.take()
            window, mark = time.monotonic() - mark, time.monotonic()
            sizes = [held(pid, m, folder) for m, (_, pid) in enumerate(members)]
            rss = max(s[0] for s in sizes)
            files = max(s[1] for s in sizes)
            size = max(s[2] for s in sizes) / 1024
            first = first or (rss, size)
            quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else []
            p50, p99 = (quantiles[49] * 1e3, quantiles[98] * 1e3) if quantiles else (0.0, 0.0)
            print(
                f"| {time.monotonic() - began:.0f} | {len(latencies) / window:,.0f} "
                f"| {errors} | {p50:.2f} | {p99:.2f} | {rss:.1f} | {ratio(rss, first[0])} "
                f"| {files} | {size:,.0f} | {ratio(size, first[1])} |",
                flush=True,
            )
        stop.set()
        for thread in threads:
            thread.join()
        final = settled(members, args.settle)
    finally:
        stop.set()
        stop_service(launcher, members)
    agree = len({(s["applied"], s["digest"]) for s in final}) == 1
    print(
        f"{writes.total:,} writes acknowledged, {writes.total_errors} failed"
        + (f" (last: {writes.last_error})" if writes.total_errors else "")
    )
    print(
        f"replicas {'equal' if agree else 'DIFFER'}: "
        + ", ".join(f"P{s['pid']} applied {s['applied']} digest {s['digest']}" for s in final)
    )
    return 0 if agree and not writes.total_errors else 1


if __name__ == "__main__":
    sys.exit(main())
