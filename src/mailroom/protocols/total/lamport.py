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

A copy of a queued or delivered message is dropped quietly. A packet from this
process itself or from a pid outside the group, or an acknowledgement of a
message this process never sent: RemoteError.
"""

from __future__ import annotations

import heapq
from typing import Any

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import counter, counts, packets
from mailroom.core.stack import Stack
from mailroom.core.wire import packet
from mailroom.protocols._packets import carries_none, carries_seq
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
        self._messages: dict[MessageId, LamportMessage] = {}

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
        self._check_payload(payload)
        mid = self._next_id()
        self._clock += 1
        m = LamportMessage(self.pid, mid.seq, self._clock, payload)
        actions: list[Action] = [Transmit(q, m, mid) for q in range(self.n) if q != self.pid]
        self._enqueue(m)
        self._clock += 1
        actions += self._acknowledge(m)
        return actions + self._drain()

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        if type(packet) is LamportMessage:
            return self._on_message(packet)
        if type(packet) is LamportAck:
            return self._on_ack(packet)
        raise RemoteError(
            f"LamportTotalOrder expected a message or acknowledgement, got {type(packet).__name__}"
        )

    def _on_message(self, m: LamportMessage) -> list[Action]:
        sender = validate.pid(m.sender, self.n)
        seq = validate.positive(m.seq, "seq")
        ts = validate.positive(m.ts, "timestamp")
        if sender == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        mid = MessageId(sender, seq)
        if seq <= self.delivered[sender] or mid in self._messages:
            self.duplicates += 1
            return []
        self._clock = max(self._clock, ts) + 1
        self.latest[sender] = max(self.latest[sender], ts)
        self._enqueue(m)
        return self._acknowledge(m) + self._drain()

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
        self._messages[MessageId(m.sender, m.seq)] = m
        heapq.heappush(self._queue, (m.ts, m.sender, m.seq))

    def _acknowledge(self, m: LamportMessage) -> list[Action]:
        ack = LamportAck(self.pid, self._clock, m.sender, m.seq)
        return [Transmit(q, ack, None) for q in range(self.n) if q != self.pid]

    def _missing(self, ts: int) -> list[int]:
        """The processes not yet heard from with a stamp above ``ts``."""
        return [k for k in range(self.n) if k != self.pid and self.latest[k] <= ts]

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while self._queue and not self._missing(self._queue[0][0]):
            _, origin, seq = heapq.heappop(self._queue)
            m = self._messages.pop(MessageId(origin, seq))
            self.delivered[origin] = max(self.delivered[origin], seq)
            actions.append(Deliver(_message(m)))
        return actions

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._queue)

    def _queued_in_order(self) -> list[LamportMessage]:
        """The queued messages in delivery order (by timestamp, then origin)."""
        return [self._messages[MessageId(o, s)] for _, o, s in sorted(self._queue)]

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
        mid = MessageId(sender, seq)
        if seq <= self.delivered[sender] or mid in self._messages:
            raise LocalError(f"snapshot queues {mid}, delivered or queued twice")
        self._enqueue(m)

    persistent = (
        counter("_clock", "clock"),
        counts("latest"),
        counts("delivered"),
        packets("queue", LamportMessage, _queued_in_order, _queue_restored),
    )


def _message(m: LamportMessage) -> Message:
    return Message(MessageId(m.sender, m.seq), m.sender, m.payload)


__all__ = ["LamportAck", "LamportMessage", "LamportTotalOrder"]
