"""The baseline: deliver every message the moment it arrives.

It stamps messages with an event-counting vector time (a process ticks its own entry
on every send and every receipt, and takes the entrywise max on receipt), so a
``CausalityDetector`` can flag, after the fact, the violations it lets through
(``ep.violations``). Exact duplicates are still dropped: each packet carries
``index``, the sender's count of packets to this destination, and a receiver
keeps per sender the index below which everything arrived plus those above it
that did (the reordering window), so nothing is kept per message forever.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import CLOCK, Field, counts, window
from mailroom.core.wire import as_row, packet
from mailroom.protocols import _window as reorder
from mailroom.protocols._packets import carries_seq
from mailroom.protocols.detect import CausalityDetector, CausalityViolation


@packet
@attrs.frozen
class UnorderedPacket:
    """Message (sender, seq) stamped with the sender's event-counting vector time ``vc``;
    ``index``: the sender's count of packets to this destination."""

    sender: int
    seq: int
    vc: Row = attrs.field(converter=as_row)
    payload: Any
    index: int

    carries = carries_seq


class Unordered(EndpointBase):
    """No ordering at all; detects causality violations instead of preventing them."""

    protocol = "Unordered"
    snapshot_version = 2

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = [0] * n
        self._sent_to = [0] * n
        #: per sender: every index <= _low[p] arrived, and so did each in _high[p]
        self._low = [0] * n
        self._high: list[set[int]] = [set() for _ in range(n)]
        self.detector = CausalityDetector(pid, n)

    @property
    def clock(self) -> VectorClock:
        return VectorClock(self._clock)

    @property
    def violations(self) -> list[CausalityViolation]:
        return self.detector.violations

    def _stamp(self, payload: Payload) -> tuple[MessageId, Row]:
        self.check_payload(payload)
        mid = self.next_id()
        self._clock[self.pid] += 1
        return mid, tuple(self._clock)

    def _packet(self, mid: MessageId, vc: Row, payload: Payload, to: int) -> UnorderedPacket:
        self._sent_to[to] += 1
        return UnorderedPacket(self.pid, mid.seq, vc, payload, self._sent_to[to])

    def send(self, payload: Payload, to: int) -> list[Action]:
        self.check_dest(to)
        mid, vc = self._stamp(payload)
        return [Transmit(to, self._packet(mid, vc, payload, to), mid)]

    def broadcast(self, payload: Payload) -> list[Action]:
        mid, vc = self._stamp(payload)
        actions: list[Action] = [
            Transmit(to, self._packet(mid, vc, payload, to), mid)
            for to in range(self.n)
            if to != self.pid
        ]
        actions.append(Deliver(Message(mid, self.pid, payload)))
        return actions

    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _on_packet(self, packet: UnorderedPacket) -> list[Action]:
        sender = validate.pid(packet.sender, self.n)
        seq = validate.positive(packet.seq, "seq")
        vc = validate.vector(packet.vc, self.n, "vector clock")
        index = validate.positive(packet.index, "index")
        if index > seq:
            raise RemoteError(f"index {index} exceeds the sender's count of messages {seq}")
        if reorder.seen(self._low, self._high, sender, index):
            self.duplicates += 1
            return []
        if sender != self.pid and vc[self.pid] > self._clock[self.pid]:
            raise RemoteError(
                f"vector clock[{self.pid}] claims P{self.pid} had events it never had"
            )
        reorder.mark(self._low, self._high, sender, index)
        mid = MessageId(sender, seq)
        self.detector.observe(mid, VectorClock(vc))
        for k, v in enumerate(vc):
            if v > self._clock[k]:
                self._clock[k] = v
        self._clock[self.pid] += 1
        return [Deliver(Message(mid, sender, packet.payload))]

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[Unordered]] = Receivers(
        "Unordered", "a UnorderedPacket", {UnorderedPacket: _on_packet}
    )

    def buffered(self) -> int:
        return 0

    def pending(self) -> list[Pending]:
        return []

    persistent = (
        counts("_clock", "clock"),
        counts("_sent_to", "sent_to"),
        window("seen", "_low", "_high"),
        Field("known", "detector.known", CLOCK),
    )
