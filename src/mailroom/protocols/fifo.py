"""FIFO delivery with per-channel sequence numbers (the classic FIFO multicast protocol).

Rules: the sender numbers its messages on each channel (sender -> dest) 1, 2, 3...;
the receiver delivers number ``delivered[sender] + 1`` and buffers later ones;
a number at or below what it has delivered, or one already buffered, is a
duplicate and is dropped quietly. A broadcast is one message sent on every
channel; the sender delivers its own copy at once, unless earlier messages it
sent to itself are still in flight, in which case the copy follows them.

Batches (``send_many``, ``broadcast_many``): one ``FifoBatch`` carries k consecutive
messages on one channel, (sender, first_seq + i) numbered first_channel + i. A
receiver takes it as the k packets arriving one after another: it delivers what they
would and holds what they would, as single packets (so the state and the snapshot
are those of k single packets).

Extension point (``mailroom.core.hooks``): ``deliver_run``, how a batch that is next on
its channel, while nothing is held, is delivered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit, delivery
from mailroom.core.dispatch import Receivers
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import counts
from mailroom.core.wire import as_row, packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import Payloads, UnicastBatch, carries_seq

_MAX = validate.MAX_COUNTER


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


@packet
@attrs.frozen
class FifoBatch(UnicastBatch):
    """k consecutive messages on the channel sender -> dest: message i is (sender,
    first_seq + i), the (first_channel + i)-th on the channel."""

    first_channel: int
    payloads: Payloads = attrs.field(converter=as_row)


class Fifo(BufferedEndpoint):
    """FIFO order per sender; no causal or total order."""

    protocol = "Fifo"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self.channel_out = [0] * n
        self.delivered = [0] * n
        self._buffer: DependencyBuffer[FifoPacket] = DependencyBuffer(self.delivered)
        self._no_needs = (0,) * n

    def send(self, payload: Payload, to: int) -> list[Action]:
        self.check_dest(to)
        self.check_payload(payload)
        mid = self.next_id()
        self.channel_out[to] += 1
        packet = FifoPacket(self.pid, to, mid.seq, self.channel_out[to], payload)
        return [Transmit(to, packet, mid)]

    def send_many(self, payloads: Sequence[Payload], to: int) -> list[Action]:
        """Send ``payloads`` to ``to`` in order, one ``FifoBatch`` per ``BATCH_LIMIT``
        of them: the deliveries of one ``send`` each."""
        return self._send_chunks(payloads, to, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...], to: int) -> list[Action]:
        first = self.next_ids(len(payloads))
        start = self.channel_out[to] + 1
        self.channel_out[to] += len(payloads)
        return [Transmit(to, FifoBatch(self.pid, to, first.seq, start, payloads), first)]

    def broadcast(self, payload: Payload) -> list[Action]:
        self.check_payload(payload)
        mid = self.next_id()
        actions: list[Action] = []
        for to in range(self.n):
            self.channel_out[to] += 1
            packet = FifoPacket(self.pid, to, mid.seq, self.channel_out[to], payload)
            if to != self.pid:
                actions.append(Transmit(to, packet, mid))
            elif self.delivered[to] == self.channel_out[to] - 1:
                # nothing of ours is still on its way to us: deliver at once
                self.delivered[to] += 1
                actions.append(delivery(self.pid, mid.seq, payload))
            else:
                # earlier self-sends are in flight; this copy must follow them
                actions.append(Transmit(to, packet, mid))
        return actions

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one ``FifoBatch`` per destination and
        ``BATCH_LIMIT`` of them: the deliveries of one ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._broadcast_batch)

    def _broadcast_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        first = self.next_ids(len(payloads))
        size = len(payloads)
        actions: list[Action] = []
        for to in range(self.n):
            start = self.channel_out[to] + 1
            self.channel_out[to] += size
            if to == self.pid and self.delivered[to] == start - 1:
                # as in broadcast: nothing of ours in flight to us, so all k at once
                self.delivered[to] += size
                actions += [delivery(to, first.seq + i, p) for i, p in enumerate(payloads)]
            else:
                batch = FifoBatch(self.pid, to, first.seq, start, payloads)
                actions.append(Transmit(to, batch, first))
        return actions

    def _validate(self, packet: object) -> FifoPacket:
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
        # the common case inline (the rules of _validate): while nothing is held, a
        # well-formed packet that is next on its channel is delivered at once; anything
        # else takes the general path (_validate, then the mail room)
        if (
            type(packet) is FifoPacket
            and not self._buffer.held
            and type(sender := packet.sender) is int
            and 0 <= sender < self.n
            and type(channel := packet.channel) is int
            and channel == self.delivered[sender] + 1
            and channel <= _MAX
            and type(dest := packet.dest) is int
            and dest == self.pid
            and type(seq := packet.seq) is int
            and 0 < seq <= _MAX
        ):
            self.delivered[sender] = channel
            return [delivery(sender, seq, packet.payload)]
        return self.RECEIVES[type(packet)](self, packet)

    def _on_packet(self, p: FifoPacket) -> list[Action]:
        return self._take(self._offer(self._validate(p)), self._delivery)

    def _receive_batch(self, p: FifoBatch) -> list[Action]:
        """The batch as its k packets arriving one after another."""
        sender = validate.pid(p.sender, self.n)
        validate.dest(p.dest, self.pid, self.n)
        payloads = validate.batch_payloads(p.payloads)
        first_seq = validate.first_of_range(p.first_seq, len(payloads), "seq")
        first = validate.first_of_range(p.first_channel, len(payloads), "channel")
        if first == self.delivered[sender] + 1 and not self._buffer.held:
            # each is next on its channel as it arrives and nothing is held to release
            self.delivered[sender] += len(payloads)
            return self.deliver_run(sender, first_seq, payloads)
        packets = (
            FifoPacket(sender, self.pid, first_seq + i, first + i, payload)
            for i, payload in enumerate(payloads)
        )
        return self._run(map(self._offer, packets), self._drain)

    #: What ``receive`` does with each class of packet (after the common case inline).
    RECEIVES: ClassVar[Receivers[Fifo]] = Receivers(
        "Fifo", "a FifoPacket", {FifoPacket: _on_packet, FifoBatch: _receive_batch}
    )

    @hook
    def deliver_run(self, sender: int, first_seq: int, payloads: tuple[Any, ...]) -> list[Action]:
        """Rule, at a receiver: a batch (checked, counted as delivered) whose messages are
        next on their channel is delivered whole, in channel order."""
        return [delivery(sender, first_seq + i, x) for i, x in enumerate(payloads)]

    def _message(self, p: FifoPacket) -> Message:
        return Message(MessageId(p.sender, p.seq), p.sender, p.payload)

    def _delivery(self, p: FifoPacket) -> Deliver:
        return delivery(p.sender, p.seq, p.payload)

    def _drain(self) -> list[Action]:
        return self._drained(self._delivery)

    def pending(self) -> list[Pending]:
        return self._pending_of(self._message)

    persistent = (
        counts("channel_out"),
        counts("delivered"),
        mail_room(FifoPacket, _validate, _offer),
    )
