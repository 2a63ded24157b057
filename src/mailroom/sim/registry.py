"""The protocols the simulator runs by name, as ``mailroom simulate`` and ``mailroom sweep``
name them: each with its endpoint factory, workload mode and the properties it promises."""

from __future__ import annotations

from collections.abc import Callable

from mailroom.core.endpoint import Endpoint
from mailroom.core.stack import Stack
from mailroom.protocols import (
    CBCAST,
    KS,
    RST,
    Fifo,
    LamportTotalOrder,
    Reliable,
    Sequencer,
    Skeen,
    TaggedCausalBroadcast,
    Unordered,
)
from mailroom.trace.checkers import PROPERTIES

CAUSAL = ("integrity", "fifo", "causal", "liveness")

#: name -> (factory, workload mode, properties the protocol promises)
PROTOCOLS: dict[str, tuple[Callable[[int, int], Endpoint], str, tuple[str, ...]]] = {
    "unordered": (Unordered, "unicast", ("integrity", "liveness")),
    "fifo": (Fifo, "unicast", ("integrity", "fifo", "liveness")),
    "rst": (RST, "unicast", CAUSAL),
    "ks": (KS, "unicast", CAUSAL),
    "cbcast": (CBCAST, "broadcast", CAUSAL),
    "tagged": (TaggedCausalBroadcast, "broadcast", CAUSAL),
    "sequencer": (Sequencer, "broadcast", ("integrity", "total", "liveness")),
    "skeen": (Skeen, "broadcast", ("integrity", "total", "liveness")),
    "lamport": (LamportTotalOrder.stack, "broadcast", PROPERTIES),
}


def make_endpoints(name: str, n: int, *, rto: float | None = None) -> list[Endpoint]:
    """The ``n`` endpoints of protocol ``name``; with an ``rto`` (retransmission timeout),
    over the reliable layer, which a lossy network needs: alone, a protocol never gets
    a lost packet back, so what waits for it waits forever."""
    make = PROTOCOLS[name][0]
    if rto is None:
        return [make(pid, n) for pid in range(n)]
    return [Stack(Reliable(pid, n, rto=rto, max_rto=8 * rto), make(pid, n)) for pid in range(n)]
