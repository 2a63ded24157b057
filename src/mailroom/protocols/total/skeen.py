"""Skeen's total order multicast (seed 003, "Protocol 2"; seed 004's two-phase multicast).

State at P_i: a Lamport ``clock``; the mail room of received messages, each with
a number and a flag saying whether the number is final; and, for each message
P_i sent whose number is not yet final, the proposals collected so far.

Rules:

- Multicast m to a set D: clock += 1; send m stamped ts = clock to every other
  member of D. If P_i is in D it holds m itself with proposal ts.
- Receipt of m (stamp ts) at q: clock = max(clock, ts) + 1; hold m with the
  proposal ``clock``; reply to the sender with that proposal.
- When the sender has a proposal from every member of D, the final number is
  their maximum; it announces the final number to the other members.
- Receipt of a final number f at q: clock = max(clock, f) (a later proposal
  must not undercut a message delivered here); mark m final with number f.
- Delivery: when every held message is final, deliver them all in order of
  (number, origin, seq): ties broken by sender id, then by sender's count.
  (A count of the held messages not yet final makes this check O(1) per packet;
  each batch is sorted once, O(log k) per delivered message.)

Any two messages are delivered in the same order wherever both are delivered:
if B is delivered at q before A reaches q, q's clock is at least B's number when
it proposes for A, so A's number is larger. ``broadcast`` is the multicast to
everyone. Over a reordering network the order is neither FIFO nor causal (a
sender's second message may reach a receiver first and be proposed a lower
number); for broadcasts over FIFO channels it is both.

Duplicated packets are dropped quietly. A proposal for a message this process
never sent or from outside its destination set, a proposal that changes, a
final number for a message never received here, a final number lower than the
proposal sent, or a second, different final number: RemoteError.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase, Snapshot
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.wire import as_row, packet, packet_from_data, packet_to_data


@packet
@attrs.frozen
class SkeenMessage:
    """Message (sender, seq) for the set ``dest``, stamped with the sender's clock."""

    sender: int
    seq: int
    ts: int
    dest: tuple[int, ...] = attrs.field(converter=as_row)
    payload: Any


@packet
@attrs.frozen
class SkeenProposal:
    """``sender`` proposes ``number`` for message (origin, seq)."""

    sender: int
    origin: int
    seq: int
    number: int


@packet
@attrs.frozen
class SkeenFinal:
    """Message (origin, seq) has the final ``number``."""

    origin: int
    seq: int
    number: int


@attrs.define
class _Held:
    message: SkeenMessage
    number: int
    final: bool

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.number, self.message.sender, self.message.seq)


@attrs.define
class _Collecting:
    ts: int
    dest: tuple[int, ...]
    proposals: dict[int, int]


class Skeen(EndpointBase):
    """Total order multicast to any set of processes, without a coordinator."""

    protocol = "Skeen"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._clock = 0
        self._held: dict[MessageId, _Held] = {}
        #: how many held messages are not final yet: delivery waits while this is not 0,
        #: so a packet checks one counter instead of scanning the mail room
        self._unfinal = 0
        self._collecting: dict[int, _Collecting] = {}
        #: final numbers of the messages delivered here (to recognise late copies)
        self.finals: dict[MessageId, int] = {}

    @property
    def clock(self) -> int:
        """The Lamport clock."""
        return self._clock

    # -- the application's side ----------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Multicast ``payload`` to every process, this one included."""
        return self.multicast(payload, to=range(self.n))

    def multicast(self, payload: Payload, to: Iterable[int]) -> list[Action]:
        """Send ``payload`` to the processes ``to`` (this one may or may not be among them)."""
        dest = tuple(sorted({self._check_dest(q) for q in to}))
        if not dest:
            raise LocalError("multicast needs at least one destination")
        self._check_payload(payload)
        mid = self._next_id()
        self._clock += 1
        ts = self._clock
        m = SkeenMessage(self.pid, mid.seq, ts, dest, payload)
        actions: list[Action] = [Transmit(q, m, mid) for q in dest if q != self.pid]
        collecting = _Collecting(ts, dest, {})
        self._collecting[mid.seq] = collecting
        if self.pid in dest:
            self._held[mid] = _Held(m, ts, final=False)
            self._unfinal += 1
            collecting.proposals[self.pid] = ts
        return actions + self._maybe_finish(mid.seq)

    # -- the network's side ----------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        kind = type(packet)
        if kind is SkeenMessage:
            return self._on_message(packet)  # type: ignore[arg-type]
        if kind is SkeenProposal:
            return self._on_proposal(packet)  # type: ignore[arg-type]
        if kind is SkeenFinal:
            return self._on_final(packet)  # type: ignore[arg-type]
        raise RemoteError(f"Skeen expected a message, proposal or final, got {kind.__name__}")

    def _on_message(self, m: SkeenMessage) -> list[Action]:
        sender = validate.pid(m.sender, self.n)
        seq = validate.positive(m.seq, "seq")
        ts = validate.positive(m.ts, "timestamp")
        dest = m.dest
        if not isinstance(dest, tuple) or not dest:
            raise RemoteError(f"destination set must be a non-empty list, got {dest!r}")
        for q in dest:
            validate.pid(q, self.n, "destination")
        if list(dest) != sorted(set(dest)):
            raise RemoteError(f"destination set {list(dest)} is not sorted without repeats")
        if self.pid not in dest:
            raise RemoteError(f"message for {list(dest)} arrived at P{self.pid}")
        if sender == self.pid:
            raise RemoteError("a process's own messages never travel to itself")
        mid = MessageId(sender, seq)
        if mid in self._held or mid in self.finals:
            self.duplicates += 1
            return []
        self._clock = max(self._clock, ts) + 1
        self._held[mid] = _Held(m, self._clock, final=False)
        self._unfinal += 1
        return [Transmit(sender, SkeenProposal(self.pid, sender, seq, self._clock), None)]

    def _on_proposal(self, p: SkeenProposal) -> list[Action]:
        sender = validate.pid(p.sender, self.n)
        origin = validate.pid(p.origin, self.n, "origin")
        seq = validate.positive(p.seq, "seq")
        number = validate.positive(p.number, "proposal")
        if origin != self.pid:
            raise RemoteError(f"proposal for {MessageId(origin, seq)} arrived at P{self.pid}")
        if seq > self.sent_count:
            raise RemoteError(f"proposal for unknown message {MessageId(origin, seq)}")
        collecting = self._collecting.get(seq)
        if collecting is None:
            self.duplicates += 1  # the number is final already: a late copy
            return []
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
            self.duplicates += 1
            return []
        collecting.proposals[sender] = number
        return self._maybe_finish(seq)

    def _maybe_finish(self, seq: int) -> list[Action]:
        """If every destination has proposed, announce the final number."""
        collecting = self._collecting[seq]
        if len(collecting.proposals) < len(collecting.dest):
            return []
        del self._collecting[seq]
        final = max(collecting.proposals.values())
        self._learn(final)
        announce = SkeenFinal(self.pid, seq, final)
        actions: list[Action] = [
            Transmit(q, announce, None) for q in collecting.dest if q != self.pid
        ]
        held = self._held.get(MessageId(self.pid, seq))
        if held is not None:
            held.number, held.final = final, True
            self._unfinal -= 1
            actions += self._drain()
        return actions

    def _on_final(self, f: SkeenFinal) -> list[Action]:
        origin = validate.pid(f.origin, self.n, "origin")
        seq = validate.positive(f.seq, "seq")
        number = validate.positive(f.number, "final number")
        mid = MessageId(origin, seq)
        if origin == self.pid:
            raise RemoteError("a process's own final numbers never travel to itself")
        held = self._held.get(mid)
        known = held.number if held is not None and held.final else self.finals.get(mid)
        if known is not None:
            if known != number:
                raise RemoteError(f"second final number {number} for {mid}, which has {known}")
            self.duplicates += 1
            return []
        if held is None:
            raise RemoteError(f"final number for unknown message {mid}")
        if number < held.number:
            raise RemoteError(
                f"final number {number} for {mid} is lower than the proposal {held.number} sent"
            )
        self._learn(number)
        held.number, held.final = number, True
        self._unfinal -= 1
        return self._drain()

    def _learn(self, final: int) -> None:
        """Raise the clock to a final number, so later proposals here exceed it."""
        self._clock = max(self._clock, final)

    def _drain(self) -> list[Action]:
        if self._unfinal:
            return []
        actions: list[Action] = []
        for mid, h in sorted(self._held.items(), key=lambda item: item[1].key):
            self.finals[mid] = h.number
            actions.append(Deliver(_message(h.message)))
        self._held.clear()
        return actions

    # -- introspection -------------------------------------------------------------------
    def buffered(self) -> int:
        return len(self._held)

    def pending(self) -> list[Pending]:
        unfinal = [mid for mid, h in self._held.items() if not h.final]
        out = []
        for mid, h in sorted(self._held.items(), key=lambda item: item[1].key):
            if not h.final:
                wait = Wait(mid.origin, 0, 1, "final number")
                why = f"its final number from P{mid.origin} (proposed {h.number})"
            else:
                others = sorted(unfinal)
                wait = Wait(others[0].origin, 0, 1, "final number")
                why = "the final numbers of " + ", ".join(str(o) for o in others)
            out.append(Pending(_message(h.message), (wait,), why))
        return out

    def snapshot(self) -> Snapshot:
        data = self._header()
        data["clock"] = self._clock
        data["held"] = [
            {"message": packet_to_data(h.message), "number": h.number, "final": h.final}
            for _, h in sorted(self._held.items())
        ]
        data["collecting"] = [
            {
                "seq": seq,
                "ts": c.ts,
                "dest": list(c.dest),
                "proposals": [[q, v] for q, v in sorted(c.proposals.items())],
            }
            for seq, c in sorted(self._collecting.items())
        ]
        data["finals"] = [[m.origin, m.seq, v] for m, v in sorted(self.finals.items())]
        return data

    def _load(self, data: Snapshot) -> None:
        self._clock = _count(data["clock"], "clock")
        for item in data["held"]:
            m = packet_from_data(SkeenMessage, item["message"])
            final = item["final"]
            if type(final) is not bool:
                raise LocalError("snapshot field held.final must be a bool")
            self._held[MessageId(m.sender, m.seq)] = _Held(
                m, _count(item["number"], "held.number"), final
            )
            self._unfinal += not final
        for item in data["collecting"]:
            self._collecting[_count(item["seq"], "collecting.seq")] = _Collecting(
                _count(item["ts"], "collecting.ts"),
                tuple(_count(q, "collecting.dest") for q in item["dest"]),
                {_count(q, "proposal"): _count(v, "proposal") for q, v in item["proposals"]},
            )
        for origin, seq, number in data["finals"]:
            self.finals[MessageId(_count(origin, "finals"), _count(seq, "finals"))] = _count(
                number, "finals"
            )


def _count(value: object, what: str) -> int:
    if type(value) is not int or value < 0:
        raise LocalError(f"snapshot field {what} holds {value!r}, not a counter")
    return value


def _message(m: SkeenMessage) -> Message:
    return Message(MessageId(m.sender, m.seq), m.sender, m.payload)


__all__ = ["Skeen", "SkeenFinal", "SkeenMessage", "SkeenProposal"]
