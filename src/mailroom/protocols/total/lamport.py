"""Lamport's acknowledgement total order (acknowledge to all over FIFO channels).

State at P_i: a Lamport ``clock``; ``latest[k]``, the highest timestamp received
from P_k (on a message or an acknowledgement); the queue of received messages
ordered by (timestamp, origin); ``delivered[k]``, the last seq delivered from P_k.

Rules:

- Broadcast m: clock += 1; send m stamped ts = clock to every other process and
  queue it. Then acknowledge it as every receiver does: clock += 1 and send an
  acknowledgement stamped clock to every other process.
- Receipt of m stamped ts from P_p: clock = max(clock, ts) + 1; latest[p] =
  max(latest[p], ts); queue m; send an acknowledgement stamped clock to every
  other process (P_p included).
- Receipt of an acknowledgement stamped a from P_k: clock = max(clock, a);
  latest[k] = max(latest[k], a). An acknowledgement only says "P_k's clock has
  passed a", so one that arrives before the message it acknowledges is fine,
  and one acknowledgement may release several messages.
- Delivery: while the lowest queued message has stamp ts and latest[k] > ts for
  every other process P_k, deliver it.

Why it works needs FIFO channels: once P_k has sent something stamped above ts,
every message P_k stamps ts or lower was sent earlier and, over a FIFO channel,
has arrived already. Use it as ``Stack(Fifo(pid, n), LamportTotalOrder(pid, n))``
(``LamportTotalOrder.stack(pid, n)``); over a network that reorders packets it
breaks total order. With FIFO channels it is also FIFO and causal: deliveries
follow Lamport timestamps, which respect happens-before.

Batches (``broadcast_many``): one ``LamportBatch`` carries k consecutive messages of
one sender, stamped ``first_ts``, ``first_ts + 1``...: the sender ticks its clock once
per message, as k broadcasts would, but acknowledges the batch once (an
acknowledgement only says "my clock has passed a", and one stamped above the batch's
last stamp says it of every message in it). A receiver takes the batch as one event:
clock = max(clock, last stamp) + 1, every message queued (as single messages, so the
state and the snapshot are those of k messages), one acknowledgement of the last.
Delivery is unchanged: the argument above holds because a batch arrives whole, in
FIFO order with everything else its sender sent.
Extension point (``mailroom.core.hooks``): ``stamp_batch``, the stamps a batch's
sender gives its messages.

A copy of a queued or delivered message is dropped quietly. A packet from this
process itself or from a pid outside the group, or an acknowledgement of a
message this process never sent: RemoteError.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Transmit, delivery
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import counter, counts, packets
from mailroom.core.stack import Stack
from mailroom.core.wire import as_row, packet
from mailroom.protocols._packets import Payloads, carries_batch, carries_none, carries_seq
from mailroom.protocols.fifo import Fifo


@packet
@attrs.frozen
class LamportMessage:
    """Message (sender, seq) stamped ``ts`` by its sender's Lamport clock."""

    sender: int
    seq: int
    ts: int
    payload: Any

    carries = carries_seq


@packet
@attrs.frozen
class LamportBatch:
    """Messages (sender, first_seq + i) stamped first_ts + i by their sender's clock."""

    sender: int
    first_seq: int
    first_ts: int
    payloads: Payloads = attrs.field(converter=as_row)

    carries, carries_all, carries_last = carries_batch("sender", "first_seq")


@packet
@attrs.frozen
class LamportAck:
    """``sender``, at clock ``ts``, acknowledges message (origin, seq)."""

    sender: int
    ts: int
    origin: int
    seq: int

    carries = carries_none


class LamportTotalOrder(EndpointBase):
    """Total order by Lamport timestamps and acknowledgements from everyone."""

    protocol = "LamportTotalOrder"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = 0
        self.latest = [0] * n
        self.delivered = [0] * n
        self._queue: list[tuple[int, int, int]] = []  # heap of (ts, origin, seq)
        #: the queued messages by (origin, seq): a tuple hashes far faster than a MessageId
        self._messages: dict[tuple[int, int], LamportMessage] = {}

    @classmethod
    def stack(cls, pid: int, n: int) -> Stack:
        """The protocol over FIFO channels: ``Stack(Fifo(pid, n), LamportTotalOrder(pid, n))``."""
        return Stack(Fifo(pid, n), cls(pid, n))

    @property
    def clock(self) -> int:
        """The Lamport clock."""
        return self._clock

    # -- the application's side ----------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to every process; delivered once everyone has acknowledged it."""
        self.check_payload(payload)
        mid = self.next_id()
        self._clock += 1
        m = LamportMessage(self.pid, mid.seq, self._clock, payload)
        actions: list[Action] = [Transmit(q, m, mid) for q in range(self.n) if q != self.pid]
        self._enqueue(m)
        self._clock += 1
        actions += self._acknowledge(m)
        return actions + self._drain()

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one ``LamportBatch`` (and one
        acknowledgement) per ``BATCH_LIMIT`` of them: the deliveries of one
        ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._broadcast_batch)

    def _broadcast_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        first = self.next_ids(len(payloads))
        ts = self.stamp_batch(len(payloads))
        batch = LamportBatch(self.pid, first.seq, ts, payloads)
        actions: list[Action] = [Transmit(q, batch, first) for q in range(self.n) if q != self.pid]
        for i, payload in enumerate(payloads):
            self._enqueue(LamportMessage(self.pid, first.seq + i, ts + i, payload))
        self._clock += 1
        actions += self._acknowledge(self._messages[self.pid, self.sent_count])
        return actions + self._drain()

    @hook
    def stamp_batch(self, size: int) -> int:
        """Rule, at the sender of a batch of ``size`` messages: the first message's stamp
        (the others follow it, one apart); the clock passes every stamp given."""
        first = self._clock + 1
        self._clock += size
        return first

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _on_message(self, m: LamportMessage) -> list[Action]:
        sender = validate.pid(m.sender, self.n)
        seq = validate.positive(m.seq, "seq")
        ts = validate.positive(m.ts, "timestamp")
        if sender == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        if seq <= self.delivered[sender] or (sender, seq) in self._messages:
            self.duplicates += 1
            return []
        self._clock = max(self._clock, ts) + 1
        self.latest[sender] = max(self.latest[sender], ts)
        self._enqueue(m)
        return self._acknowledge(m) + self._drain()

    def _on_batch(self, b: LamportBatch) -> list[Action]:
        sender = validate.pid(b.sender, self.n)
        payloads = validate.batch_payloads(b.payloads)
        first_seq = validate.first_of_range(b.first_seq, len(payloads), "seq")
        first_ts = validate.first_of_range(b.first_ts, len(payloads), "timestamp")
        if sender == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        queued, low = self._messages, self.delivered[sender]
        fresh = [
            LamportMessage(sender, first_seq + i, first_ts + i, payload)
            for i, payload in enumerate(payloads)
            if first_seq + i > low and (sender, first_seq + i) not in queued
        ]
        if not fresh:
            self.duplicates += 1
            return []
        last = first_ts + len(payloads) - 1
        self._clock = max(self._clock, last) + 1
        self.latest[sender] = max(self.latest[sender], last)
        for m in fresh:
            self._enqueue(m)
        return self._acknowledge(fresh[-1]) + self._drain()

    def _on_ack(self, a: LamportAck) -> list[Action]:
        sender = validate.pid(a.sender, self.n)
        ts = validate.positive(a.ts, "timestamp")
        origin = validate.pid(a.origin, self.n, "origin")
        seq = validate.positive(a.seq, "seq")
        if sender == self.pid:
            raise RemoteError("a process's own acknowledgements never travel to itself")
        if origin == self.pid and seq > self.sent_count:
            raise RemoteError(f"acknowledgement of unknown message {MessageId(origin, seq)}")
        self._clock = max(self._clock, ts)
        self.latest[sender] = max(self.latest[sender], ts)
        return self._drain()

    def _enqueue(self, m: LamportMessage) -> None:
        self._messages[m.sender, m.seq] = m
        heapq.heappush(self._queue, (m.ts, m.sender, m.seq))

    def _acknowledge(self, m: LamportMessage) -> list[Action]:
        ack = LamportAck(self.pid, self._clock, m.sender, m.seq)
        return [Transmit(q, ack, None) for q in range(self.n) if q != self.pid]

    def _missing(self, ts: int) -> list[int]:
        """The processes not yet heard from with a stamp above ``ts``."""
        return [k for k in range(self.n) if k != self.pid and self.latest[k] <= ts]

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        queue = self._queue
        if not queue:
            return actions
        # the rule, for every queued stamp at once: deliverable while below every other
        # process's latest stamp (``_missing`` empty); delivering changes no ``latest``
        others = [t for k, t in enumerate(self.latest) if k != self.pid]
        bound = min(others) if others else math.inf
        messages, delivered = self._messages, self.delivered
        while queue and queue[0][0] < bound:
            _, origin, seq = heapq.heappop(queue)
            m = messages.pop((origin, seq))
            if seq > delivered[origin]:
                delivered[origin] = seq
            actions.append(delivery(origin, seq, m.payload))
        return actions

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._queue)

    def _queued_in_order(self) -> list[LamportMessage]:
        """The queued messages in delivery order (by timestamp, then origin)."""
        return [self._messages[o, s] for _, o, s in sorted(self._queue)]

    def pending(self) -> list[Pending]:
        out = []
        ahead: list[str] = []
        for m in self._queued_in_order():
            missing = self._missing(m.ts)
            waits = tuple(Wait(k, self.latest[k], m.ts + 1, "timestamp") for k in missing)
            parts = []
            if missing:
                who = ", ".join(f"P{k}" for k in missing)
                parts.append(f"a message or acknowledgement stamped above {m.ts} from {who}")
            if ahead:
                parts.append("the delivery of " + ", ".join(ahead))
            out.append(Pending(_message(m), waits, " and ".join(parts)))
            ahead.append(str(MessageId(m.sender, m.seq)))
        return out

    def _queue_restored(self, m: LamportMessage) -> None:
        sender = validate.pid(m.sender, self.n)
        seq = validate.positive(m.seq, "seq")
        validate.positive(m.ts, "timestamp")
        # (a queued seq may be at or below its sender's last delivered one: a sender whose
        # stamps went backwards, a buggy or a hostile one, is delivered out of FIFO order,
        # and a snapshot restores what the endpoint holds)
        if (sender, seq) in self._messages:
            raise LocalError(f"snapshot queues {MessageId(sender, seq)} twice")
        self._enqueue(m)

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[LamportTotalOrder]] = Receivers(
        "LamportTotalOrder",
        "a message or acknowledgement",
        {LamportMessage: _on_message, LamportAck: _on_ack, LamportBatch: _on_batch},
    )

    persistent = (
        counter("_clock", "clock"),
        counts("latest"),
        counts("delivered"),
        packets("queue", LamportMessage, _queued_in_order, _queue_restored),
    )


def _message(m: LamportMessage) -> Message:
    return Message(MessageId(m.sender, m.seq), m.sender, m.payload)


__all__ = ["LamportAck", "LamportBatch", "LamportMessage", "LamportTotalOrder"]
