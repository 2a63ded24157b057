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

Batches (``broadcast_many``): one ``CBCASTBatch`` carries k consecutive broadcasts
of one sender with the first one's stamp V; message i's stamp is V with entry
``sender`` raised by i (the others are the same: nothing is delivered between
them). A receiver takes the batch as the k packets arriving one after another, so
it delivers exactly what k single packets would and holds what they would (as
single packets: the state and snapshot are the same).

Extension point (``mailroom.core.hooks``): ``batch_deliverable``, when a batch is
delivered whole as it arrives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase, Snapshot, load_counts, snap_list
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
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


@packet
@attrs.frozen
class CBCASTBatch:
    """k consecutive broadcasts of ``sender``; ``vc`` is the first one's stamp, message
    i's is ``vc`` with ``vc[sender] + i``."""

    sender: int
    vc: Row = attrs.field(converter=as_row)
    payloads: tuple[Any, ...] = attrs.field(converter=as_row)

    def carries(self) -> MessageId | None:
        """The first application message this packet carries (the frame header's id)."""
        return MessageId(self.sender, self.vc[self.sender])

    def carries_all(self) -> tuple[MessageId, ...]:
        """Every application message this packet carries, in order."""
        first = self.vc[self.sender]
        if type(first) is not int or not isinstance(self.payloads, tuple | list):
            raise TypeError("a batch's first seq and payloads must be an int and a sequence")
        return tuple(MessageId(self.sender, first + i) for i in range(len(self.payloads)))


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

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one ``CBCASTBatch`` per ``BATCH_LIMIT`` of them:
        the deliveries of one ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        first = self._next_id()
        self.sent_count += len(payloads) - 1
        self._clock[self.pid] += 1
        packet = CBCASTBatch(self.pid, tuple(self._clock), payloads)
        self._clock[self.pid] += len(payloads) - 1
        actions: list[Action] = [
            Transmit(to, packet, first) for to in range(self.n) if to != self.pid
        ]
        actions += [
            Deliver(Message(MessageId(self.pid, first.seq + i), self.pid, payload))
            for i, payload in enumerate(payloads)
        ]
        return actions

    def _validate_batch(self, p: CBCASTBatch) -> tuple[int, Sequence[int], tuple[Any, ...]]:
        """The batch's sender, first stamp and payloads; RemoteError if it is malformed."""
        sender = validate.pid(p.sender, self.n)
        vc = validate.vector(p.vc, self.n, "vector clock")
        payloads = validate.batch_payloads(p.payloads)
        first = validate.first_of_range(vc[sender], len(payloads), f"vector clock[{sender}]")
        mine = first + len(payloads) - 1 if sender == self.pid else vc[self.pid]
        if mine > self._clock[self.pid]:
            raise RemoteError(
                f"vector clock[{self.pid}] = {mine} claims P{self.pid} broadcast "
                f"more than it has ({self._clock[self.pid]})"
            )
        return sender, vc, payloads

    def _receive_batch(self, p: CBCASTBatch) -> list[Action]:
        """The batch as its k packets arriving one after another."""
        sender, vc, payloads = self._validate_batch(p)
        first = vc[sender]
        if not self._buffer and self.batch_deliverable(sender, vc):
            # Nothing is held and the batch is next from its sender with its other
            # dependencies met: each message is deliverable as it arrives and releases
            # nothing else, which is what the loop below would find one by one.
            self._clock[sender] += len(payloads)
            return [
                Deliver(Message(MessageId(sender, first + i), sender, payload))
                for i, payload in enumerate(payloads)
            ]
        before = tuple(vc[:sender])
        after = tuple(vc[sender + 1 :])
        actions: list[Action] = []
        fresh = False
        for i, payload in enumerate(payloads):
            index = first + i - 1
            if index < self._clock[sender] or self._buffer.holds(sender, index):
                continue
            fresh = True
            stamp = (*before, first + i, *after)
            self._buffer.add(sender, index, stamp, CBCASTPacket(sender, stamp, payload))
            actions += self._drain()
        if not fresh:
            self.duplicates += 1  # a duplicate, or the echo of our own batch
        return actions

    @hook
    def batch_deliverable(self, sender: int, stamp: Sequence[int]) -> bool:
        """Rule: whether a batch from ``sender`` whose first message has ``stamp`` is
        delivered whole as it arrives (asked when nothing is held here): it is next
        from its sender and every other entry of its stamp is delivered here."""
        clock = self._clock
        return stamp[sender] == clock[sender] + 1 and all(
            v <= c for k, (v, c) in enumerate(zip(stamp, clock, strict=True)) if k != sender
        )

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
        if type(packet) is CBCASTBatch:
            return self._receive_batch(packet)
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
