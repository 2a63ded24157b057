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
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.persist import counts
from mailroom.core.wire import packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import carries_seq


@packet
@attrs.frozen
class FifoPacket:
    """``channel`` is this message's number on the channel sender -> dest (from 1)."""

    sender: int
    dest: int
    seq: int
    channel: int
    payload: Any

    carries = carries_seq


class Fifo(BufferedEndpoint):
    """FIFO order per sender; no causal or total order."""

    protocol = "Fifo"
    persistent = (counts("channel_out"), counts("delivered"), mail_room(FifoPacket))

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

    def _validate(self, packet: object) -> FifoPacket:
        if type(packet) is FifoPacket:  # the common case inline (the same rules as below)
            sender, dest, seq, channel = packet.sender, packet.dest, packet.seq, packet.channel
            if (
                type(sender) is int
                and 0 <= sender < self.n
                and dest == self.pid
                and type(dest) is int
                and type(seq) is int
                and 0 < seq <= validate.MAX_COUNTER
                and type(channel) is int
                and 0 < channel <= validate.MAX_COUNTER
            ):
                return packet
        validate.expect_type(packet, FifoPacket, "Fifo")
        assert isinstance(packet, FifoPacket)
        validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        validate.positive(packet.seq, "seq")
        validate.positive(packet.channel, "channel")
        return packet

    def _offer(self, p: FifoPacket) -> bool:
        """Hold ``p``, the ``channel``-th on its channel, which needs nothing else."""
        return self._buffer.offer(p.sender, p.channel - 1, self._no_needs, p)

    def receive(self, packet: object) -> list[Action]:
        if not self._offer(self._validate(packet)):
            self.duplicates += 1
            return []
        return self._drain()

    def _message(self, p: FifoPacket) -> Message:
        return Message(MessageId(p.sender, p.seq), p.sender, p.payload)
