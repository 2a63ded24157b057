"""``mailroom simulate`` and ``mailroom check`` (reference checkers on JSON Lines)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from mailroom.core.endpoint import Endpoint
from mailroom.protocols import CBCAST, RST, Fifo, LamportTotalOrder, Sequencer, Skeen, Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import PROPERTIES, check
from mailroom.trace.events import TraceError
from mailroom.trace.jsonl import read_jsonl, write_jsonl

#: name -> (factory, workload mode, properties the protocol promises)
PROTOCOLS: dict[str, tuple[Callable[[int, int], Endpoint], str, tuple[str, ...]]] = {
    "unordered": (Unordered, "unicast", ("integrity", "liveness")),
    "fifo": (Fifo, "unicast", ("integrity", "fifo", "liveness")),
    "rst": (RST, "unicast", ("integrity", "fifo", "causal", "liveness")),
    "cbcast": (CBCAST, "broadcast", ("integrity", "fifo", "causal", "liveness")),
    "sequencer": (Sequencer, "broadcast", ("integrity", "total", "liveness")),
    "skeen": (Skeen, "broadcast", ("integrity", "total", "liveness")),
    "lamport": (LamportTotalOrder.stack, "broadcast", PROPERTIES),
}


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


def run_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    props = [p.strip() for p in args.properties.split(",") if p.strip()]
    unknown = [p for p in props if p not in PROPERTIES]
    if unknown:
        parser.exit(2, f"mailroom check: unknown properties {unknown}\n")
    events = []
    for path in args.traces:
        try:
            events += read_jsonl(path)
        except OSError as exc:
            parser.exit(2, f"mailroom check: cannot read {path}: {exc.strerror}\n")
        except TraceError as exc:
            parser.exit(2, f"mailroom check: {exc}\n")
    report = check(events, props)
    print(f"checked {len(events)} events")
    print(report.summary())
    return 0 if report.ok else 1
