"""Send rate of a checkpointed mailroom.net node whose mail room fills, against the same
node without checkpoints (the baseline, measured in the same run).

One process of ``Stack(Reliable, CBCAST)`` in a group of three whose two peers are
down, so every broadcast stays in the mail room (``max_retained=None`` lets it grow).
It broadcasts ``--count`` payloads of ``--size`` bytes; every ``--window`` sends it
prints the rate with and without a checkpoint, and their ratio. A step that rewrote
the whole state would slow down as the mail room grows; a step that logs its inputs
does not.

    python benchmarks/net_checkpoint.py [--count 3000] [--size 4096] [--window 500]
"""

from __future__ import annotations

import argparse
import asyncio
import secrets
import socket
import tempfile
import time
from pathlib import Path

from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable
from mailroom.protocols import CBCAST, Reliable


async def rates(count: int, size: int, window: int, checkpoint: Path | None) -> list[float]:
    """Sends per second over each window of ``window`` sends."""
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(3)]
    table = PeerTable.of({p: f"127.0.0.1:{s.getsockname()[1]}" for p, s in enumerate(socks)})
    node = Node(
        Stack(Reliable(0, 3, rto=0.5), CBCAST(0, 3)),
        table,
        secrets.token_bytes(32),
        listen=socks[0],
        checkpoint=checkpoint,
        max_retained=None,
    )
    await node.start()
    payload = "x" * size
    out: list[float] = []
    start = time.perf_counter()
    for k in range(1, count + 1):
        node.broadcast(payload)
        if k % window == 0:
            now = time.perf_counter()
            out.append(window / (now - start))
            start = now
    await node.close()
    for s in socks:
        s.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--count", type=int, default=3000)
    p.add_argument("--size", type=int, default=4096)
    p.add_argument("--window", type=int, default=500)
    args = p.parse_args()
    plain = asyncio.run(rates(args.count, args.size, args.window, None))
    with tempfile.TemporaryDirectory() as folder:
        ckpt = Path(folder) / "p0.ckpt"
        logged = asyncio.run(rates(args.count, args.size, args.window, ckpt))
        files = sum(f.stat().st_size for f in Path(folder).iterdir())
    print(f"{'parked':>8s} {'no checkpoint/s':>16s} {'checkpoint/s':>13s} {'ratio':>7s}")
    for k, (a, b) in enumerate(zip(plain, logged, strict=True), start=1):
        print(f"{k * args.window:8d} {a:16.0f} {b:13.0f} {b / a:7.1%}")
    print(f"checkpoint files at the end: {files / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
