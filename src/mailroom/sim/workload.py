"""Seeded random workloads for timed simulations."""

from __future__ import annotations

import random
from functools import partial

from mailroom.sim.simulation import Simulation


def random_workload(
    sim: Simulation,
    count: int,
    *,
    mode: str = "unicast",
    span: float = 10.0,
    seed: int = 0,
    self_sends: bool = False,
) -> None:
    """Schedule ``count`` operations at random times in [0, span).

    ``mode`` is "unicast" (random sender and destination) or "broadcast".
    """
    if mode not in ("unicast", "broadcast"):
        raise ValueError(f"mode must be 'unicast' or 'broadcast', got {mode!r}")
    rng = random.Random(seed)
    n = sim.n
    for i in range(count):
        time = rng.uniform(0, span)
        pid = rng.randrange(n)
        payload = f"m{i}"
        if mode == "broadcast":
            sim.schedule(time, partial(Simulation.broadcast, pid=pid, payload=payload))
        else:
            choices = [q for q in range(n) if self_sends or q != pid or n == 1]
            to = rng.choice(choices)
            sim.schedule(time, partial(Simulation.send, pid=pid, payload=payload, to=to))
