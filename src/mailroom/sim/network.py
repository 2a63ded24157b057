"""The simulated network: its model (delays, duplication, loss) and the packets on it.

``Wire`` holds the packets in flight and decides what happens to each packet an
endpoint transmits: a partition cuts it, the model loses or duplicates it (timed
mode only), and its arrival time is drawn from the link's delay range. In timed
mode every packet put on the wire is scheduled on the ``Agenda``; in adversarial
mode the caller chooses what arrives.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import attrs

from mailroom.core.messages import MessageId
from mailroom.sim.agenda import Agenda
from mailroom.sim.faults import Partition
from mailroom.sim.metrics import Metrics

Link = tuple[int, int]


@attrs.frozen
class NetworkModel:
    """Delays are uniform in ``delay`` (or ``links[(src, dst)]``); self-sends take ``local``."""

    delay: tuple[float, float] = (1.0, 1.0)
    links: dict[Link, tuple[float, float]] = attrs.field(factory=dict)
    duplicate: float = 0.0
    loss: float = 0.0
    local: float = 0.0

    def delay_range(self, src: int, dst: int) -> tuple[float, float]:
        if (src, dst) in self.links:
            return self.links[(src, dst)]
        if src == dst:
            return (self.local, self.local)
        return self.delay

    def settings(self) -> dict[str, Any]:
        """The model as a trace header's settings: delay, duplicate, loss, links if any."""
        out: dict[str, Any] = {
            "delay": list(self.delay),
            "duplicate": self.duplicate,
            "loss": self.loss,
        }
        if self.links:
            out["links"] = {f"{s}->{d}": list(r) for (s, d), r in sorted(self.links.items())}
        return out


@attrs.frozen
class InFlight:
    """A packet on the wire."""

    id: int
    src: int
    dst: int
    packet: object
    message_id: MessageId | None
    sent_at: float
    arrive_at: float


class Wire:
    """The packets in flight, numbered in the order they were put on the wire.

    ``rng`` draws delays, losses and duplicates (the simulation's seeded generator);
    ``agenda`` is None in adversarial mode, where nothing is lost, duplicated or
    scheduled unless the caller says so.
    """

    def __init__(
        self, network: NetworkModel, rng: random.Random, metrics: Metrics, agenda: Agenda | None
    ) -> None:
        self.network = network
        self.random = rng
        self.metrics = metrics
        self.agenda = agenda
        self.in_flight: dict[int, InFlight] = {}
        #: Active partitions (and healed ones not yet pruned by the next ``partition``).
        self.partitions: list[Partition] = []
        self._next_packet = 0

    def cut(self, src: int, dst: int, now: float) -> bool:
        """True while a partition separates ``src`` from ``dst``."""
        return bool(self.partitions) and any(c.cuts(src, dst, now) for c in self.partitions)

    def partition(self, groups: Sequence[Sequence[int]], until: float, now: float) -> Partition:
        """Cut the links between ``groups`` until ``until``; healed partitions are pruned."""
        cut = Partition.of(groups, until)
        self.partitions = [c for c in self.partitions if c.until > now] + [cut]
        return cut

    def send(
        self, src: int, dst: int, packet: object, message_id: MessageId | None, now: float
    ) -> None:
        """An endpoint transmits: a partition cuts the packet; in timed mode the model
        may lose it, or duplicate it (the copy goes first); else it goes on the wire."""
        m = self.metrics
        if self.partitions and self.cut(src, dst, now):
            m.dropped += 1
            return
        if self.agenda is not None:
            network = self.network
            if network.loss and self.random.random() < network.loss:
                m.dropped += 1
                return
            if network.duplicate and self.random.random() < network.duplicate:
                m.duplicated += 1
                self.put(src, dst, packet, message_id, now)
        self.put(src, dst, packet, message_id, now)

    def put(
        self, src: int, dst: int, packet: object, message_id: MessageId | None, now: float
    ) -> int:
        """Put a packet on the wire with an arrival time drawn for its link; its id."""
        self._next_packet += 1
        pid = self._next_packet
        lo, hi = self.network.delay_range(src, dst)
        arrive_at = now + (lo if lo == hi else self.random.uniform(lo, hi))
        self.in_flight[pid] = InFlight(pid, src, dst, packet, message_id, now, arrive_at)
        if self.agenda is not None:
            self.agenda.push(arrive_at, "arrive", pid)
        return pid

    def duplicate(self, packet_id: int, now: float) -> int:
        """Put a copy of an in-flight packet on the wire; the copy's id."""
        p = self.in_flight[packet_id]
        self.metrics.duplicated += 1
        return self.put(p.src, p.dst, p.packet, p.message_id, now)

    def drop(self, packet_id: int) -> None:
        """Lose an in-flight packet."""
        del self.in_flight[packet_id]
        self.metrics.dropped += 1

    def drop_to(self, dst: int) -> None:
        """Lose every packet on its way to ``dst`` (it crashed)."""
        for p in [p for p in self.in_flight.values() if p.dst == dst]:
            self.drop(p.id)

    def packets(self, message: MessageId | None = None, to: int | None = None) -> list[InFlight]:
        """In-flight packets, oldest first, optionally only those carrying ``message`` to ``to``."""
        return [
            p
            for p in sorted(self.in_flight.values(), key=lambda p: p.id)
            if (message is None or p.message_id == message) and (to is None or p.dst == to)
        ]
