"""What a crash costs a group: the stall until the survivors deliver again, and the flush's
packets, measured in the timed simulator with unit delays, against n.

Every process runs a Group (membership over a broadcast protocol) under a
HeartbeatDetector (beat every ``interval``, suspect after ``timeout`` of silence);
every packet takes one time unit, so times are in message delays. Every live process
broadcasts once per time unit; at ``CRASH`` one process stops for good (the
coordinator P0, which is also the sequencer, or the last member). Measured per run:

- detect: from the crash to the first suspicion (by any survivor);
- view: from the crash to the last survivor's installation of the view without it;
- stall: from the crash to the first delivery, at the last survivor to get one, of a
  message sent after the crash (a message sent after the crash waits for the new
  view when the protocol or the flush holds it);
- over: stall minus the detection timeout, in message delays (the issue asks for the
  timeout plus a few message delays);
- latency: the baseline, measured in the same run: the mean delivery latency of the
  same workload with no crash (plain Groups, no detector); the stall is also shown as
  a multiple of it;
- flush: packets sent from the first Prepare to the last Commit (everything on the
  wire: flush control, heartbeats and data) and, of those, the flush's own control
  packets (Suspect, Prepare, Promise, Accept, Accepted, Commit), with the Group's
  default ``retry`` (1.0, one message delay: unanswered requests are repeated during
  the flush) and with ``retry=10`` (no repeats: the flush's bare cost).

Every run is checked (view properties, order, liveness) before it is reported.
Run: ``python benchmarks/membership.py`` (``--sizes 3 5 8``, ``--out FILE``).
"""

from __future__ import annotations

import argparse
from typing import Any

from mailroom.core.actions import Transmit
from mailroom.protocols.membership import Group
from mailroom.protocols.membership.detector import HeartbeatDetector
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing.membership import view_problems

PROTOCOLS = ("cbcast", "tagged", "sequencer", "skeen", "lamport")
SIZES = (3, 5, 8)
INTERVAL = 1.0
TIMEOUT = 3.0
CRASH = 20.5
STOP_SENDING = 45.0
END = 70.0
FLUSH = {"Suspect", "Prepare", "Promise", "Accept", "Accepted", "Commit"}


def measure(
    protocol: str,
    n: int,
    victim: int,
    retry: float = 1.0,
    safe: bool = False,
    safe_quorum: str = "all",
) -> dict[str, float]:
    """One run: ``victim`` crashes at CRASH while everyone broadcasts every time unit;
    the Groups repeat unanswered flush requests every ``retry`` (and deliver safely with
    ``safe``, counting every member or a majority as ``safe_quorum`` says)."""
    wire: list[tuple[float, str]] = []

    def on_transmit(sim: Simulation, pid: int, t: Transmit) -> None:
        wire.append((sim.now, type(t.packet).__name__))

    eps = [
        HeartbeatDetector(
            Group(
                p, n, protocol, members=range(n), retry=retry, safe=safe, safe_quorum=safe_quorum
            ),
            interval=INTERVAL,
            timeout=TIMEOUT,
        )
        for p in range(n)
    ]
    sim = Simulation(eps, NetworkModel(delay=(1.0, 1.0)), on_transmit=on_transmit)

    def tick_sends(s: Simulation) -> None:
        for p in range(n):
            if p not in s.stopped and s.endpoints[p].sending_view is not None:
                s.broadcast(p, f"t{s.now:g}")

    t = 0.25
    while t < STOP_SENDING:
        sim.schedule(t, tick_sends)
        t += 1.0
    sim.schedule(CRASH, lambda s: s.crash(victim))
    sim.run(until=END)
    problems = view_problems(sim, protocol)
    assert not problems, "\n".join(v.explain() for v in problems[:5])
    survivors = [q for q in range(n) if q != victim]
    sent_at = {e.message: e.time for e in sim.trace if e.kind == "send"}
    first: dict[int, float] = {}
    installed: dict[int, float] = {}
    for e in sim.trace:
        assert e.time is not None
        if e.process not in survivors or e.time < CRASH:
            continue
        if e.kind == "view" and e.process not in installed:
            installed[e.process] = e.time
        sent = sent_at.get(e.message)
        if e.kind == "deliver" and sent is not None and sent > CRASH:
            first.setdefault(e.process, e.time)
    prepares = [time for time, kind in wire if kind == "Prepare"]
    commits = [time for time, kind in wire if kind == "Commit"]
    lo, hi = min(prepares), max(commits)
    window = [kind for time, kind in wire if lo <= time <= hi]
    suspected = min(time for time, kind in wire if kind in ("Suspect", "Prepare"))
    stall = max(first[q] for q in survivors) - CRASH
    return {
        "detect": suspected - CRASH,
        "view": max(installed[q] for q in survivors) - CRASH,
        "stall": stall,
        "over": stall - TIMEOUT,
        "packets": float(len(window)),
        "control": float(sum(kind in FLUSH for kind in window)),
    }


def baseline(protocol: str, n: int) -> float:
    """The same workload without a crash: the mean delivery latency (the baseline)."""
    eps = [Group(p, n, protocol, members=range(n)) for p in range(n)]
    sim = Simulation(eps, NetworkModel(delay=(1.0, 1.0)))
    t = 0.25
    while t < STOP_SENDING:
        sim.schedule(t, lambda s: [s.broadcast(p, f"t{s.now:g}") for p in range(n)])
        t += 1.0
    sim.run()
    sent_at = {e.message: e.time for e in sim.trace if e.kind == "send"}
    delays = [
        float(e.time or 0.0) - float(sent_at[e.message] or 0.0)
        for e in sim.trace
        if e.kind == "deliver"
    ]
    return sum(delays) / len(delays)


def table(sizes: tuple[int, ...]) -> str:
    head = (
        "| n | protocol | crashed | latency (no crash) | detect | view | stall | "
        "stall / latency | over timeout | flush packets | flush control | "
        "flush control, retry 10 |"
    )
    lines = [head, "|" + "---|" * 12]
    for n in sizes:
        for protocol in PROTOCOLS:
            base = baseline(protocol, n)
            for victim, name in ((0, "P0 (coordinator)"), (n - 1, f"P{n - 1}")):
                r: dict[str, Any] = measure(protocol, n, victim)
                slow = measure(protocol, n, victim, retry=10.0)
                lines.append(
                    f"| {n} | {protocol} | {name} | {base:.2f} | {r['detect']:.1f} | "
                    f"{r['view']:.1f} | {r['stall']:.1f} | {r['stall'] / base:.1f}x | "
                    f"{r['over']:.1f} | {r['packets']:.0f} | "
                    f"{r['control']:.0f} | {slow['control']:.0f} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--out", help="also write the table to this file")
    args = parser.parse_args()
    text = (
        f"Crash at t={CRASH}, heartbeat every {INTERVAL}, timeout {TIMEOUT}; "
        "times in message delays after the crash.\n\n" + table(tuple(args.sizes))
    )
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
