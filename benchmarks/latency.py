"""Delivery latency p50 / p99 of every registered protocol at a fixed offered load.

Simulator time, not wall-clock: every process sends one message every
``--period`` time units for ``--duration`` units (``mailroom.testing.Steady``),
over links with delays uniform in ``--delay``, optionally lossy (then every
protocol runs over ``Reliable``). Latency is the time from a send to each of its
deliveries. Each protocol's p50 and p99 are printed with their ratio to the
baseline measured in the same run: ``unordered`` (deliver on arrival, so its
latency is the network's), and the textbook rule's ``SkeenAllFinal`` next to ``skeen``
shows what the standard delivery rule changed.

Run: ``python benchmarks/latency.py [--n 4] [--period 1.0] [--duration 400]
[--delay 0.5 1.5] [--loss 0.0] [--seeds 3]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from mailroom.core.registry import PROTOCOLS
from mailroom.lab import SkeenAllFinal
from mailroom.testing import Steady, run_steady

BASELINE = "unordered"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--period", type=float, default=1.0, help="per sender")
    ap.add_argument("--duration", type=float, default=400.0)
    ap.add_argument("--delay", type=float, nargs=2, default=(0.5, 1.5))
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument("--seeds", type=int, default=3)
    args = ap.parse_args()
    lo, hi = args.delay
    cases: dict[str, tuple[Callable[[int, int], Any], str]] = {
        name: (factory, mode) for name, (factory, mode, _) in PROTOCOLS.items()
    }
    cases["skeen (all-final rule)"] = (SkeenAllFinal, "broadcast")
    rows = []
    for name, (factory, mode) in cases.items():
        lat: list[float] = []
        for seed in range(args.seeds):
            s = Steady(
                n=args.n,
                period=args.period,
                duration=args.duration,
                delay=(lo, hi),
                mode=mode,
                loss=args.loss,
                rto=4.0 * hi,
                seed=seed,
            )
            lat += [d for _, d in run_steady(factory, s).latencies]
        lat.sort()
        rows.append((name, mode, lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]))
    base = {r[0]: r for r in rows}[BASELINE]
    load = args.n / args.period
    print(
        f"n={args.n}, {load:g} messages per time unit offered, delays U[{lo:g}, {hi:g}], "
        f"loss {args.loss:g}, {args.duration:g} units x {args.seeds} seeds"
    )
    print(f"{'protocol':24s} {'mode':9s} {'p50':>8s} {'p99':>8s} {'p50/base':>9s} {'p99/base':>9s}")
    for name, mode, p50, p99 in rows:
        print(
            f"{name:24s} {mode:9s} {p50:8.2f} {p99:8.2f} {p50 / base[2]:9.2f} {p99 / base[3]:9.2f}"
        )


if __name__ == "__main__":
    main()
