"""CBCAST: vector-clock causal broadcast (Birman et al.; seeds 000 and 004).

State at P_i: ``clock``, where clock[k] counts the broadcasts of P_k delivered
here (clock[i] counts P_i's own, which it delivers at once).

Broadcast: clock[i] += 1; stamp the message with the clock; deliver it locally.
Deliverable: m from j with stamp V when V[j] == clock[j] + 1 (next from j: the
"one greater" check) and V[k] <= clock[k] for every k != j.
After delivery: clock[j] += 1 (the entrywise max with V, since every other
entry of V is already covered).
A stamp with V[j] <= clock[j] is a duplicate (or the echo of our own broadcast)
and is dropped quietly.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase, Snapshot, load_counts, snap_list
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.wire import as_row, packet, packet_from_data, packet_to_data
from mailroom.protocols._buffer import DependencyBuffer


@packet
@attrs.frozen
class CBCASTPacket:
    """A broadcast stamped with the sender's vector clock; its seq is ``vc[sender]``."""

    sender: int
    vc: Row = attrs.field(converter=as_row)
    payload: Any

    def carries(self) -> MessageId | None:
        """The application message this packet carries."""
        return MessageId(self.sender, self.vc[self.sender])


class CBCAST(EndpointBase):
    """Causal broadcast with vector clocks."""

    protocol = "CBCAST"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = [0] * n
        self._buffer: DependencyBuffer[CBCASTPacket] = DependencyBuffer(self._clock)

    @property
    def clock(self) -> VectorClock:
        return VectorClock(self._clock)

    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to every process; the sender delivers it at once."""
        self._check_payload(payload)
        mid = self._next_id()
        self._clock[self.pid] += 1
        packet = CBCASTPacket(self.pid, tuple(self._clock), payload)
        actions: list[Action] = [
            Transmit(to, packet, mid) for to in range(self.n) if to != self.pid
        ]
        actions.append(Deliver(Message(mid, self.pid, payload)))
        return actions

    def _validate(self, packet: object) -> CBCASTPacket:
        if type(packet) is CBCASTPacket:  # the common case inline (the same rules as below)
            who, stamp, mine = packet.sender, packet.vc, self._clock[self.pid]
            if (
                type(who) is int
                and 0 <= who < self.n
                and type(stamp) is tuple
                and len(stamp) == self.n
                and all(type(v) is int and 0 <= v <= validate.MAX_COUNTER for v in stamp)
                and stamp[who] > 0
                and stamp[self.pid] <= mine
            ):
                return packet
        validate.expect_type(packet, CBCASTPacket, "CBCAST")
        assert isinstance(packet, CBCASTPacket)
        sender = validate.pid(packet.sender, self.n)
        vc = validate.vector(packet.vc, self.n, "vector clock")
        validate.positive(vc[sender], f"vector clock[{sender}] (the sender's own entry)")
        if vc[self.pid] > self._clock[self.pid]:
            raise RemoteError(
                f"vector clock[{self.pid}] = {vc[self.pid]} claims P{self.pid} broadcast "
                f"more than it has ({self._clock[self.pid]})"
            )
        return packet

    def receive(self, packet: object) -> list[Action]:
        p = self._validate(packet)
        index = p.vc[p.sender] - 1
        if index < self._clock[p.sender] or self._buffer.holds(p.sender, index):
            self.duplicates += 1  # a duplicate, or the echo of our own broadcast
            return []
        self._buffer.add(p.sender, index, p.vc, p)
        return self._drain()

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while (p := self._buffer.pop_ready()) is not None:
            self._clock[p.sender] += 1
            actions.append(Deliver(_message(p)))
            self._buffer.delivered_one(p.sender)
        return actions

    def buffered(self) -> int:
        return len(self._buffer)

    def pending(self) -> list[Pending]:
        return [
            Pending(_message(p), self._buffer.waits(s, i, "seq"))
            for s, i, p in self._buffer.items()
        ]

    def snapshot(self) -> Snapshot:
        data = self._header()
        data["clock"] = list(self._clock)
        data["buffer"] = [packet_to_data(p) for p in self._buffer.by_arrival()]
        return data

    def _load(self, data: Snapshot) -> None:
        self._clock[:] = load_counts(data["clock"], self.n, "clock")
        for item in snap_list(data["buffer"], "buffer"):
            p = self._validate(packet_from_data(CBCASTPacket, item))
            index = p.vc[p.sender] - 1
            if index < self._clock[p.sender] or self._buffer.holds(p.sender, index):
                raise LocalError("snapshot buffers a packet delivered or held twice")
            self._buffer.add(p.sender, index, p.vc, p)
        if self._buffer.pop_ready() is not None:
            raise LocalError("snapshot buffers a packet that was deliverable")


def _message(p: CBCASTPacket) -> Message:
    return Message(MessageId(p.sender, p.vc[p.sender]), p.sender, p.payload)
