"""A fixed runtime workload for instruction counts: three nodes in one process on
loopback sockets, each hosting ``Stack(Reliable(window=256), X)`` and broadcasting
``COUNT`` 16-byte messages, until every node has delivered every message.

``one``: a ``broadcast`` per message, yielding to the event loop every 32 (the
benchmark's application); ``many``: ``broadcast_many`` of 64. The reliable layer's
timeout is a minute, so the slowness of valgrind causes no retransmission. Timings on
a loaded machine lie; instruction counts do not::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/1280.out \\
        .venv/bin/python benchmarks/net_instructions.py cbcast one 1280
    valgrind --tool=callgrind --callgrind-out-file=/tmp/256.out \\
        .venv/bin/python benchmarks/net_instructions.py cbcast one 256
    callgrind_annotate /tmp/1280.out | head

The difference of the two totals over the 9,216 deliveries of the extra 1,024
messages per node is the cost per delivery, start-up and warm-up left out;
``PYTHONPATH=/tmp/old/src`` measures another version of the library.

    python benchmarks/net_instructions.py cbcast|sequencer one|many COUNT
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from collections.abc import Callable

from mailroom import CBCAST, Reliable, Sequencer, Stack
from mailroom.core.messages import Message
from mailroom.net import Node, PeerTable

TOPS = {"cbcast": CBCAST, "sequencer": Sequencer}
PAYLOAD = "0123456789abcdef"
KEY = b"instruction-count-key-0123456789"


async def run(protocol: str, mode: str, count: int) -> None:
    """Three nodes broadcast ``count`` messages each; returns once all are delivered."""
    socks = []
    for _ in range(3):
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        socks.append(sock)
    table = PeerTable({p: ("127.0.0.1", s.getsockname()[1]) for p, s in enumerate(socks)})
    got = [0, 0, 0]
    done = asyncio.Event()

    def counter(p: int) -> Callable[[Message], None]:
        def deliver(_: Message) -> None:
            got[p] += 1
            if all(g == 3 * count for g in got):
                done.set()

        return deliver

    top = TOPS[protocol]
    nodes = [
        Node(
            Stack(Reliable(p, 3, window=256, rto=60.0, max_rto=120.0), top(p, 3)),
            table,
            KEY,
            listen=socks[p],
            on_deliver=counter(p),
        )
        for p in range(3)
    ]
    for node in nodes:
        await node.start()
    for _ in range(6000):  # bounded: at most a minute to connect
        if all(node.stats.connected == 2 for node in nodes):
            break
        await asyncio.sleep(0.01)
    await asyncio.gather(*(send(node, mode, count) for node in nodes))
    await asyncio.wait_for(done.wait(), 900)
    for node in nodes:
        await node.close()


async def send(node: Node, mode: str, count: int) -> None:
    """``count`` broadcasts from ``node``: 32 calls a turn, or one ``broadcast_many`` of 64."""
    sent = 0
    while sent < count:
        if not node.can_send():
            await node.wait_can_send()
            continue
        if mode == "one":
            for _ in range(min(32, count - sent)):
                node.broadcast(PAYLOAD)
                sent += 1
        else:
            size = min(64, count - sent)
            node.broadcast_many([PAYLOAD] * size)
            sent += size
        await asyncio.sleep(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("protocol", choices=sorted(TOPS))
    parser.add_argument("mode", choices=["one", "many"])
    parser.add_argument("count", type=int)
    args = parser.parse_args()
    asyncio.run(run(args.protocol, args.mode, args.count))


if __name__ == "__main__":
    main()
