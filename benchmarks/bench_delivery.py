"""Per-delivery cost of Unordered, Fifo, RST and CBCAST, in order and as a reversed burst.

For each protocol and n, one sender produces a burst of messages to one
receiver. The receiver takes them (a) in order and (b) in reverse order, so
that all but the last wait in the mail room and the last releases the whole
burst. Costs are per message, best of a few repetitions, and are printed as
ratios: to Unordered in the same run, and reverse / in-order (the goal is at
most 3x at n = 8: buffered delivery is amortized O(n), no rescans).

    python benchmarks/bench_delivery.py [--burst 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from mailroom import CBCAST, RST, Deliver, Fifo, Transmit, Unordered

PROTOCOLS: dict[str, Callable[[int, int], Any]] = {
    "Unordered": Unordered,
    "Fifo": Fifo,
    "RST": RST,
    "CBCAST": CBCAST,
}


def burst(name: str, n: int, count: int) -> list[object]:
    """The packets of ``count`` messages from P0 that P1 receives."""
    sender = PROTOCOLS[name](0, n)
    packets = []
    for i in range(count):
        actions = sender.broadcast(i) if name == "CBCAST" else sender.send(i, to=1)
        packets += [a.packet for a in actions if isinstance(a, Transmit) and a.to == 1]
    return packets


def per_message(name: str, n: int, packets: list[object], repeat: int) -> float:
    """Best seconds per message for a fresh receiver taking ``packets`` in order."""
    best = float("inf")
    for _ in range(repeat):
        receiver = PROTOCOLS[name](1, n)
        start = time.perf_counter()
        delivered = 0
        for p in packets:
            delivered += sum(1 for a in receiver.receive(p) if isinstance(a, Deliver))
        elapsed = time.perf_counter() - start
        assert delivered == len(packets), (name, n, delivered)
        best = min(best, elapsed / len(packets))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--burst", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sizes", type=int, nargs="+", default=[3, 8, 32])
    args = parser.parse_args()
    rows = []
    for n in args.sizes:
        base = None
        for name in PROTOCOLS:
            packets = burst(name, n, args.burst)
            forward = per_message(name, n, packets, args.repeat)
            backward = per_message(name, n, packets[::-1], args.repeat)
            if base is None:
                base = forward
            rows.append((name, n, forward, backward, forward / base, backward / base))
    print(
        f"burst of {args.burst} messages, best of {args.repeat}; ratios are to Unordered in order"
    )
    print(
        f"{'protocol':10s} {'n':>3s} {'in-order us':>12s} {'reverse us':>11s} "
        f"{'in-order x':>11s} {'reverse x':>10s} {'reverse/in-order':>17s}"
    )
    for name, n, fwd, bwd, rf, rb in rows:
        print(
            f"{name:10s} {n:3d} {fwd * 1e6:12.2f} {bwd * 1e6:11.2f} {rf:11.2f} {rb:10.2f} "
            f"{bwd / fwd:17.2f}"
        )


if __name__ == "__main__":
    main()
