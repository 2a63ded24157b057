"""Simulator traces for the differential tests: correct and buggy protocols, some mutated."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable

import attrs

from mailroom.core.endpoint import Endpoint
from mailroom.core.errors import RemoteError
from mailroom.core.messages import MessageId
from mailroom.protocols import CBCAST, RST, Fifo, Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.testing.variants import (
    CBCASTNoOneGreater,
    CBCASTSenderOnly,
    RSTColumnOnly,
    RSTSelfDoubleCount,
)
from mailroom.trace.events import Event

PROTOCOLS: dict[str, tuple[Callable[[int, int], Endpoint], str]] = {
    "unordered-uni": (Unordered, "unicast"),
    "unordered-bc": (Unordered, "broadcast"),
    "fifo": (Fifo, "unicast"),
    "rst": (RST, "unicast"),
    "cbcast": (CBCAST, "broadcast"),
    "rst-column-only": (RSTColumnOnly, "unicast"),
    "rst-self-double": (RSTSelfDoubleCount, "unicast"),
    "cbcast-no-one-greater": (CBCASTNoOneGreater, "broadcast"),
    "cbcast-sender-only": (CBCASTSenderOnly, "broadcast"),
}


def simulate(
    name: str, n: int, seed: int, messages: int = 12, duplicate: float = 0.0
) -> list[Event]:
    make, mode = PROTOCOLS[name]
    sim = Simulation(
        [make(p, n) for p in range(n)],
        NetworkModel(delay=(1.0, 10.0), duplicate=duplicate),
        seed=seed,
        run=f"{name}-n{n}-s{seed}-d{duplicate}",
    )
    random_workload(sim, messages, mode=mode, seed=seed, self_sends=name.startswith("rst-self"))
    # a buggy variant may send something its peer rejects: keep the trace so far
    with contextlib.suppress(RemoteError):
        sim.run()
    return list(sim.trace)


def mutate(events: list[Event], seed: int) -> list[Event]:
    """Break a trace the way real logs break: lost, repeated and foreign deliveries."""
    rng = random.Random(seed)
    out = []
    run = events[0].run + "-mut" if events else "empty-mut"
    for e in events:
        e = attrs.evolve(e, run=run)
        r = rng.random()
        if e.kind == "deliver" and r < 0.08:
            continue  # lost: liveness
        out.append(e)
        if e.kind == "deliver" and r > 0.94:  # delivered twice: integrity
            out.append(attrs.evolve(e, seq=e.seq * 1000 + 1))
        if e.kind == "deliver" and 0.9 < r <= 0.92:  # a message nobody sent
            out.append(attrs.evolve(e, seq=e.seq * 1000 + 2, message=MessageId(e.process, 999)))
    return out


def corpus(count_per_protocol: int = 24) -> list[list[Event]]:
    """Hundreds of traces: every protocol, n in 2..4, some duplicating networks, some mutated."""
    runs = []
    for name in PROTOCOLS:
        for seed in range(count_per_protocol):
            n = 2 + seed % 3
            dup = 0.2 if seed % 4 == 3 else 0.0
            trace = simulate(name, n, seed, messages=6 + seed % 10, duplicate=dup)
            runs.append(mutate(trace, seed) if seed % 5 == 4 else trace)
    return runs


#: Two hosts with names of their own; beta delivers Msg(2) before Msg(1), and a Ghost.
NAMED_LOG = """\
alpha {"alpha":1}
send Msg(1)
alpha {"alpha":2}
send Msg(2)
beta {"alpha":2, "beta":1}
recv Msg(2)
beta {"alpha":2, "beta":2}
recv Msg(1)
beta {"beta":3, "alpha":2}
recv Ghost(9)
"""
