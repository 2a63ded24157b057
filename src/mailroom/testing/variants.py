"""Known-buggy protocol variants: the harness must catch each one.

A property test that cannot fail proves nothing; these are the evidence that
ours can. Each docstring says which property breaks and why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from mailroom.clocks import FrozenMatrix, Row
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import Field, counts, snap_list
from mailroom.core.wire import packet_from_data, packet_to_data
from mailroom.protocols._buffer import rescan
from mailroom.protocols.causal.broadcast import CBCAST, CBCASTPacket
from mailroom.protocols.causal.ks import KS, Entry
from mailroom.protocols.causal.tagged import TaggedCausalBroadcast
from mailroom.protocols.causal.unicast import RST
from mailroom.protocols.fifo import Fifo
from mailroom.protocols.reliable import Reliable, ReliablePacket


class RSTSelfDoubleCount(RST):
    """Does step 2 for self-sends too: SENT[i][i] is counted twice and the next
    self-addressed message waits forever for one that never existed (liveness)."""

    protocol = "RSTSelfDoubleCount"

    def count_sent(self, j: int) -> None:
        self.sent.increment(j, self.pid)


class RSTColumnOnly(RST):
    """Attaches only the destination's column of SENT (the open question "does
    every message need the whole matrix?"). Transitive knowledge is lost: in the Alice/Bob/Carol run
    m3 no longer tells Carol about m1, so she delivers m3 first (causal)."""

    protocol = "RSTColumnOnly"

    def attached(self, to: int) -> FrozenMatrix:
        return tuple(
            tuple(v if j == to else 0 for j, v in enumerate(row)) for row in self.sent.freeze()
        )


class RSTBatchOneMatrix(RST):
    """Gives every message of a batch the batch's matrix as it is: each looks like the
    first message on its channel, so all but the first are dropped as copies and never
    delivered (liveness)."""

    protocol = "RSTBatchOneMatrix"

    def entry_sent(self, sent: FrozenMatrix, sender: int, dest: int, i: int) -> FrozenMatrix:
        return sent


class KSBatchFirstOnly(KS):
    """Takes a batch's dependencies to be its first message's alone: the later messages
    carry an empty log, so while the first waits for a message it depends on they are
    delivered ahead of it (fifo, causal)."""

    protocol = "KSBatchFirstOnly"

    def batch_log(
        self, entries: list[Entry], sender: int, dest: int, i: int, first: int
    ) -> list[Entry]:
        return entries if i == 0 else []


class KSDestOnly(KS):
    """Prunes too eagerly when piggybacking: sends only the log entries that name the
    destination (the KS analogue of RSTColumnOnly). In the Alice/Bob/Carol run m2
    no longer tells Bob about m1 to Carol, so Bob's m3 cannot tell Carol either and
    she delivers m3 first (causal)."""

    protocol = "KSDestOnly"

    def piggyback(self, d: int, dests: tuple[int, ...]) -> Iterator[Entry]:
        return (e for e in super().piggyback(d, dests) if d in e[2])


class KSForgetOnSend(KS):
    """Prunes too eagerly after sending: treats a new message as implying every logged
    dependency, at every destination, not only at its own. A dependency to a third
    process is forgotten once the sender has sent anything else, and a later message
    that causally follows it reaches that process unconstrained (causal)."""

    protocol = "KSForgetOnSend"

    def implied_by(self, dests: tuple[int, ...]) -> None:
        super().implied_by(tuple(range(self.n)))


class _NaiveCBCAST(EndpointBase):
    """CBCAST's packets and stamps with a list mail room, rescanned after every delivery,
    and a delivery rule of its own (``deliverable``): rules that CBCAST's dependency
    buffer cannot state."""

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        #: clock[k]: the broadcasts of P_k delivered here (a broadcast's stamp)
        self.clock = [0] * n
        self.held: list[CBCASTPacket] = []

    @hook
    def deliverable(self, p: CBCASTPacket) -> bool:
        """Rule: CBCAST's own (next from its sender, and nothing it depends on missing);
        each variant below states the rule it breaks it into."""
        clock, s = self.clock, p.sender
        return p.vc[s] == clock[s] + 1 and all(v <= clock[k] for k, v in enumerate(p.vc) if k != s)

    def broadcast(self, payload: Payload) -> list[Action]:
        """As CBCAST: stamp with the clock after counting this one, deliver at once."""
        self.check_payload(payload)
        self.clock[self.pid] += 1
        mid = self.next_id()
        stamped = CBCASTPacket(self.pid, tuple(self.clock), payload)
        peers = [q for q in range(self.n) if q != self.pid]
        return [
            *(Transmit(q, stamped, mid) for q in peers),
            Deliver(Message(mid, self.pid, payload)),
        ]

    def receive(self, packet: object) -> list[Action]:
        validate.expect_type(packet, CBCASTPacket, self.protocol)
        assert isinstance(packet, CBCASTPacket)
        stamp = validate.vector(packet.vc, self.n, "vector clock")
        sender = validate.pid(packet.sender, self.n)
        if stamp[sender] <= self.clock[sender] or packet in self.held:
            self.duplicates += 1
            return []
        self.held.append(packet)
        return rescan(self.held, self.deliverable, self._deliver_held)

    def _deliver_held(self, q: CBCASTPacket) -> Action:
        self.clock[:] = [max(a, b) for a, b in zip(self.clock, q.vc, strict=True)]
        mid = MessageId(q.sender, q.vc[q.sender])
        return Deliver(Message(mid, q.sender, q.payload))

    def buffered(self) -> int:
        return len(self.held)

    def pending(self) -> list[Pending]:
        return []

    def _load_held(self, data: object) -> None:
        self.held = [packet_from_data(CBCASTPacket, p) for p in snap_list(data, "held")]

    persistent = (
        counts("clock"),
        Field.custom("held", lambda ep: [packet_to_data(p) for p in ep.held], _load_held),
    )


class CBCASTNoOneGreater(_NaiveCBCAST):
    """Drops the sender's "exactly one greater" check: a later broadcast from the
    same sender overtakes an earlier one (FIFO, hence causal, order breaks)."""

    protocol = "CBCASTNoOneGreater"

    def deliverable(self, p: CBCASTPacket) -> bool:
        return all(v <= self.clock[k] for k, v in enumerate(p.vc) if k != p.sender)


class CBCASTSenderOnly(_NaiveCBCAST):
    """Checks only the sender's entry, ignoring what else the message depends on:
    FIFO holds, causal order across senders breaks."""

    protocol = "CBCASTSenderOnly"

    def deliverable(self, p: CBCASTPacket) -> bool:
        return p.vc[p.sender] == self.clock[p.sender] + 1


class ReliableNoRetransmit(Reliable):
    """Never retransmits: a lost packet is lost for good and every message behind it
    waits forever (liveness)."""

    protocol = "ReliableNoRetransmit"

    def tick(self, now: float) -> list[Action]:
        return []

    def next_deadline(self) -> float | None:
        return None


class ReliableNoDedup(Reliable):
    """Forgets which packets it already delivered: a duplicated or retransmitted
    packet is delivered again (integrity)."""

    protocol = "ReliableNoDedup"

    def on_copy(self, p: ReliablePacket) -> list[Action]:
        return [Deliver(Message(MessageId(p.sender, p.msg), p.sender, p.payload))]


class NaiveTagged(TaggedCausalBroadcast):
    """Known-buggy: exposes the middleware's internal vector clock as the tag.

    A broadcast is stamped with every message handed out so far, including
    deliveries the application has not consumed yet (docs/tagged-causal.md). In the
    callback model a send issued while handling the first of a batch of
    deliveries is tagged as after the rest of the batch: concurrent messages are
    over-ordered, and receivers make it wait for messages it does not depend on.
    Explicit consumption by default (with consumption on delivery the two coincide).
    """

    protocol = "NaiveTagged"

    def __init__(
        self, pid: int, n: int, *, ack_every: int | None = 1, consume: str = "explicit"
    ) -> None:
        super().__init__(pid, n, ack_every=ack_every, consume=consume)

    def stamp(self) -> Row:
        return self.delivered.entries


class TaggedBatchFirstTag(TaggedCausalBroadcast):
    """Gives every message of a batch the batch's first tag: the second and later
    messages look like copies of the first and are dropped at every receiver, so they
    are never delivered there (liveness)."""

    protocol = "TaggedBatchFirstTag"

    def entry_tag(self, tag: Row, sender: int, i: int) -> Row:
        return tag


class CBCASTBatchEager(CBCAST):
    """Delivers a batch whole when it is next from its sender, skipping the check that
    the batch's causal past (the other entries of its stamp) is delivered: a batch sent
    after delivering m can be delivered before m (causal)."""

    protocol = "CBCASTBatchEager"

    def batch_deliverable(self, sender: int, stamp: Sequence[int]) -> bool:
        return stamp[sender] == self.clock[sender] + 1


class FifoBatchReversed(Fifo):
    """Delivers a batch that is next on its channel last message first: the sender's
    messages arrive in order and are delivered out of it (FIFO)."""

    protocol = "FifoBatchReversed"

    def deliver_run(self, sender: int, first_seq: int, payloads: tuple[Any, ...]) -> list[Action]:
        return super().deliver_run(sender, first_seq, payloads)[::-1]
