"""Soak: a million broadcasts through Stack(Reliable(...), CBCAST(...)) at n = 8, 10% loss.

A seeded timed simulation (delays 0.5..2.0, so packets reorder; 10% of packets lost)
keeps no per-message history (``record=False``). A broadcast is issued every
``--interval`` time units by a random process; the workload schedules itself one
message ahead, so the simulator's queue stays small too. Every ``--every`` messages
it prints, for that window, the largest Reliable mail room (held out-of-order
packets), the largest CBCAST mail room, the largest count of packets retained for
retransmission (all per process), and each as a ratio to the first window's figure,
the baseline measured in the same run: flat means ratios near 1, not growing.

    python benchmarks/soak.py [--messages 1000000] [--n 8] [--loss 0.1]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

from mailroom import CBCAST, Reliable, Stack
from mailroom.sim import NetworkModel, Simulation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--loss", type=float, default=0.1)
    parser.add_argument("--interval", type=float, default=0.05)
    parser.add_argument("--every", type=int, default=100_000)
    parser.add_argument("--rto", type=float, default=5.0, help="above the 4.0 worst round trip")
    args = parser.parse_args()
    n, total = args.n, args.messages
    eps = [Stack(Reliable(p, n, rto=args.rto), CBCAST(p, n)) for p in range(n)]
    sim = Simulation(eps, NetworkModel(delay=(0.5, 2.0), loss=args.loss), seed=1, record=False)
    rng = random.Random(2)
    window = {"held": 0, "buffer": 0, "retained": 0}
    rows: list[dict[str, float]] = []
    issued = 0
    started = time.perf_counter()

    def sample() -> None:
        for ep in sim.endpoints:
            rel: Any = ep.layers[0]  # type: ignore[attr-defined]
            top: Any = ep.layers[1]  # type: ignore[attr-defined]
            window["held"] = max(window["held"], rel.buffered())
            window["buffer"] = max(window["buffer"], top.buffered())
            window["retained"] = max(window["retained"], rel.retained())

    def issue(s: Simulation) -> None:
        nonlocal issued
        s.broadcast(rng.randrange(n), issued)
        issued += 1
        sample()
        if issued % args.every == 0 or issued == total:
            rows.append({**window, "messages": issued, "time": s.now})
            report(rows[-1], rows[0])
            window.update(held=0, buffer=0, retained=0)
        if issued < total:
            s.schedule(s.now + args.interval, issue)

    def report(row: dict[str, float], base: dict[str, float]) -> None:
        def ratio(key: str) -> str:
            return f"{row[key] / base[key]:5.2f}" if base[key] else "  n/a"

        print(
            f"{int(row['messages']):>9d} msgs  t={row['time']:>9.1f}  "
            f"held {int(row['held']):>4d} ({ratio('held')})  "
            f"CBCAST buffer {int(row['buffer']):>4d} ({ratio('buffer')})  "
            f"retained {int(row['retained']):>4d} ({ratio('retained')})  "
            f"[{time.perf_counter() - started:7.1f}s]",
            flush=True,
        )

    print(
        f"soak: {total} broadcasts, n={n}, loss={args.loss}, one every {args.interval}, "
        f"rto={args.rto}"
    )
    sim.schedule(0.0, issue)
    sim.run(max_steps=10**9)
    assert sim.quiescent()
    expected = total * n
    retx = sum(ep.layers[0].retransmissions for ep in sim.endpoints)  # type: ignore[attr-defined]
    print(
        f"done: {sim.metrics.deliveries} deliveries (expected {expected}), "
        f"{sim.metrics.packets} packets sent, {sim.metrics.dropped} lost, {retx} retransmissions, "
        f"largest stack buffer {sim.metrics.largest_buffer}, "
        f"all mail rooms empty and nothing retained: "
        f"{all(ep.buffered() == 0 and ep.layers[0].retained() == 0 for ep in sim.endpoints)}"  # type: ignore[attr-defined]
    )
    assert sim.metrics.deliveries == expected


if __name__ == "__main__":
    main()
