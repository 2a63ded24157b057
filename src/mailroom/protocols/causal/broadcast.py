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
single packets: the state and snapshot are the same). A batch that must wait is
held as one run (``DependencyBuffer.offer_run``: one entry, one scan of the stamp),
its messages' packets built as each is released.

Extension point (``mailroom.core.hooks``): ``batch_deliverable``, when a batch is
delivered whole as it arrives.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import le
from typing import Any, ClassVar

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit, delivery
from mailroom.core.dispatch import Receivers
from mailroom.core.errors import RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import Field, counts
from mailroom.core.wire import as_row, packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import Payloads, carries_stamped, carries_stamped_batch

_INT = frozenset((int,))


@packet
@attrs.frozen
class CBCASTPacket:
    """A broadcast stamped with the sender's vector clock; its seq is ``vc[sender]``."""

    sender: int
    vc: Row = attrs.field(converter=as_row)
    payload: Any

    carries = carries_stamped("vc")


@packet
@attrs.frozen
class CBCASTBatch:
    """k consecutive broadcasts of ``sender``; ``vc`` is the first one's stamp, message
    i's is ``vc`` with ``vc[sender] + i``."""

    sender: int
    vc: Row = attrs.field(converter=as_row)
    payloads: Payloads = attrs.field(converter=as_row)

    carries, carries_all, carries_last = carries_stamped_batch("vc")


_new = object.__new__
_SENDER, _VC, _PAYLOAD = (CBCASTPacket.__dict__[f].__set__ for f in ("sender", "vc", "payload"))


def _stamped(sender: int, vc: tuple[int, ...], payload: Any) -> CBCASTPacket:
    """``CBCASTPacket(sender, vc, payload)`` for a stamp that is a tuple already, its
    slots filled directly (a held batch's message, built when it is released)."""
    p = _new(CBCASTPacket)
    _SENDER(p, sender)
    _VC(p, vc)
    _PAYLOAD(p, payload)
    return p


assert tuple(f.name for f in attrs.fields(CBCASTPacket)) == ("sender", "vc", "payload")
assert _stamped(1, (0, 2), "x") == CBCASTPacket(1, (0, 2), "x")


class CBCAST(BufferedEndpoint):
    """Causal broadcast with vector clocks."""

    protocol = "CBCAST"
    waits_for = "seq"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = [0] * n
        self._buffer: DependencyBuffer[CBCASTPacket] = DependencyBuffer(self._clock)

    @property
    def clock(self) -> VectorClock:
        return VectorClock(self._clock)

    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to every process; the sender delivers it at once."""
        self.check_payload(payload)
        mid = self.next_id()
        self._clock[self.pid] += 1
        packet = CBCASTPacket(self.pid, tuple(self._clock), payload)
        actions: list[Action] = [
            Transmit(to, packet, mid) for to in range(self.n) if to != self.pid
        ]
        actions.append(delivery(self.pid, mid.seq, payload))
        return actions

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one ``CBCASTBatch`` per ``BATCH_LIMIT`` of them:
        the deliveries of one ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        first = self.next_ids(len(payloads))
        self._clock[self.pid] += 1
        packet = CBCASTBatch(self.pid, tuple(self._clock), payloads)
        self._clock[self.pid] += len(payloads) - 1
        actions: list[Action] = [
            Transmit(to, packet, first) for to in range(self.n) if to != self.pid
        ]
        actions += [delivery(self.pid, first.seq + i, x) for i, x in enumerate(payloads)]
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
            return [delivery(sender, first + i, x) for i, x in enumerate(payloads)]
        before = tuple(vc[:sender])
        after = tuple(vc[sender + 1 :])

        def message(i: int) -> CBCASTPacket:
            return _stamped(sender, (*before, first + i, *after), payloads[i])

        # Held as one run when none of it is here yet (what k single packets would do,
        # without a packet and a scan of the stamp per message until each is released)
        if self._buffer.offer_run(sender, first - 1, vc, len(payloads), message):
            return self._drain()
        actions: list[Action] = []
        fresh = False
        for i, payload in enumerate(payloads):
            index = first + i - 1
            if index < self._clock[sender] or self._buffer.holds(sender, index):
                continue
            fresh = True
            stamp = (*before, first + i, *after)
            self._buffer.offer(sender, index, stamp, CBCASTPacket(sender, stamp, payload))
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
        if type(packet) is CBCASTPacket:  # the common case inline: the rules below, no calls
            who, stamp = packet.sender, packet.vc
            if (
                type(who) is int
                and 0 <= who < self.n
                and type(stamp) is tuple
                and len(stamp) == self.n
                and _INT.issuperset(map(type, stamp))
                and min(stamp) >= 0
                and max(stamp) <= validate.MAX_COUNTER
                and stamp[who] > 0
                and stamp[self.pid] <= self._clock[self.pid]
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

    def _offer(self, p: CBCASTPacket) -> bool:
        """Hold ``p``: the ``vc[sender]``-th from its sender, needing the rest of ``vc``."""
        return self._buffer.offer(p.sender, p.vc[p.sender] - 1, p.vc, p)

    def receive(self, packet: object) -> list[Action]:
        # the common case inline, while nothing is held: a packet from another process,
        # next from its sender, whose stamp is ints (checked before any comparison), none
        # negative, each at most this clock once the packet counts as delivered (so within
        # _validate's bounds, and the stamp's own entry positive) is delivered at once.
        # Anything else takes the general path (_validate, then the mail room).
        clock = self._clock
        if (
            type(packet) is CBCASTPacket
            and not self._buffer.held
            and type(who := packet.sender) is int
            and 0 <= who < self.n
            and who != self.pid
            and type(stamp := packet.vc) is tuple
            and len(stamp) == self.n
            and _INT.issuperset(map(type, stamp))
            and stamp[who] == clock[who] + 1
            and min(stamp) >= 0
        ):
            clock[who] += 1  # as if delivered: then every entry must be covered
            if all(map(le, stamp, clock)):
                return [delivery(who, stamp[who], packet.payload)]
            clock[who] -= 1
        return self.RECEIVES[type(packet)](self, packet)

    def _on_packet(self, p: CBCASTPacket) -> list[Action]:
        return self._take(self._offer(self._validate(p)), self._delivery)

    #: What ``receive`` does with each class of packet (after the common case inline).
    RECEIVES: ClassVar[Receivers[CBCAST]] = Receivers(
        "CBCAST", "a CBCASTPacket", {CBCASTPacket: _on_packet, CBCASTBatch: _receive_batch}
    )

    def _message(self, p: CBCASTPacket) -> Message:
        return Message(MessageId(p.sender, p.vc[p.sender]), p.sender, p.payload)

    def _delivery(self, p: CBCASTPacket) -> Deliver:
        return delivery(p.sender, p.vc[p.sender], p.payload)

    def _drain(self) -> list[Action]:
        return self._drained(self._delivery)

    def pending(self) -> list[Pending]:
        return self._pending_of(self._message)

    persistent: ClassVar[tuple[Field, ...]] = (
        counts("_clock", "clock"),
        mail_room(CBCASTPacket, _validate, _offer),
    )
