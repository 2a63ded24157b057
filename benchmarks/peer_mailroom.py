"""One process of a mailroom group (``Stack(Reliable, X)`` over ``mailroom.net``), or of
the plain asyncio TCP echo, for ``net_throughput.py`` (see ``peer_run`` for a run's life).

mailroom: every process broadcasts 16-byte payloads, either one ``broadcast`` per
message (the ordinary application: it yields to the event loop every
``--yield-every`` messages and whenever flow control says wait) or
``broadcast_many`` of ``--batch`` messages per call; or, with ``--producers K``,
from K producer tasks per process, each calling ``broadcast`` once per message and
yielding after it, as a service whose request handlers each send does (peak runs
only). HMAC-SHA256 frames (or
ChaCha20-Poly1305 with ``MAILROOM_BENCH_ENCRYPT=1``), checkpoints off, no trace.

plain: every process writes frames of a mailroom DATA frame's size to every other,
which echoes them back (length prefix only: no codec, no MAC, no ordering), at
most ``WINDOW`` unanswered per connection: the floor of what a Python process moves.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import socket
import time
from typing import Any

from peer_run import (
    PROFILER,
    Clock,
    Counts,
    Window,
    child_parser,
    emit,
    payload,
    run_child,
    start_signal,
    wait_for_end,
)

import mailroom.protocols as protocols
from mailroom.core.codec import encode
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable, load_key
from mailroom.protocols import CBCASTPacket, Reliable, ReliablePacket

WINDOW = 256
MAILROOM = {
    "CBCAST": "CBCAST",
    "Skeen": "Skeen",
    "Sequencer": "Sequencer",
    "Lamport": "LamportTotalOrder",
}


def frame_size(n: int = 3) -> int:
    """Bytes of a mailroom DATA frame carrying one CBCAST broadcast of a payload."""
    vc = (1000,) + (900,) * (n - 1)
    packet = ReliablePacket(0, 1, 1000, 1000, 1000, CBCASTPacket(0, vc, payload(0)))
    return 5 + 21 + len(encode(packet)) + 32


async def mailroom_node(args: argparse.Namespace) -> None:
    n, me = args.n, args.pid
    ports = [int(p) for p in args.ports.split(",")]
    table = PeerTable.of({p: f"127.0.0.1:{port}" for p, port in enumerate(ports)})
    top = getattr(protocols, MAILROOM[args.role])(me, n)
    stack = Stack(Reliable(me, n, rto=1.0, window=WINDOW, capacity=WINDOW), top)
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    counts = Counts()
    clock = Clock(args) if args.rate else None
    expect = n * args.count

    def delivered(m: Any) -> None:
        counts.all += 1
        if m.sender != me:
            counts.remote += 1
            if clock is not None:
                clock.got(m.sender, int(m.payload), loop.time())
        if counts.all == expect:
            done.set()

    node = Node(
        stack,
        table,
        load_key(),
        listen=socket.socket(fileno=args.fd),
        on_deliver=delivered,
        encrypt=os.environ.get("MAILROOM_BENCH_ENCRYPT") == "1",
    )
    await node.start()
    for _ in range(6000):  # at most a minute
        if node.stats.connected >= n - 1:
            break
        await asyncio.sleep(0.01)
    start = await asyncio.to_thread(start_signal)
    PROFILER.begin()
    if clock is None:
        window = Window(counts, start, args.warmup, args.seconds)
        if args.producers:
            sender = asyncio.create_task(send_from_tasks(node, window, args.producers))
        else:
            sender = asyncio.create_task(send_peak(node, window, args.batch, args.yield_every))
        await asyncio.to_thread(window.over.wait)
        sender.cancel()
        result = window.result()
    else:
        clock.cpu0 = time.process_time()
        await send_paced(node, clock, args.count, args.batch, start)
        await done.wait()
        result = clock.result(counts)
    PROFILER.end()
    await asyncio.to_thread(emit, result)
    await asyncio.to_thread(wait_for_end)
    await node.close()


async def send_peak(node: Node, window: Window, batch: int, yield_every: int) -> None:
    """As fast as flow control lets until the window is over: one ``broadcast`` per
    message (yielding every ``yield_every``), or ``broadcast_many`` of ``batch``."""
    over = window.over
    k = 0
    while not over.is_set():
        if not node.can_send():
            await node.wait_can_send()
        if batch > 1:
            node.broadcast_many([payload(j) for j in range(k, k + batch)])
            k += batch
            await asyncio.sleep(0)
            continue
        node.broadcast(payload(k))
        k += 1
        if k % yield_every == 0:
            await asyncio.sleep(0)


async def send_from_tasks(node: Node, window: Window, producers: int) -> None:
    """``producers`` tasks, each one ``broadcast`` per message and a yield to the event
    loop after it (waiting whenever flow control says so), until the window is over."""
    over = window.over
    numbers = itertools.count()

    async def produce() -> None:
        while not over.is_set():
            if not node.can_send():
                await node.wait_can_send()
            node.broadcast(payload(next(numbers)))
            await asyncio.sleep(0)

    await asyncio.gather(*(produce() for _ in range(producers)))


async def send_paced(node: Node, clock: Clock, count: int, batch: int, start: float) -> None:
    """Messages 0..count-1 at the clock's rate; batched: ``batch`` at a time, each batch
    when its first message is due (its latency counts from then, for all of it)."""
    loop = asyncio.get_running_loop()
    step = max(1, batch)
    for k in range(0, count, step):
        due = clock.due(k, start)
        if due > loop.time():
            await asyncio.sleep(due - loop.time())
        last = min(count, k + step)
        clock.sent += [due] * (last - k)
        if not node.can_send():
            await node.wait_can_send()
        if batch > 1:
            node.broadcast_many([payload(j) for j in range(k, last)])
        else:
            node.broadcast(payload(k))


async def plain_node(args: argparse.Namespace) -> None:
    n = args.n
    ports = [int(p) for p in args.ports.split(",")]
    loop = asyncio.get_running_loop()
    size = frame_size(n)
    frame = (size - 4).to_bytes(4, "big") + b"f" * (size - 4)
    counts = Counts()
    server = await loop.create_server(
        lambda: Echo(counts, None), sock=socket.socket(fileno=args.fd)
    )
    conns: list[Echo] = []
    for p, port in enumerate(ports):
        if p != args.pid:
            _, proto = await loop.create_connection(lambda: Echo(counts, WINDOW), "127.0.0.1", port)
            conns.append(proto)
    start = await asyncio.to_thread(start_signal)
    PROFILER.begin()
    window = Window(counts, start, args.warmup, args.seconds)
    k = 0
    while not window.over.is_set():
        for c in conns:
            if c.outstanding >= WINDOW:
                await c.room.wait()
            c.send(frame)
        k += 1
        if k % 32 == 0:
            await asyncio.sleep(0)
    PROFILER.end()
    await asyncio.to_thread(emit, window.result())
    await asyncio.to_thread(wait_for_end)
    server.close()


class Echo(asyncio.Protocol):
    """Length-prefixed frames: the accepting side echoes every frame (and counts it as a
    delivery); the connecting side counts echoes back to open its window."""

    def __init__(self, counts: Counts, window: int | None) -> None:
        self.counts = counts
        self.window = window
        self.outstanding = 0
        self.room = asyncio.Event()
        self.buf = bytearray()
        self.transport: Any = None

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def send(self, frame: bytes) -> None:
        self.outstanding += 1
        if self.outstanding >= WINDOW:
            self.room.clear()
        self.transport.write(frame)

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
        if self.window is None:
            self.counts.remote += len(frames)
            self.counts.all += len(frames)
            self.transport.write(b"".join(frames))
        else:
            self.outstanding -= len(frames)
            self.room.set()


def main() -> None:
    p = child_parser(__doc__.split("\n")[0])
    p.add_argument("--ports", required=True)
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--yield-every", type=int, default=32)
    p.add_argument("--producers", type=int, default=0, help="producer tasks (0: one loop)")
    args = p.parse_args()
    node = plain_node if args.role == "plain" else mailroom_node
    run_child(lambda a: asyncio.run(node(a)), args)


if __name__ == "__main__":
    main()
