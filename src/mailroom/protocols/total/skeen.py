"""Skeen's total order multicast (the two-phase multicast: propose, then final).

State at P_i: a Lamport ``clock``; the mail room of received messages, each with
a number and a flag saying whether the number is final; for each message P_i
sent whose number is not yet final, the proposals collected so far; and, per
sender, which of its messages have reached P_i (to drop late copies).

Rules:

- Multicast m to a set D: clock += 1; send m stamped ts = clock to every other
  member q of D, with ``index``: how many of P_i's multicasts went to q so far,
  this one included. If P_i is in D it holds m itself with proposal ts.
- Receipt of m (stamp ts) at q: clock = max(clock, ts) + 1; hold m with the
  proposal ``clock``; reply to the sender with that proposal.
- When the sender has a proposal from every member of D, the final number is
  their maximum; it announces the final number to the other members.
- Receipt of a final number f at q: clock = max(clock, f) (a later proposal
  must not undercut a message delivered here); mark m final with number f.
- Delivery (the standard rule): order held messages by the key (number,
  origin, seq). Deliver the held message with the lowest key once it is final
  and its key is below the key of every held message that is not final yet.
  Repeat. A message not final yet can only end with a number at least its
  proposal, so with a key above its current one; a message not received yet
  will be proposed above the clock, which is at least every final number
  learned here. Ties on the number are broken by origin then seq in both.

Delivery never waits for traffic to pause: a final message waits only for the
messages held here whose proposals are below its number, and each of those is
final within one round trip of its sender. (The textbook rule, deliver
only when every held message is final, starves under steady traffic, where
some message is always in flight: it lives on as ``mailroom.lab.SkeenAllFinal``.)

Batches (``broadcast_many``): k broadcasts travel as one ``SkeenBatch`` per
destination, their proposals as one ``SkeenProposalBatch`` and their final numbers as
one ``SkeenFinalBatch``; each entry is taken as the single packet it stands for, so
the state, the snapshot and the deliveries are those of k broadcasts
(``mailroom.protocols.total.skeen_batch`` states the rules).

Extension points (``mailroom.core.hooks``): ``learn_final`` (what learning a final
number does to the clock), ``learn_finals`` (the same for a batch's numbers) and
``next_delivery`` (the delivery rule), with ``lowest_final`` and ``lowest_open`` to
read the mail room from an override.

Any two messages are delivered in the same order wherever both are delivered:
if B is delivered at q before A reaches q, q's clock is at least B's number when
it proposes for A, so A's number is larger. ``broadcast`` is the multicast to
everyone. Over a reordering network the order is neither FIFO nor causal (a
sender's second message may reach a receiver first and be proposed a lower
number); for broadcasts over FIFO channels it is both.

Bounded state: a delivered message leaves the mail room; what recognises its
late copies is, per sender, the highest ``index`` below which every message
arrived plus the indexes above it that arrived (the reordering window). The
final numbers of the last ``keep_finals`` deliveries are kept in ``finals``.

Duplicated packets are dropped quietly. A proposal for a message this process
never sent or from outside its destination set, a proposal that changes, a
final number for a message never received here, a final number lower than the
proposal sent, a second, different final number for a held message, or a final
number above this process's clock for a message delivered here: RemoteError.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence
from typing import Any, ClassVar

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit, delivery
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import (
    COUNTER,
    Field,
    argument,
    counter,
    counts,
    snap_bool,
    snap_list,
    snap_pid,
    snap_positive,
    window,
)
from mailroom.core.wire import packet_from_data, packet_to_data
from mailroom.protocols import _window as reorder
from mailroom.protocols.total import skeen_batch
from mailroom.protocols.total.skeen_packets import (
    Key,
    SkeenBatch,
    SkeenFinal,
    SkeenFinalBatch,
    SkeenMessage,
    SkeenProposal,
    SkeenProposalBatch,
    _Collecting,
    _Held,
)


class Skeen(EndpointBase):
    """Total order multicast to any set of processes, without a coordinator."""

    protocol = "Skeen"
    snapshot_version = 2

    def __init__(self, pid: int, n: int, *, keep_finals: int = 64) -> None:
        super().__init__(pid, n)
        if type(keep_finals) is not int or keep_finals < 0:
            raise LocalError(f"keep_finals must be a non-negative integer, got {keep_finals!r}")
        self.keep_finals = keep_finals
        self._clock = 0
        #: the mail room, by (origin, seq): a tuple hashes far faster than a MessageId
        self._held: dict[tuple[int, int], _Held] = {}
        #: keys of the held messages not final yet (lazy: entries of messages that
        #: became final are skipped when they reach the top)
        self._open: list[Key] = []
        #: keys of the held messages that are final, lowest first
        self._ready: list[Key] = []
        self._collecting: dict[int, _Collecting] = {}
        #: per destination: how many of this process's multicasts went there
        self._sent_to = [0] * n
        #: per sender: every index <= _low[p] has arrived here, and so has each in _high[p]
        self._low = [0] * n
        self._high: list[set[int]] = [set() for _ in range(n)]
        #: final numbers of the last ``keep_finals`` messages delivered here, oldest
        #: first, by (origin, seq)
        self._finals: dict[tuple[int, int], int] = {}

    @property
    def clock(self) -> int:
        """The Lamport clock."""
        return self._clock

    @property
    def finals(self) -> dict[MessageId, int]:
        """The final numbers of the last ``keep_finals`` messages delivered here, oldest
        first (a copy)."""
        return {MessageId(*mid): number for mid, number in self._finals.items()}

    # -- the application's side ----------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Multicast ``payload`` to every process, this one included."""
        return self.multicast(payload, to=range(self.n))

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]:
        """Broadcast ``payloads`` in order, one ``SkeenBatch`` per destination and
        ``BATCH_LIMIT`` of them (``mailroom.protocols.total.skeen_batch``): the
        deliveries of one ``broadcast`` each."""
        return self._broadcast_chunks(payloads, self._send_batch)

    def multicast(self, payload: Payload, to: Collection[int]) -> list[Action]:
        """Send ``payload`` to the processes ``to`` (this one may or may not be among them)."""
        if not isinstance(to, Collection) or isinstance(to, str | bytes):
            raise LocalError(f"multicast needs a collection of pids, got {type(to).__name__}")
        dest = tuple(sorted({self.check_dest(q) for q in to}))
        if not dest:
            raise LocalError("multicast needs at least one destination")
        self.check_payload(payload)
        mid = self.next_id()
        self._clock += 1
        ts = self._clock
        for q in dest:
            self._sent_to[q] += 1
        indexes = tuple(self._sent_to[q] for q in dest)
        actions: list[Action] = [
            Transmit(q, SkeenMessage(self.pid, mid.seq, ts, dest, payload, k), mid)
            for q, k in zip(dest, indexes, strict=True)
            if q != self.pid
        ]
        collecting = _Collecting(ts, dest, indexes, {})
        self._collecting[mid.seq] = collecting
        if self.pid in dest:
            own = SkeenMessage(self.pid, mid.seq, ts, dest, payload, self._sent_to[self.pid])
            self._hold(own, ts)
            collecting.proposals[self.pid] = ts
        return actions + self._maybe_finish(mid.seq)

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _check_message(self, m: SkeenMessage) -> MessageId:
        """RemoteError unless ``m`` could have been sent to this process."""
        sender = validate.pid(m.sender, self.n)
        seq = validate.positive(m.seq, "seq")
        validate.positive(m.ts, "timestamp")
        index = validate.positive(m.index, "index")
        if index > seq:
            raise RemoteError(f"index {index} exceeds the sender's count of messages {seq}")
        dest = m.dest
        if not isinstance(dest, tuple) or not dest:
            raise RemoteError(f"destination set must be a non-empty list, got {dest!r}")
        for q in dest:
            validate.pid(q, self.n, "destination")
        if list(dest) != sorted(set(dest)):
            raise RemoteError(f"destination set {list(dest)} is not sorted without repeats")
        if self.pid not in dest:
            raise RemoteError(f"message for {list(dest)} arrived at P{self.pid}")
        return MessageId(sender, seq)

    def _on_message(self, m: SkeenMessage) -> list[Action]:
        mid = self._check_message(m)
        if mid.origin == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        if (mid.origin, mid.seq) in self._held or self._seen(mid.origin, m.index):
            self.duplicates += 1
            return []
        self._mark_seen(mid.origin, m.index)
        self._clock = max(self._clock, m.ts) + 1
        self._hold(m, self._clock)
        return [
            Transmit(mid.origin, SkeenProposal(self.pid, mid.origin, mid.seq, self._clock), None)
        ]

    def _seen(self, sender: int, index: int) -> bool:
        return reorder.seen(self._low, self._high, sender, index)

    def _mark_seen(self, sender: int, index: int) -> None:
        reorder.mark(self._low, self._high, sender, index)

    def _hold(self, m: SkeenMessage, proposal: int) -> None:
        self._hold_fields(m.sender, m.seq, m.ts, m.dest, m.payload, m.index, proposal)

    def _hold_fields(
        self,
        sender: int,
        seq: int,
        ts: int,
        dest: tuple[int, ...],
        payload: Any,
        index: int,
        proposal: int,
    ) -> None:
        """Hold message (sender, seq) (its packet's fields, checked) with ``proposal``."""
        self._held[sender, seq] = _Held(sender, seq, ts, dest, payload, index, proposal, False)
        heapq.heappush(self._open, (proposal, sender, seq))

    def _on_proposal(self, p: SkeenProposal) -> list[Action]:
        sender = validate.pid(p.sender, self.n)
        origin = validate.pid(p.origin, self.n, "origin")
        seq = validate.positive(p.seq, "seq")
        number = validate.positive(p.number, "proposal")
        collecting = self._check_proposal(sender, origin, seq, number)
        if collecting is None:
            self.duplicates += 1  # a late copy: the number is final, or known already
            return []
        collecting.proposals[sender] = number
        return self._maybe_finish(seq)

    def _check_proposal(
        self, sender: int, origin: int, seq: int, number: int
    ) -> _Collecting | None:
        """Where a proposal (its fields checked) goes; None for a late copy, RemoteError
        for one that no process could have sent. Changes nothing."""
        if origin != self.pid:
            raise RemoteError(f"proposal for {MessageId(origin, seq)} arrived at P{self.pid}")
        if seq > self.sent_count:
            raise RemoteError(f"proposal for unknown message {MessageId(origin, seq)}")
        collecting = self._collecting.get(seq)
        if collecting is None:
            return None
        if sender not in collecting.dest:
            raise RemoteError(
                f"P{sender} proposed for {MessageId(origin, seq)}, "
                f"which was sent only to {list(collecting.dest)}"
            )
        if number <= collecting.ts:
            raise RemoteError(
                f"proposal {number} for {MessageId(origin, seq)} is not above its stamp "
                f"{collecting.ts}"
            )
        known = collecting.proposals.get(sender)
        if known is not None:
            if known != number:
                raise RemoteError(
                    f"P{sender} proposed {number} for {MessageId(origin, seq)} "
                    f"after proposing {known}"
                )
            return None
        return collecting

    def _maybe_finish(self, seq: int) -> list[Action]:
        """If every destination has proposed, announce the final number."""
        collecting = self._collecting[seq]
        if len(collecting.proposals) < len(collecting.dest):
            return []
        del self._collecting[seq]
        final = max(collecting.proposals.values())
        self.learn_final(final)
        actions: list[Action] = [
            Transmit(q, SkeenFinal(self.pid, seq, final, k), None)
            for q, k in zip(collecting.dest, collecting.indexes, strict=True)
            if q != self.pid
        ]
        held = self._held.get((self.pid, seq))
        if held is not None:
            actions += self._finalize(held, final)
        return actions

    def _on_final(self, f: SkeenFinal) -> list[Action]:
        origin = validate.pid(f.origin, self.n, "origin")
        seq = validate.positive(f.seq, "seq")
        number = validate.positive(f.number, "final number")
        index = validate.positive(f.index, "index")
        held = self._check_final(origin, seq, number, index)
        if held is None:
            self.duplicates += 1  # a late copy
            return []
        self.learn_final(number)
        return self._finalize(held, number)

    def _check_final(self, origin: int, seq: int, number: int, index: int) -> _Held | None:
        """The held message a final number (its fields checked) makes final; None for a
        late copy, RemoteError for one no process could have sent. Changes nothing."""
        mid = MessageId(origin, seq)
        if origin == self.pid:
            raise RemoteError("a process's own final numbers never travel to itself")
        held = self._held.get((origin, seq))
        if held is None:
            known = self._finals.get((origin, seq))
            if known is not None and known != number:
                raise RemoteError(f"second final number {number} for {mid}, which has {known}")
            if known is None and (
                not self._seen(origin, index)
                or any(h.sender == origin and h.index == index for h in self._held.values())
            ):
                raise RemoteError(f"final number for unknown message {mid}")
            if number > self._clock:
                raise RemoteError(
                    f"final number {number} for {mid}, delivered here, is above every "
                    f"number P{self.pid} has seen ({self._clock})"
                )
            return None  # a late copy for a message delivered here
        if held.index != index:
            raise RemoteError(f"final number for {mid} names index {index}, not {held.index}")
        if held.final:
            if held.number != number:
                raise RemoteError(
                    f"second final number {number} for {mid}, which has {held.number}"
                )
            return None
        if number < held.number:
            raise RemoteError(
                f"final number {number} for {mid} is lower than the proposal {held.number} sent"
            )
        return held

    def _finalize(self, held: _Held, number: int) -> list[Action]:
        self._mark_final(held, number)
        return self._drain()

    def _mark_final(self, held: _Held, number: int) -> None:
        held.number, held.final = number, True
        heapq.heappush(self._ready, (number, held.sender, held.seq))

    # -- batches (the rules: ``mailroom.protocols.total.skeen_batch``) -------------------
    def _send_batch(self, payloads: tuple[Any, ...]) -> list[Action]:
        """Broadcast ``payloads`` (2..BATCH_LIMIT of them, checked) as one batch per
        destination."""
        size, dest, pid = len(payloads), tuple(range(self.n)), self.pid
        first = self.next_id().seq
        self.sent_count += size - 1
        ts = self._clock + 1
        self._clock += size
        sent_to = self._sent_to
        for q in dest:
            sent_to[q] += size
        starts = tuple(sent_to[q] - size + 1 for q in dest)  # first index at each q
        mid = MessageId(pid, first)
        actions: list[Action] = [
            Transmit(q, SkeenBatch(pid, first, ts, dest, payloads, starts[q]), mid)
            for q in dest
            if q != pid
        ]
        own = starts[pid]
        for i, payload in enumerate(payloads):
            collecting = _Collecting(ts + i, dest, tuple([k + i for k in starts]), {pid: ts + i})
            self._collecting[first + i] = collecting
            self._hold_fields(pid, first + i, ts + i, dest, payload, own + i, ts + i)
        return actions + self._announce(range(first, first + size))

    def _on_batch(self, b: SkeenBatch) -> list[Action]:
        """A batch of messages: each held and proposed for as it would be alone."""
        payloads = validate.batch_payloads(b.payloads)
        size = len(payloads)
        first_seq = validate.first_of_range(b.first_seq, size, "seq")
        first_ts = validate.first_of_range(b.first_ts, size, "timestamp")
        first_index = validate.first_of_range(b.first_index, size, "index")
        first = SkeenMessage(b.sender, first_seq, first_ts, b.dest, payloads[0], first_index)
        self._check_message(first)  # (the others differ only in counters checked above)
        sender, dest = first.sender, first.dest
        if sender == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        proposed: list[tuple[int, int]] = []
        held = self._held
        for i, payload in enumerate(payloads):
            seq, index = first_seq + i, first_index + i
            if (sender, seq) in held or self._seen(sender, index):
                continue
            self._mark_seen(sender, index)
            self._clock = max(self._clock, first_ts + i) + 1
            self._hold_fields(sender, seq, first_ts + i, dest, payload, index, self._clock)
            proposed.append((seq, self._clock))
        if not proposed:
            self.duplicates += 1
            return []
        actions: list[Action] = []
        for run in skeen_batch.runs(proposed):
            if len(run) == 1:
                reply: object = SkeenProposal(self.pid, sender, run[0][0], run[0][1])
            else:
                reply = SkeenProposalBatch(self.pid, sender, run[0][0], tuple(v for _, v in run))
            actions.append(Transmit(sender, reply, None))
        return actions

    def _on_proposals(self, p: SkeenProposalBatch) -> list[Action]:
        """Proposals for consecutive messages: each taken as a single proposal."""
        sender = validate.pid(p.sender, self.n)
        origin = validate.pid(p.origin, self.n, "origin")
        numbers = skeen_batch.checked_numbers(p.numbers, "proposal")
        first = validate.first_of_range(p.first_seq, len(numbers), "seq")
        places = [
            (first + i, v, self._check_proposal(sender, origin, first + i, v))
            for i, v in enumerate(numbers)
        ]
        fresh = [(seq, v, c) for seq, v, c in places if c is not None]
        if not fresh:
            self.duplicates += 1
            return []
        for _, v, c in fresh:
            c.proposals[sender] = v
        return self._announce([seq for seq, _, _ in fresh])

    def _on_finals(self, f: SkeenFinalBatch) -> list[Action]:
        """Final numbers for consecutive messages: each taken as a single final number."""
        origin = validate.pid(f.origin, self.n, "origin")
        numbers = skeen_batch.checked_numbers(f.numbers, "final number")
        first = validate.first_of_range(f.first_seq, len(numbers), "seq")
        index = validate.first_of_range(f.first_index, len(numbers), "index")
        helds = [self._check_final(origin, first + i, v, index + i) for i, v in enumerate(numbers)]
        fresh = [(h, numbers[i]) for i, h in enumerate(helds) if h is not None]
        if not fresh:
            self.duplicates += 1
            return []
        return self._finalize_all(fresh)

    def _announce(self, seqs: range | list[int]) -> list[Action]:
        """At the origin: of messages ``seqs`` (its own, in order), those with a proposal
        from every destination become final: learned, announced, delivered here if they
        can be."""
        done: list[tuple[int, int, _Collecting]] = []
        for seq in seqs:
            c = self._collecting[seq]
            if len(c.proposals) == len(c.dest):
                del self._collecting[seq]
                done.append((seq, max(c.proposals.values()), c))
        if not done:
            return []
        first_seq, _, first = done[0]
        # consecutive seqs to one destination set are consecutive indexes at each
        # destination (every multicast counts one at each of its destinations)
        dest = first.dest
        together = len(done) > 1 and all(
            seq == first_seq + k and c.dest == dest for k, (seq, _, c) in enumerate(done)
        )
        actions: list[Action]
        if together:  # consecutive everywhere: one batch of final numbers per destination
            numbers = tuple(v for _, v, _ in done)
            actions = [
                Transmit(q, SkeenFinalBatch(self.pid, first_seq, k, numbers), None)
                for q, k in zip(first.dest, first.indexes, strict=True)
                if q != self.pid
            ]
        else:
            actions = [
                Transmit(q, SkeenFinal(self.pid, seq, v, k), None)
                for seq, v, c in done
                for q, k in zip(c.dest, c.indexes, strict=True)
                if q != self.pid
            ]
        own = [(self._held.get((self.pid, seq)), v) for seq, v, _ in done]
        self.learn_finals([v for _, v, _ in done])
        return actions + self._finalize_all([(h, v) for h, v in own if h is not None], learn=False)

    def _finalize_all(self, fresh: list[tuple[_Held, int]], *, learn: bool = True) -> list[Action]:
        """Mark each held message final with its number (learned first), then deliver."""
        if learn:
            self.learn_finals([v for _, v in fresh])
        for held, number in fresh:
            self._mark_final(held, number)
        return self._drain()

    # -- the rules a variant may change (mailroom.core.hooks) ------------------------------
    @hook
    def learn_final(self, number: int) -> None:
        """Rule: a final number learned here (announced or received) raises the clock to
        it, so later proposals here exceed it."""
        self._clock = max(self._clock, number)

    @hook
    def learn_finals(self, numbers: Sequence[int]) -> None:
        """Rule: the final numbers of a batch's messages, learned together (announced or
        received): each as a single final number (``learn_final``)."""
        for number in numbers:
            self.learn_final(number)

    @hook
    def next_delivery(self) -> Key | None:
        """Rule: whether the held message with the lowest final key (``lowest_final()``)
        is delivered now: its key (number, origin, seq) if so, else None. Here: if that
        key is below every key still open."""
        if not self._ready:
            return None
        low = self.lowest_open()
        return self._ready[0] if low is None or self._ready[0] < low else None

    def lowest_final(self) -> Key | None:
        """The lowest key of a held message whose number is final (None if there is none)."""
        return self._ready[0] if self._ready else None

    def lowest_open(self) -> Key | None:
        """The lowest key of a held message that is not final yet (None if every held
        message is final)."""
        heap, held = self._open, self._held
        while heap:
            h = held.get((heap[0][1], heap[0][2]))
            if h is not None and not h.final:
                return heap[0]
            heapq.heappop(heap)
        return None

    def _next_ready(self) -> Key | None:
        """``next_delivery()`` (the name restoring a snapshot checks it by)."""
        return self.next_delivery()

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while self.next_delivery() is not None:
            actions.append(self._deliver(heapq.heappop(self._ready)))
        return actions

    def _deliver(self, key: Key) -> Deliver:
        h = self._held.pop((key[1], key[2]))
        if self.keep_finals:
            finals = self._finals
            finals[key[1], key[2]] = h.number
            if len(finals) > self.keep_finals:
                del finals[next(iter(finals))]
        return delivery(key[1], key[2], h.payload)

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._held)

    def retained(self) -> int:
        """Per-message entries kept: held, collecting proposals, finals remembered,
        and indexes that arrived out of order."""
        return (
            len(self._held)
            + len(self._collecting)
            + len(self._finals)
            + sum(len(h) for h in self._high)
        )

    def _waits_on(self, key: Key) -> list[MessageId]:
        """The held messages not final yet whose keys are below ``key``."""
        return [
            MessageId(h.sender, h.seq)
            for h in sorted(self._held.values(), key=lambda h: h.key)
            if not h.final and h.key < key
        ]

    def pending(self) -> list[Pending]:
        out = []
        for _, h in sorted(self._held.items(), key=lambda item: item[1].key):
            mid = MessageId(h.sender, h.seq)
            if not h.final:
                wait = Wait(mid.origin, 0, 1, "final number")
                why = f"its final number from P{mid.origin} (proposed {h.number})"
            else:
                others = self._waits_on(h.key)
                if not others:  # only on a subclass with another delivery rule
                    others = sorted(MessageId(*m) for m, x in self._held.items() if not x.final)
                wait = Wait(others[0].origin, 0, 1, "final number")
                why = "the final numbers of " + ", ".join(str(o) for o in others)
            out.append(Pending(_message(h.message), (wait,), why))
        return out

    # -- the snapshot's custom fields (``persistent``): the mail room, the proposals being
    # collected and the final numbers remembered, each dumped and loaded strictly
    def _dump_held(self) -> list[dict[str, Any]]:
        return [
            {"message": packet_to_data(h.message), "number": h.number, "final": h.final}
            for _, h in sorted(self._held.items())
        ]

    def _load_held(self, data: object) -> None:
        for item in snap_list(data, "held"):
            m = packet_from_data(SkeenMessage, item["message"])
            mid = self._check_message(m)
            if (mid.origin, mid.seq) in self._held:
                raise LocalError(f"snapshot holds {mid} twice")
            number = snap_positive(item["number"], "held.number")
            if number > self._clock or number < m.ts:
                raise LocalError(f"snapshot holds {mid} with number {number} outside 1..clock")
            self._hold(m, number)
            if snap_bool(item["final"], "held.final"):
                self._mark_final(self._held[mid.origin, mid.seq], number)
        if self._next_ready() is not None:
            raise LocalError("snapshot holds a message that was deliverable")

    def _dump_collecting(self) -> list[dict[str, Any]]:
        return [
            {
                "seq": seq,
                "ts": c.ts,
                "dest": list(c.dest),
                "indexes": list(c.indexes),
                "proposals": [[q, v] for q, v in sorted(c.proposals.items())],
            }
            for seq, c in sorted(self._collecting.items())
        ]

    def _load_collecting(self, data: object) -> None:
        for item in snap_list(data, "collecting"):
            seq = snap_positive(item["seq"], "collecting.seq")
            if seq > self.sent_count or seq in self._collecting:
                raise LocalError(f"snapshot collects for message {seq} twice or never sent")
            dest = tuple(
                snap_pid(q, self.n, "collecting.dest")
                for q in snap_list(item["dest"], "collecting.dest")
            )
            if not dest or list(dest) != sorted(set(dest)):
                raise LocalError("snapshot field collecting.dest is not a sorted set of pids")
            indexes = tuple(
                snap_positive(k, "collecting.indexes")
                for k in snap_list(item["indexes"], "collecting.indexes")
            )
            if len(indexes) != len(dest):
                raise LocalError("snapshot field collecting.indexes does not match dest")
            proposals: dict[int, int] = {}
            for q, v in snap_list(item["proposals"], "collecting.proposals"):
                if snap_pid(q, self.n, "proposal") not in dest or q in proposals:
                    raise LocalError("snapshot holds a proposal from outside the destinations")
                proposals[q] = snap_positive(v, "proposal")
            if len(proposals) >= len(dest):
                raise LocalError("snapshot collects proposals for a message already final")
            self._collecting[seq] = _Collecting(
                snap_positive(item["ts"], "collecting.ts"), dest, indexes, proposals
            )

    def _dump_finals(self) -> list[list[int]]:
        return [[origin, seq, v] for (origin, seq), v in self._finals.items()]

    def _load_finals(self, data: object) -> None:
        for item in snap_list(data, "finals"):
            origin, seq, number = item
            mid = (snap_pid(origin, self.n, "finals"), snap_positive(seq, "finals"))
            if mid in self._finals:
                raise LocalError(f"snapshot lists {MessageId(*mid)} twice in finals")
            self._finals[mid] = snap_positive(number, "finals")
        if len(self._finals) > self.keep_finals:
            raise LocalError("snapshot keeps more finals than keep_finals")

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[Skeen]] = Receivers(
        "Skeen",
        "a message, proposal or final",
        {
            SkeenMessage: _on_message,
            SkeenProposal: _on_proposal,
            SkeenFinal: _on_final,
            SkeenBatch: _on_batch,
            SkeenProposalBatch: _on_proposals,
            SkeenFinalBatch: _on_finals,
        },
    )

    persistent = (
        argument("keep_finals", kind=COUNTER),
        counter("_clock", "clock"),
        Field.custom("held", _dump_held, _load_held),
        Field.custom("collecting", _dump_collecting, _load_collecting),
        counts("_sent_to", "sent_to"),
        window("seen", "_low", "_high"),
        Field.custom("finals", _dump_finals, _load_finals),
    )


def _message(m: SkeenMessage) -> Message:
    return Message(MessageId(m.sender, m.seq), m.sender, m.payload)


__all__ = ["Skeen", "SkeenFinal", "SkeenMessage", "SkeenProposal"]
