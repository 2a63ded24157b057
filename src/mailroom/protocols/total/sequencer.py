"""Coordinator-based total order broadcast (a sequencer numbers every message).

Rules:

- To broadcast, a process sends its message to the sequencer (a request); the
  sequencer broadcasts its own messages directly.
- The sequencer numbers requests 1, 2, 3, ... in the order they reach it and
  forwards each numbered message to every other process (the origin included);
  it delivers each message itself as it numbers it.
- Every other process delivers numbered messages in number order: number
  ``delivered + 1`` next, later numbers wait in the mail room.
- A request the sequencer has already numbered, or a numbered message at or
  below ``delivered`` or already held, is a duplicate and is dropped quietly.
  A request at a process that is not the sequencer, a numbered message at the
  sequencer, or two different messages with the same number are impossible:
  RemoteError.

Batches (``broadcast_many``): a process asks for several consecutive messages in one
``SequencerRequestBatch``; the sequencer numbers them as one range and forwards one
``SequencerOrderBatch`` per destination (numbers ``first_number``.. go to seqs
``first_seq``..). Receivers treat a batch as the orders it stands for: numbers at or
below ``delivered`` are skipped, a held number must name the same message, and a
batch that cannot be delivered yet is held as its single orders (so the state, and
the snapshot, are those of k single orders). The deliveries are those of k single
broadcasts under the same schedule.

Guarantees: total order always. The order is the order of arrival at the
sequencer, so over a network that reorders packets it is not FIFO (a sender's
second request may overtake its first) and hence not causal. Over FIFO
channels (``Stack(Fifo(...), Sequencer(...))``) it is FIFO and causal: a
message sent after delivering m is requested after m was numbered.

Extension points (``mailroom.core.hooks``): ``deliver_order`` and ``deliver_batch``,
the receivers' delivery rule for single orders and for batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit, delivery
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import Field, argument, counter, packets, window
from mailroom.core.wire import as_row, packet
from mailroom.protocols import _window as reorder
from mailroom.protocols._packets import carries_batch, carries_message, carries_seq

#: The most messages one batch packet carries (a longer batch travels as several).
BATCH_LIMIT = validate.BATCH_LIMIT


@packet
@attrs.frozen
class SequencerRequest:
    """``sender`` asks the sequencer to number its ``seq``-th message."""

    sender: int
    seq: int
    payload: Any

    carries = carries_seq


@packet
@attrs.frozen
class SequencerOrder:
    """The sequencer gave message (origin, seq) the global ``number``."""

    number: int
    origin: int
    seq: int
    payload: Any

    carries = carries_message("origin", "seq")


@packet
@attrs.frozen
class SequencerRequestBatch:
    """``sender`` asks the sequencer to number its messages ``first_seq``, ``first_seq + 1``..."""

    sender: int
    first_seq: int
    payloads: tuple[Any, ...] = attrs.field(converter=as_row)

    carries, carries_all, carries_last = carries_batch("sender", "first_seq")


@packet
@attrs.frozen
class SequencerOrderBatch:
    """The sequencer gave messages (origin, first_seq + i) the numbers first_number + i."""

    first_number: int
    origin: int
    first_seq: int
    payloads: tuple[Any, ...] = attrs.field(converter=as_row)

    carries, carries_all, carries_last = carries_batch("origin", "first_seq")


class Sequencer(EndpointBase):
    """Total order through one coordinator (process ``sequencer``)."""

    protocol = "Sequencer"

    def __init__(self, pid: int, n: int, sequencer: int = 0) -> None:
        super().__init__(pid, n)
        if type(sequencer) is not int or not 0 <= sequencer < n:
            raise LocalError(f"sequencer must be in 0..{n - 1}, got {sequencer!r}")
        self.sequencer = sequencer
        #: numbers given out (at the sequencer) and messages delivered in number order
        self.numbered = 0
        self.delivered = 0
        # at the sequencer: per origin, every seq <= _low[o] is numbered, and so is _high[o]
        self._low = [0] * n
        self._high: list[set[int]] = [set() for _ in range(n)]
        self._held: dict[int, SequencerOrder] = {}

    @property
    def is_sequencer(self) -> bool:
        return self.pid == self.sequencer

    def first_to_deliver(self) -> int:
        """The process that delivers every message first (it numbers it), and in the
        order every process delivers in: whatever a process has delivered, it holds
        too (safe delivery counts it without its report)."""
        return self.sequencer

    # -- the application's side ----------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to everyone in the sequencer's order."""
        self.check_payload(payload)
        mid = self.next_id()
        if self.is_sequencer:
            return self._number(mid.origin, mid.seq, payload)
        return [Transmit(self.sequencer, SequencerRequest(self.pid, mid.seq, payload), mid)]

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one request (or order) packet per
        ``BATCH_LIMIT`` of them: the deliveries of one ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._send_batch)

    def _send_batch(self, chunk: tuple[Payload, ...]) -> list[Action]:
        """Ask for (or, at the sequencer, give) the chunk's numbers as one range."""
        first_seq = self.sent_count + 1
        self.sent_count += len(chunk)
        if self.is_sequencer:
            return self._number_run(self.pid, first_seq, chunk)
        request = SequencerRequestBatch(self.pid, first_seq, chunk)
        return [Transmit(self.sequencer, request, MessageId(self.pid, first_seq))]

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _on_request(self, p: SequencerRequest) -> list[Action]:
        if not self.is_sequencer:
            raise RemoteError(f"P{self.pid} got a request but the sequencer is P{self.sequencer}")
        sender = validate.pid(p.sender, self.n)
        seq = validate.positive(p.seq, "seq")
        if sender == self.pid:
            raise RemoteError("the sequencer's own messages never travel as requests")
        if reorder.seen(self._low, self._high, sender, seq):
            self.duplicates += 1
            return []
        return self._number(sender, seq, p.payload)

    def _on_request_batch(self, p: SequencerRequestBatch) -> list[Action]:
        if not self.is_sequencer:
            raise RemoteError(f"P{self.pid} got a request but the sequencer is P{self.sequencer}")
        sender = validate.pid(p.sender, self.n)
        payloads = validate.batch_payloads(p.payloads)
        first_seq = validate.first_of_range(p.first_seq, len(payloads), "seq")
        if sender == self.pid:
            raise RemoteError("the sequencer's own messages never travel as requests")
        fresh = reorder.unseen(self._low, self._high, sender, first_seq, len(payloads))
        if not fresh:
            self.duplicates += 1
            return []
        actions: list[Action] = []
        start = fresh[0]
        for k, i in enumerate(fresh):  # number each run of consecutive new seqs as a range
            if k + 1 == len(fresh) or fresh[k + 1] != i + 1:
                actions += self._number_run(sender, first_seq + start, payloads[start : i + 1])
                if k + 1 < len(fresh):
                    start = fresh[k + 1]
        return actions

    def _number_run(self, origin: int, first_seq: int, payloads: tuple[Any, ...]) -> list[Action]:
        """At the sequencer: number (origin, first_seq..) as one range, forward, deliver."""
        if len(payloads) == 1:
            return self._number(origin, first_seq, payloads[0])
        reorder.mark(self._low, self._high, origin, first_seq, len(payloads))
        first = self.numbered + 1
        self.numbered += len(payloads)
        self.delivered += len(payloads)
        order = SequencerOrderBatch(first, origin, first_seq, payloads)
        mid = MessageId(origin, first_seq)
        actions: list[Action] = [Transmit(to, order, mid) for to in range(self.n) if to != self.pid]
        actions += [delivery(origin, first_seq + i, payload) for i, payload in enumerate(payloads)]
        return actions

    def _number(self, origin: int, seq: int, payload: Payload) -> list[Action]:
        """At the sequencer: give (origin, seq) the next number, forward and deliver it."""
        reorder.mark(self._low, self._high, origin, seq)
        self.numbered += 1
        self.delivered += 1
        order = SequencerOrder(self.numbered, origin, seq, payload)
        mid = MessageId(origin, seq)
        actions: list[Action] = [Transmit(to, order, mid) for to in range(self.n) if to != self.pid]
        actions.append(delivery(origin, seq, payload))
        return actions

    def _on_order(self, p: SequencerOrder) -> list[Action]:
        if self.is_sequencer:
            raise RemoteError(f"P{self.pid} is the sequencer; nobody else may number messages")
        number = validate.positive(p.number, "sequence number")
        origin = validate.pid(p.origin, self.n, "origin")
        seq = validate.positive(p.seq, "seq")
        if origin == self.pid and seq > self.sent_count:
            raise RemoteError(f"P{self.pid} never sent message {seq} (it sent {self.sent_count})")
        held = self._held.get(number)
        if held is not None and (held.origin, held.seq) != (origin, seq):
            raise RemoteError(
                f"number {number} names {MessageId(origin, seq)} but already "
                f"{MessageId(held.origin, held.seq)}"
            )
        if number <= self.delivered or held is not None:
            self.duplicates += 1
            return []
        return self.deliver_order(p)

    @hook
    def deliver_order(self, order: SequencerOrder) -> list[Action]:
        """Rule, at a receiver: a new order (checked, not a duplicate) is held until its
        number is the next to deliver; deliver every held order whose number is next."""
        self._held[order.number] = order
        actions: list[Action] = []
        while (nxt := self._held.pop(self.delivered + 1, None)) is not None:
            self.delivered += 1
            actions.append(Deliver(_message(nxt)))
        return actions

    def _on_order_batch(self, p: SequencerOrderBatch) -> list[Action]:
        if self.is_sequencer:
            raise RemoteError(f"P{self.pid} is the sequencer; nobody else may number messages")
        payloads = validate.batch_payloads(p.payloads)
        size = len(payloads)
        first = validate.first_of_range(p.first_number, size, "sequence number")
        origin = validate.pid(p.origin, self.n, "origin")
        first_seq = validate.first_of_range(p.first_seq, size, "seq")
        last_seq = first_seq + size - 1
        if origin == self.pid and last_seq > self.sent_count:
            raise RemoteError(
                f"P{self.pid} never sent message {last_seq} (it sent {self.sent_count})"
            )
        start = max(0, self.delivered + 1 - first)  # the batch's first index not yet delivered
        new = self._new_numbers(first, origin, first_seq, range(start, size))
        if not new:
            self.duplicates += 1
            return []
        if first + start > self.delivered + 1:  # a gap before it: hold its orders
            for i in new:
                self._held[first + i] = SequencerOrder(
                    first + i, origin, first_seq + i, payloads[i]
                )
            return []
        return self.deliver_batch(p, start)

    def _new_numbers(self, first: int, origin: int, first_seq: int, indexes: range) -> list[int]:
        """The ``indexes`` of a batch (numbered from ``first``) not held here yet;
        RemoteError if a held order has one of the batch's numbers for another message."""
        if not self._held:  # (the common case: nothing out of order)
            return list(indexes)
        new = []
        for i in indexes:
            held = self._held.get(first + i)
            if held is None:
                new.append(i)
            elif (held.origin, held.seq) != (origin, first_seq + i):
                raise RemoteError(
                    f"number {first + i} names {MessageId(origin, first_seq + i)} but already "
                    f"{MessageId(held.origin, held.seq)}"
                )
        return new

    @hook
    def deliver_batch(self, batch: SequencerOrderBatch, start: int) -> list[Action]:
        """Rule, at a receiver: a batch of orders (checked) whose index ``start`` has the
        next number to deliver: deliver it from there in number order, then every held
        order that is next."""
        origin, first, first_seq = batch.origin, batch.first_number, batch.first_seq
        payloads = batch.payloads
        held = self._held
        if held:
            for i in range(start, len(payloads)):
                held.pop(first + i, None)
        actions: list[Action] = [
            delivery(origin, first_seq + i, payloads[i]) for i in range(start, len(payloads))
        ]
        self.delivered = first + len(payloads) - 1
        while (nxt := self._held.pop(self.delivered + 1, None)) is not None:
            self.delivered += 1
            actions.append(Deliver(_message(nxt)))
        return actions

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._held)

    def _held_in_order(self) -> list[SequencerOrder]:
        """The held orders by number."""
        return [self._held[k] for k in sorted(self._held)]

    def pending(self) -> list[Pending]:
        out = []
        for p in self._held_in_order():
            number = p.number
            wait = Wait(self.sequencer, self.delivered, number - 1, "sequence number")
            first, last = self.delivered + 1, number - 1
            span = f"number {first}" if first == last else f"numbers {first}..{last}"
            out.append(
                Pending(_message(p), (wait,), f"{span} from the sequencer P{self.sequencer}")
            )
        return out

    def _hold_restored(self, p: SequencerOrder) -> None:
        number = validate.positive(p.number, "sequence number")
        validate.pid(p.origin, self.n, "origin")
        validate.positive(p.seq, "seq")
        if self.is_sequencer or number <= self.delivered + 1 or number in self._held:
            raise LocalError(f"snapshot holds number {number}, deliverable or held twice")
        self._held[number] = p

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[Sequencer]] = Receivers(
        "Sequencer",
        "a request or an order",
        {
            SequencerRequest: _on_request,
            SequencerOrder: _on_order,
            SequencerOrderBatch: _on_order_batch,
            SequencerRequestBatch: _on_request_batch,
        },
    )

    persistent: ClassVar[tuple[Field, ...]] = (
        argument("sequencer"),
        counter("numbered"),
        counter("delivered"),
        window("requests", "_low", "_high"),
        packets("held", SequencerOrder, _held_in_order, _hold_restored),
    )


def _message(p: SequencerOrder) -> Message:
    return Message(MessageId(p.origin, p.seq), p.origin, p.payload)


__all__ = [
    "BATCH_LIMIT",
    "Sequencer",
    "SequencerOrder",
    "SequencerOrderBatch",
    "SequencerRequest",
    "SequencerRequestBatch",
]
