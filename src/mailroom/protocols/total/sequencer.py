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

Guarantees: total order always. The order is the order of arrival at the
sequencer, so over a network that reorders packets it is not FIFO (a sender's
second request may overtake its first) and hence not causal. Over FIFO
channels (``Stack(Fifo(...), Sequencer(...))``) it is FIFO and causal: a
message sent after delivering m is requested after m was numbered.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase, Snapshot, snap_list
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.wire import packet, packet_from_data, packet_to_data


@packet
@attrs.frozen
class SequencerRequest:
    """``sender`` asks the sequencer to number its ``seq``-th message."""

    sender: int
    seq: int
    payload: Any

    def carries(self) -> MessageId | None:
        """The application message this packet carries."""
        return MessageId(self.sender, self.seq)


@packet
@attrs.frozen
class SequencerOrder:
    """The sequencer gave message (origin, seq) the global ``number``."""

    number: int
    origin: int
    seq: int
    payload: Any

    def carries(self) -> MessageId | None:
        """The application message this packet carries."""
        return MessageId(self.origin, self.seq)


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

    # -- the application's side ----------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to everyone in the sequencer's order."""
        self._check_payload(payload)
        mid = self._next_id()
        if self.is_sequencer:
            return self._number(mid.origin, mid.seq, payload)
        return [Transmit(self.sequencer, SequencerRequest(self.pid, mid.seq, payload), mid)]

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        if type(packet) is SequencerRequest:
            return self._on_request(packet)
        if type(packet) is SequencerOrder:
            return self._on_order(packet)
        raise RemoteError(f"Sequencer expected a request or an order, got {type(packet).__name__}")

    def _on_request(self, p: SequencerRequest) -> list[Action]:
        if not self.is_sequencer:
            raise RemoteError(f"P{self.pid} got a request but the sequencer is P{self.sequencer}")
        sender = validate.pid(p.sender, self.n)
        seq = validate.positive(p.seq, "seq")
        if sender == self.pid:
            raise RemoteError("the sequencer's own messages never travel as requests")
        if seq <= self._low[sender] or seq in self._high[sender]:
            self.duplicates += 1
            return []
        return self._number(sender, seq, p.payload)

    def _number(self, origin: int, seq: int, payload: Payload) -> list[Action]:
        """At the sequencer: give (origin, seq) the next number, forward and deliver it."""
        high = self._high[origin]
        high.add(seq)
        while self._low[origin] + 1 in high:
            self._low[origin] += 1
            high.discard(self._low[origin])
        self.numbered += 1
        self.delivered += 1
        order = SequencerOrder(self.numbered, origin, seq, payload)
        mid = MessageId(origin, seq)
        actions: list[Action] = [Transmit(to, order, mid) for to in range(self.n) if to != self.pid]
        actions.append(Deliver(Message(mid, origin, payload)))
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
        self._held[number] = p
        actions: list[Action] = []
        while (nxt := self._held.pop(self.delivered + 1, None)) is not None:
            self.delivered += 1
            actions.append(Deliver(_message(nxt)))
        return actions

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._held)

    def pending(self) -> list[Pending]:
        out = []
        for number in sorted(self._held):
            p = self._held[number]
            wait = Wait(self.sequencer, self.delivered, number - 1, "sequence number")
            first, last = self.delivered + 1, number - 1
            span = f"number {first}" if first == last else f"numbers {first}..{last}"
            out.append(
                Pending(_message(p), (wait,), f"{span} from the sequencer P{self.sequencer}")
            )
        return out

    def snapshot(self) -> Snapshot:
        data = self._header()
        data["sequencer"] = self.sequencer
        data["numbered"] = self.numbered
        data["delivered"] = self.delivered
        data["requests"] = [
            [low, sorted(high)] for low, high in zip(self._low, self._high, strict=True)
        ]
        data["held"] = [packet_to_data(self._held[k]) for k in sorted(self._held)]
        return data

    def _load(self, data: Snapshot) -> None:
        seqr = data["sequencer"]
        if type(seqr) is not int or not 0 <= seqr < self.n:
            raise LocalError(f"snapshot field sequencer {seqr!r} is not a process")
        self.sequencer = seqr
        self.numbered = _count(data["numbered"], "numbered")
        self.delivered = _count(data["delivered"], "delivered")
        requests = data["requests"]
        if not isinstance(requests, list) or len(requests) != self.n:
            raise LocalError(f"snapshot field requests must list {self.n} entries")
        for o, (low, high) in enumerate(requests):
            self._low[o] = _count(low, "requests")
            self._high[o] = {_count(s, "requests") for s in high}
        for item in snap_list(data["held"], "held"):
            p = packet_from_data(SequencerOrder, item)
            number = validate.positive(p.number, "sequence number")
            validate.pid(p.origin, self.n, "origin")
            validate.positive(p.seq, "seq")
            if self.is_sequencer or number <= self.delivered + 1 or number in self._held:
                raise LocalError(f"snapshot holds number {number}, deliverable or held twice")
            self._held[number] = p


def _count(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= validate.MAX_COUNTER:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a counter")
    return value


def _message(p: SequencerOrder) -> Message:
    return Message(MessageId(p.origin, p.seq), p.origin, p.payload)


__all__ = ["Sequencer", "SequencerOrder", "SequencerRequest"]
