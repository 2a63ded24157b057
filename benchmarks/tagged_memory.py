"""Causal stability keeps memory flat: retained entries after 100,000 broadcasts.

N processes broadcast in turn at random over a network that holds up to
``--window`` packets in flight and delivers them in random order. Every
application consumes each delivery as it gets it (a single-threaded host).
Printed: per-message entries an endpoint retains (buffered + unconsumed + not
yet stable) at checkpoints, the JSON snapshot size, packets per broadcast, and
the cost per broadcast against CBCAST driven through the same schedule in the
same run (CBCAST keeps no per-message state after delivery, and no stability),
measured on ``--timing-broadcasts`` in alternating rounds, best of each.

    python benchmarks/tagged_memory.py [--broadcasts 100000] [--n 4] [--window 40]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from functools import partial
from typing import Any

from mailroom import CBCAST, Deliver, TaggedCausalBroadcast, Transmit


def drive(
    factory: Any, n: int, count: int, window: int, seed: int, checkpoints: list[int]
) -> dict[str, Any]:
    """Run the schedule; per interval between checkpoints, record the peak and mean of
    the largest retained count over endpoints, and the snapshot size at its end."""
    rng = random.Random(seed)
    eps = [factory(p, n) for p in range(n)]
    wire: list[tuple[int, object]] = []
    stats: dict[str, Any] = {"packets": 0, "acks": 0, "at": {}}
    peak = total = 0

    def handle(pid: int, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, Transmit):
                wire.append((a.to, a.packet))
                stats["packets"] += 1
                stats["acks"] += a.message_id is None
            elif (
                isinstance(a, Deliver) and a.message.sender != pid and hasattr(eps[pid], "consume")
            ):
                handle(pid, eps[pid].consume(a.message.id))

    def arrive_one() -> None:
        k = rng.randrange(len(wire))
        wire[k], wire[-1] = wire[-1], wire[k]
        to, packet = wire.pop()
        handle(to, eps[to].receive(packet))

    start = time.perf_counter()
    for i in range(1, count + 1):
        p = rng.randrange(n)
        handle(p, eps[p].broadcast(i))
        while len(wire) > window:
            arrive_one()
        if checkpoints:
            retained = max(ep.retained() for ep in eps)
            peak, total = max(peak, retained), total + retained
            if i in checkpoints:
                span = i - max([k for k in checkpoints if k < i], default=0)
                size = max(len(json.dumps(ep.snapshot())) for ep in eps)
                stats["at"][i] = (peak, total / span, size)
                peak = total = 0
    while wire:
        arrive_one()
    for p in range(n):  # the application announces what it has seen at the end
        if hasattr(eps[p], "announce"):
            handle(p, eps[p].announce())
    while wire:
        arrive_one()
    stats["seconds"] = time.perf_counter() - start
    stats["final"] = max(getattr(ep, "retained", lambda: 0)() for ep in eps)
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broadcasts", type=int, default=100_000)
    parser.add_argument("--timing-broadcasts", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--window", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    count, n = args.broadcasts, args.n
    marks = sorted({k for k in (1_000, 10_000, 100_000, count) if k <= count})
    configs = {
        "CBCAST (baseline)": CBCAST,
        "TaggedCausalBroadcast(ack_every=1)": partial(TaggedCausalBroadcast, consume="explicit"),
        f"TaggedCausalBroadcast(ack_every={n})": partial(
            TaggedCausalBroadcast, ack_every=n, consume="explicit"
        ),
    }
    print(f"n={n}, up to {args.window} packets in flight, seed {args.seed}")
    print(f"memory: {count} broadcasts; retained entries of the largest endpoint per interval")
    for name, factory in list(configs.items())[1:]:
        stats = drive(factory, n, count, args.window, args.seed, marks)
        print(f"  {name}:")
        lo = 0
        _, mean0, size0 = stats["at"][marks[0]]
        for k in marks:
            peak, mean, size = stats["at"][k]
            print(
                f"    broadcasts {lo + 1:>6}..{k:<7} peak {peak:4d}, mean {mean:6.1f} "
                f"({mean / mean0:.2f}x the first interval); snapshot {size} bytes "
                f"({size / size0:.2f}x)"
            )
            lo = k
        print(f"    after draining and a final announce(): {stats['final']} entries")

    timing = args.timing_broadcasts
    best: dict[str, float] = {}
    packets: dict[str, tuple[float, float]] = {}
    for _ in range(args.rounds):  # alternate, keep the best: the machine is shared
        for name, factory in configs.items():
            stats = drive(factory, n, timing, args.window, args.seed, [])
            best[name] = min(best.get(name, float("inf")), stats["seconds"])
            packets[name] = (stats["packets"] / timing, stats["acks"] / timing)
    base_name = next(iter(configs))
    print(f"cost: {timing} broadcasts, best of {args.rounds} alternating rounds")
    for name in configs:
        us = best[name] / timing * 1e6
        per, acks = packets[name]
        print(
            f"  {name:36s} {per:5.2f} packets/broadcast ({acks:.2f} acks) = "
            f"{per / packets[base_name][0]:.2f}x; {us:6.1f} us/broadcast = "
            f"{best[name] / best[base_name]:.2f}x"
        )


if __name__ == "__main__":
    main()
