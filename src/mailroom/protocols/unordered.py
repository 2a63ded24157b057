"""The baseline: deliver every message the moment it arrives.

It stamps messages with seed 004's vector time (a process ticks its own entry
on every send and every receipt, and takes the entrywise max on receipt), so a
``CausalityDetector`` can flag, after the fact, the violations it lets through
(``ep.violations``). Exact duplicates are still dropped.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase, Snapshot, load_counts
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.wire import as_row, packet
from mailroom.protocols.detect import CausalityDetector, CausalityViolation


@packet
@attrs.frozen
class UnorderedPacket:
    sender: int
    seq: int
    vc: Row = attrs.field(converter=as_row)
    payload: Any


class Unordered(EndpointBase):
    """No ordering at all; detects causality violations instead of preventing them."""

    protocol = "Unordered"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = [0] * n
        self._seen: list[set[int]] = [set() for _ in range(n)]
        self.detector = CausalityDetector(pid, n)

    @property
    def clock(self) -> VectorClock:
        return VectorClock(self._clock)

    @property
    def violations(self) -> list[CausalityViolation]:
        return self.detector.violations

    def _stamp(self, payload: Payload) -> tuple[MessageId, UnorderedPacket]:
        self._check_payload(payload)
        mid = self._next_id()
        self._clock[self.pid] += 1
        return mid, UnorderedPacket(self.pid, mid.seq, tuple(self._clock), payload)

    def send(self, payload: Payload, to: int) -> list[Action]:
        self._check_dest(to)
        mid, packet = self._stamp(payload)
        return [Transmit(to, packet, mid)]

    def broadcast(self, payload: Payload) -> list[Action]:
        mid, packet = self._stamp(payload)
        self._seen[self.pid].add(mid.seq)
        actions: list[Action] = [
            Transmit(to, packet, mid) for to in range(self.n) if to != self.pid
        ]
        actions.append(Deliver(Message(mid, self.pid, payload)))
        return actions

    def receive(self, packet: object) -> list[Action]:
        validate.expect_type(packet, UnorderedPacket, "Unordered")
        assert isinstance(packet, UnorderedPacket)
        sender = validate.pid(packet.sender, self.n)
        seq = validate.positive(packet.seq, "seq")
        vc = validate.vector(packet.vc, self.n, "vector clock")
        if seq in self._seen[sender]:
            self.duplicates += 1
            return []
        if sender != self.pid and vc[self.pid] > self._clock[self.pid]:
            raise RemoteError(
                f"vector clock[{self.pid}] claims P{self.pid} had events it never had"
            )
        self._seen[sender].add(seq)
        mid = MessageId(sender, seq)
        self.detector.observe(mid, VectorClock(vc))
        for k, v in enumerate(vc):
            if v > self._clock[k]:
                self._clock[k] = v
        self._clock[self.pid] += 1
        return [Deliver(Message(mid, sender, packet.payload))]

    def buffered(self) -> int:
        return 0

    def pending(self) -> list[Pending]:
        return []

    def snapshot(self) -> Snapshot:
        data = self._header()
        data["clock"] = list(self._clock)
        data["seen"] = [sorted(s) for s in self._seen]
        data["known"] = self.detector.known.tolist()
        return data

    def _load(self, data: Snapshot) -> None:
        self._clock[:] = load_counts(data["clock"], self.n, "clock")
        seen = data["seen"]
        if not isinstance(seen, list) or len(seen) != self.n:
            raise LocalError(f"snapshot field seen must have {self.n} lists")
        self._seen = [set(s) for s in seen]
        self.detector.known = VectorClock(load_counts(data["known"], self.n, "known"))
