"""The protocols the simulator runs by name: a re-export of ``mailroom.core.registry``
(one registry for the CLI, the runtime, the sweep and the simulator), plus
``make_endpoints``, which builds a group of them, over ``Reliable`` if asked."""

from __future__ import annotations

from mailroom.core.endpoint import Endpoint
from mailroom.core.registry import PROTOCOLS, entry, register_protocol, restore_endpoint
from mailroom.core.stack import Stack
from mailroom.protocols import Reliable

CAUSAL = ("integrity", "fifo", "causal", "liveness")


def make_endpoints(name: str, n: int, *, rto: float | None = None) -> list[Endpoint]:
    """The ``n`` endpoints of protocol ``name``; with an ``rto`` (retransmission timeout),
    over the reliable layer, which a lossy network needs: alone, a protocol never gets
    a lost packet back, so what waits for it waits forever."""
    make = entry(name).factory
    if rto is None:
        return [make(pid, n) for pid in range(n)]
    return [Stack(Reliable(pid, n, rto=rto, max_rto=8 * rto), make(pid, n)) for pid in range(n)]


__all__ = ["CAUSAL", "PROTOCOLS", "make_endpoints", "register_protocol", "restore_endpoint"]
