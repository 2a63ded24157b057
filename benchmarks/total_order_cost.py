"""Cost of the total-order protocols, measured in the simulator with unit delays.

Every packet takes exactly one time unit, so a delivery's delay (delivery time
minus send time) is its latency in message delays. Two workloads per n:

- isolated: one broadcast at a time, far apart, so each message's cost is its own;
  the sequencer is measured separately for senders other than the coordinator
  and for the coordinator itself;
- concurrent: every process broadcasts at time 0 (latency under contention).

Prints Markdown tables (measured against the expected figures of issue 3);
``--out FILE`` also writes them to FILE. Run: ``python benchmarks/total_order_cost.py``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from statistics import mean

from mailroom import LamportTotalOrder, Sequencer, Skeen
from mailroom.core.endpoint import Endpoint
from mailroom.sim import NetworkModel, Simulation
from mailroom.trace.checkers import check

SIZES = (3, 8, 16)
GAP = 100.0  # time between isolated broadcasts: far more than any protocol needs

Factory = Callable[[int, int], Endpoint]


def run(make: Factory, n: int, senders: Sequence[int], gap: float) -> dict[str, float]:
    """Broadcast once from each of ``senders``, ``gap`` apart; measure per broadcast."""
    sim = Simulation([make(p, n) for p in range(n)], NetworkModel(delay=(1.0, 1.0)))
    for i, pid in enumerate(senders):
        sim.schedule(i * gap, lambda s, pid=pid, i=i: s.broadcast(pid, f"m{i}"))
    sim.run()
    report = check(sim.trace, ("integrity", "total", "liveness"))
    assert report.ok, report.summary()
    sent = {e.message: e.time for e in sim.trace if e.kind == "send"}
    own, other = [], []
    for e in sim.trace:
        if e.kind == "deliver":
            delay = float(e.time or 0.0) - float(sent[e.message] or 0.0)
            (own if e.process == e.message.origin else other).append(delay)
    m = sim.metrics
    return {
        "packets": m.packets / m.app_messages,
        "data": m.data_packets / m.app_messages,
        "control": m.control_packets / m.app_messages,
        "mean": mean(own + other),
        "others": mean(other) if other else 0.0,
        "sender": mean(own),
        "max": max(own + other),
    }


def expected(name: str, n: int) -> tuple[str, str]:
    """Issue 3's figures: (messages per broadcast, message delays)."""
    if name.startswith("sequencer"):
        return f"n+1 = {n + 1}", "2 (1 at the sequencer)"
    if name == "skeen":
        return f"3(n−1) = {3 * (n - 1)}", "3"
    return f"(n−1)+n(n−1) = {(n - 1) + n * (n - 1)}", "2"


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", help="also write the tables to this file")
    args = parser.parse_args(argv)
    lamport: Factory = LamportTotalOrder.stack  # type: ignore[assignment]
    cases: list[tuple[str, Factory, Callable[[int], list[int]]]] = [
        ("sequencer, sender ≠ coordinator", Sequencer, lambda n: list(range(1, n))),
        ("sequencer, sender = coordinator", Sequencer, lambda n: [0]),
        ("skeen", Skeen, lambda n: list(range(n))),
        ("lamport (over Fifo)", lamport, lambda n: list(range(n))),
    ]
    lines = [
        "Isolated broadcasts (one at a time), unit delays:",
        "",
        "| protocol | n | packets / broadcast | expected | data + control | "
        "delay at others | delay at sender | mean delay | expected delays |",
        "|---|---:|---:|---|---|---:|---:|---:|---|",
    ]
    for name, make, senders in cases:
        for n in SIZES:
            r = run(make, n, senders(n), GAP)
            msgs, delays = expected(name, n)
            lines.append(
                f"| {name} | {n} | {r['packets']:g} | {msgs} | "
                f"{r['data']:g} + {r['control']:g} | {r['others']:.3g} | "
                f"{r['sender']:.3g} | {r['mean']:.3g} | {delays} |"
            )
    lines += [
        "",
        "Concurrent broadcasts (every process at time 0), unit delays:",
        "",
        "| protocol | n | packets / broadcast | mean delay | max delay |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, make in (("sequencer", Sequencer), ("skeen", Skeen), ("lamport", lamport)):
        for n in SIZES:
            r = run(make, n, list(range(n)), 0.0)
            cells = f"{r['packets']:.3g} | {r['mean']:.3g} | {r['max']:.3g}"
            lines.append(f"| {name} | {n} | {cells} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return text


if __name__ == "__main__":
    main()
