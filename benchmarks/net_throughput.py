"""Delivered messages per second over loopback: mailroom.net against plain asyncio TCP.

Three OS processes on 127.0.0.1. In each mailroom run every process broadcasts
``--count`` small messages through ``Stack(Reliable, CBCAST)`` (and
``Stack(Reliable, Skeen)`` when ``mailroom.protocols`` has Skeen) over
``mailroom.net`` (HMAC-SHA256 frames, codec, checkpoints off, no trace). The
baseline, measured in the same run, is a plain asyncio TCP echo of the same
frames: every process sends ``--count`` frames of the same size to each of the
two others, which echo each frame back (as the reliable layer acknowledges).

The figure is the ratio of remote deliveries per second (a message reaching
another process's application) to plain frames received per second (a frame
reaching another process). Each configuration runs ``--repeat`` times; the best
is kept.

    python benchmarks/net_throughput.py [--count 3000] [--repeat 3] [--encrypt] [--profile DIR]

``--encrypt`` adds a run of each protocol with ``Node(..., encrypt=True)``
(ChaCha20-Poly1305 instead of HMAC-SHA256 on data frames).

``--profile DIR`` runs every process under cProfile and writes DIR/<run>-P<pid>.prof
(profiled runs are slower; their rates are not the figures).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from typing import Any

import mailroom.protocols as protocols
from mailroom.core.codec import encode
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable, load_key
from mailroom.protocols import CBCASTPacket, Reliable, ReliablePacket

N = 3
PAYLOAD = "x" * 16
WINDOW = 256


def frame_size() -> int:
    """Bytes of a mailroom DATA frame carrying one CBCAST broadcast of PAYLOAD."""
    packet = ReliablePacket(0, 1, 1000, 1000, 1000, CBCASTPacket(0, (1000, 900, 900), PAYLOAD))
    return 5 + 21 + len(encode(packet)) + 32


def protocol_names() -> list[str]:
    return ["CBCAST"] + (["Skeen"] if hasattr(protocols, "Skeen") else [])


# -- one process of a run ------------------------------------------------------------------


async def mailroom_node(args: argparse.Namespace) -> dict[str, Any]:
    ports = [int(p) for p in args.ports.split(",")]
    table = PeerTable.of({p: f"127.0.0.1:{port}" for p, port in enumerate(ports)})
    name, _, mode = args.protocol.partition("+")  # "CBCAST+encrypt": with --encrypt
    top = getattr(protocols, name)(args.pid, N)
    stack = Stack(Reliable(args.pid, N, rto=1.0, window=WINDOW, capacity=WINDOW), top)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    remote = 0
    expect = N * args.count

    def delivered(m: Any) -> None:
        nonlocal remote
        remote += m.sender != args.pid
        if node.stats.delivered == expect:
            done.set()

    node = Node(stack, table, load_key(), listen=socket.socket(fileno=args.fd),
                on_deliver=delivered, encrypt=mode == "encrypt")  # fmt: skip
    await node.start()
    while node.stats.connected < N - 1:
        await asyncio.sleep(0.01)
    await _start_signal(args)
    for k in range(args.count):
        if not node.can_send():
            await node.wait_can_send()
        node.broadcast(PAYLOAD)
        if k % 32 == 31:
            await asyncio.sleep(0)
    await done.wait()
    result = {"end": loop.time(), "remote": remote, "all": node.stats.delivered}
    print(json.dumps(result), flush=True)
    await _until_terminated()
    await node.close()
    return result


async def plain_node(args: argparse.Namespace) -> dict[str, Any]:
    ports = [int(p) for p in args.ports.split(",")]
    loop = asyncio.get_running_loop()
    size = frame_size()
    frame = (size - 4).to_bytes(4, "big") + b"f" * (size - 4)
    done = asyncio.Event()
    counts = {"received": 0, "echoed": 0}
    expect = (N - 1) * args.count

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
                n = int.from_bytes(self.buf[pos : pos + 4], "big")
                if len(self.buf) - pos - 4 < n:
                    break
                frames.append(bytes(self.buf[pos : pos + 4 + n]))
                pos += 4 + n
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
    for k in range(args.count):
        for c in conns:
            c.transport.write(frame)
        if k % 32 == 31:
            await asyncio.sleep(0)
    await done.wait()
    result = {"end": loop.time(), "remote": counts["received"], "all": counts["received"]}
    print(json.dumps(result), flush=True)
    await _until_terminated()
    server.close()
    return result


async def _start_signal(args: argparse.Namespace) -> None:
    """Say "ready", read the common start time from the driver, sleep until then."""
    print("ready", flush=True)
    line = await asyncio.to_thread(sys.stdin.readline)
    args.start_at = float(line)
    loop = asyncio.get_running_loop()
    await asyncio.sleep(max(0.0, args.start_at - loop.time()))


async def _until_terminated() -> None:
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()


# -- the driver ---------------------------------------------------------------------------


def one_run(kind: str, count: int, profile: str = "") -> dict[str, float]:
    """Start N processes of ``kind`` ("plain" or a protocol name); rates of the run."""
    socks = []
    for _ in range(N):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        socks.append(s)
    ports = ",".join(str(s.getsockname()[1]) for s in socks)
    procs: list[subprocess.Popen[str]] = []
    try:
        for pid, s in enumerate(socks):
            cmd = [sys.executable, __file__, "--role", kind, "--pid", str(pid), "--ports", ports,
                   "--fd", str(s.fileno()), "--count", str(count)]  # fmt: skip
            if profile:
                cmd += ["--profile", profile]
            pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE}
            procs.append(subprocess.Popen(cmd, pass_fds=(s.fileno(),), text=True, **pipes))
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError(f"a {kind} process failed to start")
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
                raise RuntimeError(f"a {kind} process failed")
            results.append(json.loads(line))
        elapsed = max(r["end"] for r in results) - start_at
        remote = sum(r["remote"] for r in results)
        every = sum(r["all"] for r in results)
        return {"elapsed": elapsed, "remote_rate": remote / elapsed, "all_rate": every / elapsed}
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=3000, help="messages per process")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--profile", default="", help="write cProfile stats of each process here")
    p.add_argument("--encrypt", action="store_true", help="also run each protocol encrypted")
    p.add_argument("--role", help=argparse.SUPPRESS)
    p.add_argument("--pid", type=int, help=argparse.SUPPRESS)
    p.add_argument("--ports", help=argparse.SUPPRESS)
    p.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    p.add_argument("--protocol", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.role is not None:
        args.protocol = args.role
        node = plain_node if args.role == "plain" else mailroom_node
        if not args.profile:
            asyncio.run(node(args))
            return
        import cProfile

        prof = cProfile.Profile()
        try:
            prof.runcall(asyncio.run, node(args))
        finally:
            prof.dump_stats(os.path.join(args.profile, f"{args.role}-P{args.pid}.prof"))
        return
    os.environ.setdefault("MAILROOM_KEY", secrets.token_hex(32))  # a fresh key per run
    kinds = ["plain", *protocol_names()]
    if args.encrypt:
        kinds += [f"{name}+encrypt" for name in protocol_names()]
    best: dict[str, dict[str, float]] = {}
    for _ in range(args.repeat):
        for kind in kinds:  # interleaved, so load on the machine affects all alike
            r = one_run(kind, args.count, args.profile)
            if kind not in best or r["remote_rate"] > best[kind]["remote_rate"]:
                best[kind] = r
    plain = best["plain"]["remote_rate"]
    print(f"{N} processes on 127.0.0.1, {args.count} messages each, payload {len(PAYLOAD)} B, "
          f"frame {frame_size()} B, best of {args.repeat}")  # fmt: skip
    print(f"{'run':34s} {'remote/s':>10s} {'all/s':>10s} {'ratio':>7s}")
    for kind in kinds:
        r = best[kind]
        proto, _, mode = kind.partition("+")
        name = "plain asyncio TCP echo" if kind == "plain" else f"Stack(Reliable, {proto})"
        name += " encrypted" if mode else ""
        ratio = r["remote_rate"] / plain
        print(f"{name:34s} {r['remote_rate']:10.0f} {r['all_rate']:10.0f} {ratio:7.1%}")


if __name__ == "__main__":
    main()
