"""What safe (uniform) delivery costs against the default, in the simulator.

Two workloads, each run with plain Groups and with ``Group(..., safe=True)`` in the
same run, in the timed simulator with unit delays (every packet takes one time unit,
so times are in message delays), no faults:

- one at a time: one broadcast every 10 time units, from each member in turn (the
  group is idle when it is sent): the latency of one message;
- load: every member broadcasts once per time unit for 40 time units.

Measured per run: packets on the wire per delivery (every packet: data, the ordering
protocol's control packets, the group's Stability reports and safe delivery's
announcements and Queries) and the mean and largest latency from the broadcast to
each delivery. Every run is checked (view properties, order, liveness, and uniform
agreement for the safe runs) before it is reported.

A bare host (no simulator) shows what receiving in batches saves: rounds in which
every member broadcasts once and the wire drains, either one packet per step (first
in, first out) or, as the runtime does with the packets of one read, every packet
waiting for a member as one step (``receive_batch``): packets per delivery, and with
``--instructions`` the CPU instructions per delivery counted by callgrind (valgrind
must be installed; it runs 2R and R rounds and reports the difference per delivery,
so start-up does not count). ``--crash`` adds the stall after a crash
(``benchmarks/membership.py``'s run) with and without safe delivery.
Run: ``python benchmarks/safe_delivery.py`` (``--sizes 3 5``, ``--instructions``).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from collections import deque
from typing import Any

from mailroom.core.actions import Deliver, Transmit
from mailroom.core.endpoint import receive_batch
from mailroom.protocols.membership import Group
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing.membership import view_problems

PROTOCOLS = ("sequencer", "cbcast")
SIZES = (3, 5)
ROUNDS = 40


def run(protocol: str, n: int, safe: bool, workload: str, quorum: str = "all") -> dict[str, float]:
    """One checked run (``quorum``: safe delivery's ``safe_quorum``); packets per
    delivery and latency in message delays."""
    kinds: dict[str, int] = {}

    def on_transmit(sim: Simulation, pid: int, t: Transmit) -> None:
        name = type(t.packet).__name__
        kinds[name] = kinds.get(name, 0) + 1

    quorums = {"safe_quorum": quorum} if safe else {}
    eps = [Group(p, n, protocol, members=range(n), safe=safe, **quorums) for p in range(n)]
    sim = Simulation(eps, NetworkModel(delay=(1.0, 1.0)), on_transmit=on_transmit)
    if workload == "one":
        for k in range(ROUNDS):
            sim.schedule(10.0 * k + 0.25, lambda s, k=k: s.broadcast(k % n, f"m{k}"))
    else:
        for k in range(ROUNDS):
            sim.schedule(k + 0.25, lambda s: [s.broadcast(p, f"t{s.now:g}") for p in range(n)])
    sim.run()
    problems = view_problems(sim, protocol)
    assert not problems, "\n".join(v.explain() for v in problems[:5])
    sent_at = {e.message: e.time or 0.0 for e in sim.trace if e.kind == "send"}
    delays = [(e.time or 0.0) - sent_at[e.message] for e in sim.trace if e.kind == "deliver"]
    assert len(delays) == len(sent_at) * n  # everyone delivered everything
    packets = sum(kinds.values())
    return {
        "per_delivery": packets / len(delays),
        "stability": kinds.get("Stability", 0) / len(delays),
        "queries": float(kinds.get("Query", 0)),
        "mean": sum(delays) / len(delays),
        "max": max(delays),
    }


def table(sizes: tuple[int, ...]) -> str:
    lines = [
        "| protocol | n | workload | packets / delivery (default → safe) | of which "
        "announcements (safe) | latency, mean (default → safe) | latency, max | "
        "safe by majority: latency, mean / max |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for protocol in PROTOCOLS:
        for n in sizes:
            for workload, name in (("one", "one at a time"), ("load", "n per time unit")):
                a, b = run(protocol, n, False, workload), run(protocol, n, True, workload)
                c = run(protocol, n, True, workload, "majority")
                assert b["queries"] == c["queries"] == 0, "no packet is lost: nobody asks again"
                lines.append(
                    f"| {protocol} | {n} | {name} | {a['per_delivery']:.2f} → "
                    f"{b['per_delivery']:.2f} | {b['stability']:.2f} | {a['mean']:.2f} → "
                    f"{b['mean']:.2f} | {a['max']:.2f} → {b['max']:.2f} | "
                    f"{c['mean']:.2f} / {c['max']:.2f} |"
                )
    return "\n".join(lines)


# -- a bare host: packets and instructions per delivery ----------------------------------------
def drive(protocol: str, n: int, safe: bool, rounds: int, batched: bool) -> dict[str, int]:
    """``rounds`` times, every member broadcasts once and the wire drains: one packet per
    step, or (``batched``) every packet waiting for a member as one step."""
    eps = [Group(p, n, protocol, members=range(n), safe=safe) for p in range(n)]
    wire: deque[tuple[int, Any]] = deque()
    count = {"deliveries": 0, "packets": 0, "announcements": 0}

    def act(actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, Transmit):
                wire.append((a.to, a.packet))
                count["packets"] += 1
                count["announcements"] += type(a.packet).__name__ == "Stability"
            elif isinstance(a, Deliver):
                count["deliveries"] += 1

    for k in range(rounds):
        for p in range(n):
            act(eps[p].broadcast(f"r{k}"))
        while wire:
            if not batched:
                to, packet = wire.popleft()
                act(eps[to].receive(packet))
                continue
            waiting: dict[int, list[Any]] = {}
            for to, packet in wire:
                waiting.setdefault(to, []).append(packet)
            wire.clear()
            for to, packets in sorted(waiting.items()):
                act(receive_batch(eps[to], packets)[0])
    assert count["deliveries"] == rounds * n * n
    return count


def callgrind(protocol: str, n: int, safe: bool, rounds: int, batched: bool) -> int:
    """Instructions of a run of ``drive`` under callgrind (the whole process)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable]
        cmd += [__file__, "--drive", protocol, str(n), str(int(safe)), str(rounds)]
        cmd += [str(int(batched))]
        subprocess.run(cmd, check=True, capture_output=True)
        with open(out) as f:
            found = re.search(r"^(?:summary|totals): (\d+)", f.read(), re.M)
        assert found is not None
        return int(found.group(1))


def bare(sizes: tuple[int, ...], instructions: bool, rounds: int = 100) -> str:
    head = "| protocol | n | steps | packets / delivery (default → safe) | announcements (safe) |"
    lines = [head + (" instructions / delivery (default → safe) |" if instructions else "")]
    lines.append("|---|---|---|---|---|" + ("---|" if instructions else ""))
    for protocol in PROTOCOLS:
        for n in sizes:
            for batched in (False, True):
                per = n * n * rounds
                a, b = (drive(protocol, n, safe, rounds, batched) for safe in (False, True))
                line = (
                    f"| {protocol} | {n} | {'a batch' if batched else 'a packet'} | "
                    f"{a['packets'] / per:.2f} → {b['packets'] / per:.2f} | "
                    f"{b['announcements'] / per:.2f} |"
                )
                if instructions:
                    ir = [
                        (
                            callgrind(protocol, n, safe, 2 * rounds, batched)
                            - callgrind(protocol, n, safe, rounds, batched)
                        )
                        / per
                        for safe in (False, True)
                    ]
                    line += f" {ir[0]:,.0f} → {ir[1]:,.0f} ({ir[1] / ir[0]:.1f}x) |"
                lines.append(line)
    return "\n".join(lines)


def crashes(sizes: tuple[int, ...]) -> str:
    """The stall after a crash (the coordinator and sequencer P0, or the last member), with
    and without safe delivery: ``benchmarks/membership.py``'s run."""
    import membership

    lines = [
        "| protocol | n | crashed | stall (default → safe) | view installed after | "
        "stall, safe by majority |",
        "|---|---|---|---|---|---|",
    ]
    for protocol in PROTOCOLS:
        for n in sizes:
            for victim in (0, n - 1):
                a = membership.measure(protocol, n, victim)
                b = membership.measure(protocol, n, victim, safe=True)
                c = membership.measure(protocol, n, victim, safe=True, safe_quorum="majority")
                lines.append(
                    f"| {protocol} | {n} | P{victim} | {a['stall']:.1f} → {b['stall']:.1f} | "
                    f"{a['view']:.1f} → {b['view']:.1f} | {c['stall']:.1f} |"
                )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--instructions", action="store_true", help="callgrind counts too")
    parser.add_argument("--crash", action="store_true", help="the stall after a crash too")
    parser.add_argument("--drive", nargs=5, metavar=("PROTOCOL", "N", "SAFE", "ROUNDS", "BATCH"))
    args = parser.parse_args()
    if args.drive:
        protocol, n, safe, rounds, batched = args.drive
        drive(protocol, int(n), safe == "1", int(rounds), batched == "1")
        return
    sizes = tuple(args.sizes)
    print(table(sizes))
    print()
    print(bare(sizes, args.instructions))
    if args.crash:
        print()
        print(crashes(sizes))


if __name__ == "__main__":
    main()
