"""Tagged causal stable broadcast (Baquero, Almeida and Shoker 2014).

A causal broadcast whose deliveries carry ``message.tag``, a vector clock that
characterizes happens-before *precisely*, and which reports causally stable
messages with ``Stable`` actions.

Happens-before is what the application sees: its sends and its deliveries
(docs/tagged-causal.md). The middleware hands out a delivery with a ``Deliver`` action, but
the application only *sees* it when it takes it, which is later when deliveries
wait in a queue (the two-thread model) or when the application sends from
inside the handling of an earlier delivery of the same batch (the callback
model). So the API has an explicit step:

- consumption modes. ``consume="delivery"`` (the default): each message is
  consumed when it is delivered, so a host need do nothing; tags stay causal
  but a send issued while handling the first of a batch of deliveries is tagged
  after the whole batch. ``consume="explicit"``: the application calls
  ``consume(message_id)`` for each ``Deliver``, in order, when it starts
  handling it (every host in mailroom does this for you), which keeps tags
  precise. Forgetting it is loud: a ``broadcast`` issued while deliveries are
  unconsumed and the application has consumed nothing since they were handed
  out is a LocalError (its tag would miss what the application was handed).
  Replying from the handling of the first of a batch (consumed) while the rest
  waits unconsumed is the legitimate case and is allowed; a host that queues
  deliveries for an application thread (the two-thread model) says so with
  ``defer()``, after which broadcasting before taking them is allowed too.
  Own messages need no consuming.
- ``broadcast(payload)``: stamped at once, at the moment the application
  issues it, with the application's clock, never from a send queue.

Why an explicit step: a sans-IO endpoint returns a whole batch of deliveries
from one ``receive``; it cannot know how far the application got through it.
Stamping sends with the middleware's clock (``NaiveTagged``) tags a send as
after every message handed out, including those the application has not looked
at yet: concurrent messages become ordered (docs/tagged-causal.md).

State at P_i:

- ``delivered[k]``: messages from P_k handed to the application (middleware);
- ``clock[k]`` (the application's clock): P_k's messages the application has
  sent (k = i) or consumed. Broadcast: clock[i] += 1, tag = clock. Consume m:
  clock = max(clock, m.tag).
- ``knows[j]``: what P_j's application had seen, as far as P_i knows: the tag of
  the last message from P_j that P_i consumed, or an acknowledgement from P_j
  (usable once P_i consumed every message P_j had sent before it). Row i is
  ``clock``.

Deliverable: m from P_j with tag T when T[j] == delivered[j] + 1 and
T[k] <= delivered[k] for every k != j (CBCAST's rule, on precise tags, so a
message never waits for one its sender's application had not seen).

Stable: the frontier is the entrywise minimum of ``knows``; a consumed m from
P_o with seq s is stable at P_i when frontier[o] >= s: every application has
seen m, and everything P_i consumes from now on was sent after its sender saw
m, so it is in m's causal future. Stable messages are reported in delivery
order, as the longest stable prefix of P_i's deliveries, and then forgotten:
the endpoint keeps no per-message state for them. This is the paper's
definition, at the reporting process: a message concurrent with m may still be
in flight to another process, which will not report m stable before delivering it.

Knowledge spreads in tags and in ``StabilityAck`` control packets carrying the
application's clock: one after every ``ack_every`` consumed messages not yet
announced by a broadcast or an acknowledgement (``None``: only when the
application calls ``announce()``).

Bad input: a tag of the wrong dimension, a zero own entry, or an entry for
P_i beyond the messages P_i has sent (a future the sender cannot know) is a
RemoteError; the state is unchanged. Duplicates, and echoes of this process's
own broadcasts and acknowledgements, are dropped and counted.

Batch form: ``broadcast_many`` sends k payloads as one ``TaggedBatch`` per
destination, carrying the first message's tag once (message i's tag is that tag with
the sender's entry plus i: nothing is consumed between them); a receiver offers each
entry as the ``TaggedPacket`` it stands for, so the mail room and the snapshot hold
single packets only.

Extension points (``mailroom.core.hooks``): ``stamp``, the tag of a broadcast;
``entry_tag``, the tag of a batch's i-th message.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from mailroom.clocks import Row, VectorClock
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Stable, Transmit
from mailroom.core.dispatch import Receivers
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import MessageId, Payload, TaggedMessage
from mailroom.core.pending import Pending
from mailroom.core.persist import (
    FLAG,
    MESSAGE_ID,
    Field,
    argument,
    counter,
    counts,
    list_of,
    load_counts,
    matrix,
    snap_list,
)
from mailroom.core.wire import as_row, packet
from mailroom.protocols._buffer import DependencyBuffer
from mailroom.protocols._buffered import BufferedEndpoint, mail_room
from mailroom.protocols._packets import (
    Payloads,
    carries_none,
    carries_stamped,
    carries_stamped_batch,
)


@packet
@attrs.frozen
class TaggedPacket:
    """A broadcast and its tag; its seq is ``tag[sender]``."""

    sender: int
    tag: Row = attrs.field(converter=as_row)
    payload: Any

    carries = carries_stamped("tag")


@packet
@attrs.frozen
class StabilityAck:
    """A control packet: what the sender's application has seen (its clock)."""

    sender: int
    clock: Row = attrs.field(converter=as_row)

    carries = carries_none


@packet
@attrs.frozen
class TaggedBatch:
    """k consecutive broadcasts of ``sender`` (``broadcast_many``), carrying a tag once:
    ``tag`` is the first message's; message i's is ``tag`` with ``tag[sender] + i``, as
    its sender consumed nothing between them. A receiver takes each as a TaggedPacket."""

    sender: int
    tag: Row = attrs.field(converter=as_row)
    payloads: Payloads = attrs.field(converter=as_row)

    carries, carries_all, carries_last = carries_stamped_batch("tag")


#: How a TaggedCausalBroadcast learns that the application took a delivery.
CONSUME_MODES = ("delivery", "explicit")


def _max_into(target: list[int], other: Sequence[int]) -> None:
    for k, v in enumerate(other):
        if v > target[k]:
            target[k] = v


class TaggedCausalBroadcast(BufferedEndpoint):
    """Causal broadcast with precise vector-clock tags and causal stability."""

    protocol = "TaggedCausalBroadcast"
    snapshot_version = 2
    waits_for = "seq"

    def __init__(
        self, pid: int, n: int, *, ack_every: int | None = 1, consume: str = "delivery"
    ) -> None:
        super().__init__(pid, n)
        if ack_every is not None and (type(ack_every) is not int or not 1 <= ack_every <= 2**32):
            raise LocalError(f"ack_every must be a positive integer or None, got {ack_every!r}")
        if consume not in CONSUME_MODES:
            raise LocalError(f"consume must be one of {CONSUME_MODES}, got {consume!r}")
        self.ack_every = ack_every
        #: "delivery": consumed when delivered; "explicit": the application calls consume()
        self.consume_mode = consume
        self._delivered = [0] * n
        self._clock = [0] * n
        self._knows = [[0] * n for _ in range(n)]
        self._knows[pid] = self._clock
        self._acks = [[0] * n for _ in range(n)]
        self._unannounced = 0
        self._unconsumed: deque[tuple[MessageId, Row]] = deque()
        #: explicit mode: deliveries were handed out and nothing was consumed since
        self._fresh = False
        self._unstable: deque[MessageId] = deque()
        self._buffer: DependencyBuffer[TaggedPacket] = DependencyBuffer(self._delivered)

    # -- clocks ------------------------------------------------------------------
    @property
    def clock(self) -> VectorClock:
        """The application's clock: its sends and consumed deliveries; sends carry it."""
        return VectorClock(self._clock)

    @property
    def delivered(self) -> VectorClock:
        """Messages per origin handed to the application (consumed or not)."""
        return VectorClock(self._delivered)

    @property
    def stable_clock(self) -> VectorClock:
        """The stability frontier: entrywise minimum of what every application has seen."""
        return VectorClock(min(col) for col in zip(*self._knows, strict=True))

    @hook
    def stamp(self) -> Row:
        """Rule: the tag of a broadcast being issued now (what the application has
        consumed)."""
        return tuple(self._clock)

    @property
    def needs_consume(self) -> bool:
        """True in explicit mode: the host must call ``consume`` for every delivery."""
        return self.consume_mode == "explicit"

    # -- the application's side ---------------------------------------------------
    def _check_consumed(self) -> None:
        """LocalError if deliveries were handed out and nothing consumed since (explicit
        mode): a tag issued now would miss what the application was handed."""
        if self._unconsumed and self._fresh:
            raise LocalError(
                f"{len(self._unconsumed)} delivered message(s) not consumed yet "
                f"(first {self._unconsumed[0][0]}): consume() each delivery before "
                "broadcasting, or its tag misses what the application was handed"
            )

    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to every process, tagged now; the sender delivers it at once."""
        self._check_consumed()
        self.check_payload(payload)
        mid = self.next_id()
        self._clock[self.pid] += 1
        self._delivered[self.pid] += 1
        tag = self.stamp()
        self._unannounced = 0  # the tag tells everyone what we have seen
        self._unstable.append(mid)
        packet = TaggedPacket(self.pid, tag, payload)
        actions: list[Action] = [
            Transmit(to, packet, mid) for to in range(self.n) if to != self.pid
        ]
        actions.append(Deliver(TaggedMessage(mid, self.pid, payload, VectorClock(tag))))
        return actions + self._stabilize()

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, tagged now, one ``TaggedBatch`` per
        ``BATCH_LIMIT`` of them: the deliveries (and tags) of one ``broadcast`` each."""
        self._check_consumed()
        return self._broadcast_chunks(payloads, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        size = len(payloads)
        first = self.next_ids(size)
        self._clock[self.pid] += 1
        self._delivered[self.pid] += 1
        tag = self.stamp()  # as broadcast stamps the first; the others follow it
        self._clock[self.pid] += size - 1
        self._delivered[self.pid] += size - 1
        self._unannounced = 0
        batch = TaggedBatch(self.pid, tag, payloads)
        actions: list[Action] = [
            Transmit(to, batch, first) for to in range(self.n) if to != self.pid
        ]
        for i, payload in enumerate(payloads):
            mid = MessageId(self.pid, first.seq + i)
            self._unstable.append(mid)
            own = VectorClock(self.entry_tag(tag, self.pid, i))
            actions.append(Deliver(TaggedMessage(mid, self.pid, payload, own)))
        return actions + self._stabilize()

    @hook
    def entry_tag(self, tag: Row, sender: int, i: int) -> Row:
        """Rule: the tag of message i of a batch from ``sender`` whose first tag is
        ``tag``: the sender consumed nothing in between, so only its own entry moves."""
        return (*tag[:sender], tag[sender] + i, *tag[sender + 1 :])

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        """The application takes the next delivered message (``message_id``, if given).

        Returns acknowledgements to transmit and ``Stable`` reports. Own
        messages are seen when sent: consuming one is accepted and does nothing.
        """
        if message_id is not None and message_id.origin == self.pid:
            if not 1 <= message_id.seq <= self.sent_count:
                raise LocalError(f"{message_id} was never sent by P{self.pid}")
            return []
        if not self.needs_consume:  # consumed when delivered: nothing left to do
            if message_id is not None and message_id.seq > self._delivered[message_id.origin]:
                raise LocalError(
                    f"{message_id} was not delivered here (this endpoint consumes each "
                    "message when it is delivered, consume='delivery')"
                )
            return []
        if not self._unconsumed:
            raise LocalError("no delivered message is waiting to be consumed")
        mid = self._unconsumed[0][0]
        if message_id is not None and message_id != mid:
            raise LocalError(f"the next delivered message is {mid}, not {message_id}")
        return self._consume_next()

    def _consume_next(self) -> list[Action]:
        self._fresh = False
        mid, tag = self._unconsumed.popleft()
        _max_into(self._clock, tag)
        _max_into(self._knows[mid.origin], tag)
        self._use_ack(mid.origin)
        self._unstable.append(mid)
        self._unannounced += 1
        actions: list[Action] = []
        if self.ack_every is not None and self._unannounced >= self.ack_every:
            actions += self.announce()
        return actions + self._stabilize()

    def defer(self) -> None:
        """Explicit mode: the host queued the deliveries handed out so far for the
        application, which has not seen them; a broadcast before it takes them is fine."""
        if not self.needs_consume:
            raise LocalError("defer() is for consume='explicit' endpoints")
        self._fresh = False

    def consume_all(self) -> list[Action]:
        """Consume every delivered message (for an application that took them all)."""
        actions: list[Action] = []
        while self._unconsumed:
            actions += self._consume_next()
        return actions

    def unconsumed(self) -> list[MessageId]:
        """Delivered messages the application has not consumed yet, in order."""
        return [mid for mid, _ in self._unconsumed]

    def announce(self) -> list[Action]:
        """Tell every other process what this application has seen (a StabilityAck)."""
        self._unannounced = 0
        ack = StabilityAck(self.pid, tuple(self._clock))
        return [Transmit(to, ack, None) for to in range(self.n) if to != self.pid]

    # -- the network's side -------------------------------------------------------------
    def _check_own_entry(self, vector: Sequence[int], what: str) -> None:
        if vector[self.pid] > self.sent_count:
            raise RemoteError(
                f"{what}[{self.pid}] = {vector[self.pid]} claims P{self.pid} broadcast more "
                f"than it has ({self.sent_count}): a future the sender cannot know"
            )

    def _validate(self, packet: object) -> TaggedPacket:
        validate.expect_type(packet, TaggedPacket, self.protocol)
        assert isinstance(packet, TaggedPacket)
        sender = validate.pid(packet.sender, self.n)
        tag = validate.vector(packet.tag, self.n, "tag")
        validate.positive(tag[sender], f"tag[{sender}] (the sender's own entry)")
        self._check_own_entry(tag, "tag")
        return packet

    def _validate_ack(self, packet: StabilityAck) -> StabilityAck:
        sender = validate.pid(packet.sender, self.n)
        clock = validate.vector(packet.clock, self.n, "acknowledged clock")
        self._check_own_entry(clock, "acknowledged clock")
        if sender == self.pid and any(a > c for a, c in zip(clock, self._clock, strict=True)):
            raise RemoteError(
                f"an acknowledgement from P{self.pid} itself claims more than P{self.pid} "
                f"has seen ({list(clock)} > {self._clock})"
            )
        return packet

    def _batch_entries(self, b: TaggedBatch) -> list[TaggedPacket]:
        """The packets a batch stands for, in order; RemoteError if it is malformed."""
        sender = validate.pid(b.sender, self.n)
        tag = tuple(validate.vector(b.tag, self.n, "tag"))
        payloads = validate.batch_payloads(b.payloads)
        validate.first_of_range(tag[sender], len(payloads), f"tag[{sender}]")
        last = tag[sender] + len(payloads) - 1 if sender == self.pid else tag[self.pid]
        self._check_own_entry((*tag[: self.pid], last, *tag[self.pid + 1 :]), "tag")
        return [
            TaggedPacket(sender, self.entry_tag(tag, sender, i), payload)
            for i, payload in enumerate(payloads)
        ]

    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _on_ack(self, packet: StabilityAck) -> list[Action]:
        ack = self._validate_ack(packet)
        if ack.sender == self.pid:  # the echo of our own acknowledgement
            self.duplicates += 1
            return []
        _max_into(self._acks[ack.sender], ack.clock)
        self._use_ack(ack.sender)
        return self._stabilize()

    def _on_packet(self, p: TaggedPacket) -> list[Action]:
        return self._take_entries([self._validate(p)])

    def _on_batch(self, b: TaggedBatch) -> list[Action]:
        # each entry as the packet it stands for, arriving
        return self._take_entries(self._batch_entries(b))

    def _take_entries(self, entries: list[TaggedPacket]) -> list[Action]:
        """Checked packets, each held (what it releases handed out) or a duplicate."""
        return self._run(map(self._offer, entries), self._released)

    def _released(self) -> list[Action]:
        return self._hand_out(self._drain())

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[TaggedCausalBroadcast]] = Receivers(
        "TaggedCausalBroadcast",
        "a TaggedPacket",
        {TaggedPacket: _on_packet, StabilityAck: _on_ack, TaggedBatch: _on_batch},
    )

    def _hand_out(self, deliveries: list[Action]) -> list[Action]:
        """Deliveries just released: consumed at once (consume="delivery"), or marked
        as handed out and waiting for the application."""
        if not self.needs_consume:
            return deliveries + self.consume_all()
        if deliveries:
            self._fresh = True
        return deliveries

    def _offer(self, p: TaggedPacket) -> bool:
        """Hold ``p``: the ``tag[sender]``-th from its sender, needing the rest of ``tag``."""
        return self._buffer.offer(p.sender, p.tag[p.sender] - 1, p.tag, p)

    def _drain(self) -> list[Action]:
        """Hand out what the mail room releases; each waits to be consumed."""
        actions: list[Action] = []
        while (q := self._buffer.pop_ready()) is not None:
            self._delivered[q.sender] += 1
            message = self._message(q)
            self._unconsumed.append((message.id, q.tag))
            actions.append(Deliver(message))
            self._buffer.delivered_one(q.sender)
        return actions

    # -- stability --------------------------------------------------------------------------
    def _use_ack(self, j: int) -> None:
        """An ack from P_j counts once every message P_j sent before it is consumed here."""
        ack = self._acks[j]
        if ack[j] <= self._clock[j]:
            _max_into(self._knows[j], ack)

    def _stabilize(self) -> list[Action]:
        stable: list[MessageId] = []
        knows, unstable = self._knows, self._unstable
        while unstable and all(row[unstable[0].origin] >= unstable[0].seq for row in knows):
            stable.append(unstable.popleft())
        return [Stable(tuple(stable))] if stable else []

    # -- introspection -------------------------------------------------------------------
    def retained(self) -> int:
        """Per-message entries held: buffered, delivered but unconsumed, not yet stable."""
        return len(self._buffer) + len(self._unconsumed) + len(self._unstable)

    def _message(self, p: TaggedPacket) -> TaggedMessage:
        return TaggedMessage(
            MessageId(p.sender, p.tag[p.sender]), p.sender, p.payload, VectorClock(p.tag)
        )

    def pending(self) -> list[Pending]:
        return self._pending_of(self._message)

    # -- snapshot ------------------------------------------------------------------------
    def _dump_unconsumed(self) -> list[list[Any]]:
        return [[m.origin, m.seq, list(tag)] for m, tag in self._unconsumed]

    def _load_unconsumed(self, data: object) -> None:
        unconsumed = snap_list(data, "unconsumed")
        if unconsumed and not self.needs_consume:
            raise LocalError("snapshot holds unconsumed deliveries in consume='delivery' mode")
        for item in unconsumed:
            origin, seq, tag = snap_list(item, "unconsumed item", 3)
            mid = MESSAGE_ID.load([origin, seq], self, "unconsumed")
            vec: Row = tuple(load_counts(tag, self.n, "unconsumed tag"))
            if vec[mid.origin] != mid.seq or mid.seq > self._delivered[mid.origin]:
                raise LocalError(f"snapshot holds an unconsumed {mid} never delivered")
            self._unconsumed.append((mid, vec))

    # -- rules of the snapshot fields that need what fields above them loaded ---------------
    def _own_row(self, rows: list[list[int]]) -> str | None:
        """``knows``: the process's own row is its clock (loaded just above)."""
        return None if rows[self.pid] == self._clock else "must hold the clock in its own row"

    def _fresh_needs_unconsumed(self, fresh: bool) -> str | None:
        """``fresh``: deliveries were handed out and wait unconsumed."""
        return "is true with nothing unconsumed" if fresh and not self._unconsumed else None

    def _undelivered(self, mids: list[MessageId]) -> str | None:
        """``unstable``: every message listed was delivered here."""
        for mid in mids:
            if mid.seq > self._delivered[mid.origin]:
                return f"holds {mid} as unstable but never delivered"
        return None

    persistent = (
        argument("ack_every"),
        argument("consume", "consume_mode"),
        counts("_delivered", "delivered"),
        counts("_clock", "clock"),
        matrix("_knows", "knows", check=_own_row),
        matrix("_acks", "acks"),
        counter("_unannounced"),
        Field.custom("unconsumed", _dump_unconsumed, _load_unconsumed),
        Field("fresh", "_fresh", FLAG, check=_fresh_needs_unconsumed),
        Field("unstable", "_unstable", list_of(MESSAGE_ID), inplace=True, check=_undelivered),
        mail_room(TaggedPacket, _validate, _offer),
    )
