"""``mailroom simulate``: a random workload in the simulator, checked by the reference checkers."""

from __future__ import annotations

import argparse

from mailroom.sim.registry import PROTOCOLS
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import PROPERTIES, check
from mailroom.trace.jsonl import write_jsonl

__all__ = ["PROTOCOLS", "run_simulate"]


def run_simulate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    if args.messages < 0:
        parser.error("--messages must not be negative")
    lo, hi = args.delay
    if not 0 <= lo <= hi:
        parser.error("--delay needs 0 <= MIN <= MAX")
    if not 0 <= args.duplicate < 1:
        parser.error("--duplicate must be a probability in [0, 1)")
    make, mode, promised = PROTOCOLS[args.protocol]
    network = NetworkModel(delay=(lo, hi), duplicate=args.duplicate)
    sim = Simulation(
        [make(pid, args.processes) for pid in range(args.processes)],
        network,
        seed=args.seed,
        run=f"{args.protocol}-seed{args.seed}",
    )
    random_workload(sim, args.messages, mode=mode, seed=args.seed)
    sim.run()
    for key, value in sim.metrics.summary().items():
        print(f"{key:28s} {value:g}")
    report = check(sim.trace, PROPERTIES)
    print(f"\nchecked {len(sim.trace)} events; promised: {', '.join(promised)}")
    print(report.summary())
    if args.trace:
        write_jsonl(sim.trace, args.trace)
        print(f"\ntrace written to {args.trace}")
    broken = [p for p in promised if report.count(p)]
    return 1 if broken else 0
