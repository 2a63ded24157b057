"""FIFO delivery with per-channel sequence numbers (the classic FIFO multicast protocol).

Rules: the sender numbers its messages on each channel (sender -> dest) 1, 2, 3...;
the receiver delivers number ``delivered[sender] + 1`` and buffers later ones;
a number at or below what it has delivered, or one already buffered, is a
duplicate and is dropped quietly. A broadcast is one message sent on every
channel; the sender delivers its own copy at once, unless earlier messages it
sent to itself are still in flight, in which case the copy follows them.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import Field, counts, snap_list
from mailroom.core.wire import packet, packet_from_data, packet_to_data
from mailroom.protocols._buffer import DependencyBuffer


@packet
@attrs.frozen
class FifoPacket:
    """``channel`` is this message's number on the channel sender -> dest (from 1)."""

    sender: int
    dest: int
    seq: int
    channel: int
    payload: Any

    def carries(self) -> MessageId | None:
        """The application message this packet carries."""
        return MessageId(self.sender, self.seq)


class Fifo(EndpointBase):
    """FIFO order per sender; no causal or total order."""

    protocol = "Fifo"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.channel_out = [0] * n
        self.delivered = [0] * n
        self._buffer: DependencyBuffer[FifoPacket] = DependencyBuffer(self.delivered)
        self._no_needs = (0,) * n

    def send(self, payload: Payload, to: int) -> list[Action]:
        self._check_dest(to)
        self._check_payload(payload)
        mid = self._next_id()
        self.channel_out[to] += 1
        packet = FifoPacket(self.pid, to, mid.seq, self.channel_out[to], payload)
        return [Transmit(to, packet, mid)]

    def broadcast(self, payload: Payload) -> list[Action]:
        self._check_payload(payload)
        mid = self._next_id()
        actions: list[Action] = []
        for to in range(self.n):
            self.channel_out[to] += 1
            packet = FifoPacket(self.pid, to, mid.seq, self.channel_out[to], payload)
            if to != self.pid:
                actions.append(Transmit(to, packet, mid))
            elif self.delivered[to] == self.channel_out[to] - 1:
                # nothing of ours is still on its way to us: deliver at once
                self.delivered[to] += 1
                actions.append(Deliver(Message(mid, self.pid, payload)))
            else:
                # earlier self-sends are in flight; this copy must follow them
                actions.append(Transmit(to, packet, mid))
        return actions

    def receive(self, packet: object) -> list[Action]:
        validate.expect_type(packet, FifoPacket, "Fifo")
        assert isinstance(packet, FifoPacket)
        sender = validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        validate.positive(packet.seq, "seq")
        index = validate.positive(packet.channel, "channel") - 1
        if index < self.delivered[sender] or self._buffer.holds(sender, index):
            self.duplicates += 1
            return []
        self._buffer.add(sender, index, self._no_needs, packet)
        return self._drain()

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while (p := self._buffer.pop_ready()) is not None:
            self.delivered[p.sender] += 1
            actions.append(Deliver(_message(p)))
            self._buffer.delivered_one(p.sender)
        return actions

    def buffered(self) -> int:
        return len(self._buffer)

    def pending(self) -> list[Pending]:
        unit = f"message to P{self.pid}"
        return [
            Pending(_message(p), self._buffer.waits(s, i, unit)) for s, i, p in self._buffer.items()
        ]

    def _dump_buffer(self) -> list[Any]:
        return [packet_to_data(p) for p in self._buffer.by_arrival()]

    def _load_buffer(self, data: object) -> None:
        for item in snap_list(data, "buffer"):
            p = packet_from_data(FifoPacket, item)
            sender = validate.pid(p.sender, self.n)
            validate.dest(p.dest, self.pid, self.n)
            validate.positive(p.seq, "seq")
            index = validate.positive(p.channel, "channel") - 1
            if index <= self.delivered[sender] or self._buffer.holds(sender, index):
                raise LocalError("snapshot buffers a packet delivered, deliverable or twice")
            self._buffer.add(sender, index, self._no_needs, p)

    persistent = (
        counts("channel_out"),
        counts("delivered"),
        Field.custom("buffer", _dump_buffer, _load_buffer),
    )


def _message(p: FifoPacket) -> Message:
    return Message(MessageId(p.sender, p.seq), p.sender, p.payload)
