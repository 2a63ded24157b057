"""Faults beyond loss and duplication: partitions that heal, crashes and restarts.

- A ``Partition`` splits the processes into groups until time ``until``: a packet
  between two groups is lost if it is sent, or would arrive, while it lasts.
- A crash drops a process's memory: the packets on their way to it are lost, its
  timers stop, and packets that arrive while it is down are lost too. It restarts
  from its last checkpoint, the ``snapshot()`` the simulator took after the last
  step of that process (before that step's packets left: write-ahead), so what it
  delivered or acknowledged before the crash survives it.
- In a membership run (Group endpoints), ``crash(pid)`` without ``down_for`` is
  crash-stop: the process never restarts, its timers stop, packets on their way to
  it are lost while those it already sent still arrive; the survivors' failure
  detectors (``sim.suspect``, or a ``HeartbeatDetector``) take it out of the view,
  and ``sim.join`` may later put a new incarnation in its slot.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from mailroom.core.endpoint import Endpoint, Snapshot
from mailroom.core.registry import restore_endpoint


@attrs.frozen
class Partition:
    """Processes in different ``groups`` cannot talk until ``until``."""

    groups: tuple[frozenset[int], ...]
    until: float

    @classmethod
    def of(cls, groups: Iterable[Iterable[int]], until: float) -> Partition:
        return cls(tuple(frozenset(g) for g in groups), until)

    def cuts(self, src: int, dst: int, now: float) -> bool:
        if now >= self.until:
            return False
        side = [k for k, g in enumerate(self.groups) if src in g]
        return not side or dst not in self.groups[side[0]]


def checkpoint(endpoint: Endpoint) -> Snapshot:
    return endpoint.snapshot()


__all__ = ["Partition", "checkpoint", "restore_endpoint"]
