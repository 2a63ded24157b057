"""Known-buggy protocol variants: the harness must catch each one.

A property test that cannot fail proves nothing; these are the evidence that
ours can. Each docstring says which property breaks and why.
"""

from __future__ import annotations

from collections.abc import Iterator

from mailroom.clocks import FrozenMatrix, Row
from mailroom.core.actions import Action, Deliver
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId
from mailroom.core.persist import packets
from mailroom.protocols._buffer import rescan
from mailroom.protocols.causal.broadcast import CBCAST, CBCASTBatch, CBCASTPacket
from mailroom.protocols.causal.ks import KS, Entry
from mailroom.protocols.causal.tagged import TaggedCausalBroadcast
from mailroom.protocols.causal.unicast import RST
from mailroom.protocols.reliable import Reliable, ReliablePacket
from mailroom.protocols.reliable import _message as _reliable_message


class RSTSelfDoubleCount(RST):
    """Does step 2 for self-sends too: SENT[i][i] is counted twice and the next
    self-addressed message waits forever for one that never existed (liveness)."""

    protocol = "RSTSelfDoubleCount"

    def _count_sent(self, j: int) -> None:
        self.sent.increment(j, self.pid)


class RSTColumnOnly(RST):
    """Attaches only the destination's column of SENT (the open question "does
    every message need the whole matrix?"). Transitive knowledge is lost: in the Alice/Bob/Carol run
    m3 no longer tells Carol about m1, so she delivers m3 first (causal)."""

    protocol = "RSTColumnOnly"

    def _attach(self, to: int) -> FrozenMatrix:
        return tuple(
            tuple(v if j == to else 0 for j, v in enumerate(row)) for row in self.sent.freeze()
        )


class KSDestOnly(KS):
    """Prunes too eagerly when piggybacking: sends only the log entries that name the
    destination (the KS analogue of RSTColumnOnly). In the Alice/Bob/Carol run m2
    no longer tells Bob about m1 to Carol, so Bob's m3 cannot tell Carol either and
    she delivers m3 first (causal)."""

    protocol = "KSDestOnly"

    def _piggyback(self, d: int, dests: tuple[int, ...]) -> Iterator[Entry]:
        return (e for e in super()._piggyback(d, dests) if d in e[2])


class KSForgetOnSend(KS):
    """Prunes too eagerly after sending: treats a new message as implying every logged
    dependency, at every destination, not only at its own. A dependency to a third
    process is forgotten once the sender has sent anything else, and a later message
    that causally follows it reaches that process unconstrained (causal)."""

    protocol = "KSForgetOnSend"

    def _implied_by(self, dests: tuple[int, ...]) -> None:
        for entries in self._log:
            for ds in entries.values():
                ds.clear()


class _NaiveCBCAST(CBCAST):
    """CBCAST with a list buffer rescanned after every delivery and a custom rule."""

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._held: list[CBCASTPacket] = []

    def _deliverable(self, p: CBCASTPacket) -> bool:
        raise NotImplementedError

    def receive(self, packet: object) -> list[Action]:
        p = self._validate(packet)
        if p.vc[p.sender] <= self._clock[p.sender] or p in self._held:
            self.duplicates += 1
            return []
        self._held.append(p)
        return rescan(self._held, self._deliverable, self._deliver)

    def _deliver(self, p: CBCASTPacket) -> Action:
        self._clock[:] = [max(a, b) for a, b in zip(self._clock, p.vc, strict=True)]
        return Deliver(self._message(p))

    def buffered(self) -> int:
        return len(self._held)

    def pending(self) -> list:  # type: ignore[type-arg]
        return []

    def _hold_restored(self, p: CBCASTPacket) -> None:
        p = self._validate(p)
        if p.vc[p.sender] <= self._clock[p.sender] or p in self._held:
            raise LocalError("snapshot holds a packet delivered or held twice")
        self._held.append(p)

    #: CBCAST's fields (its mail room still takes batches), and the list rescanned
    persistent = (
        *CBCAST.persistent,
        packets("held", CBCASTPacket, lambda ep: ep._held, _hold_restored),
    )


class CBCASTNoOneGreater(_NaiveCBCAST):
    """Drops the sender's "exactly one greater" check: a later broadcast from the
    same sender overtakes an earlier one (FIFO, hence causal, order breaks)."""

    protocol = "CBCASTNoOneGreater"

    def _deliverable(self, p: CBCASTPacket) -> bool:
        return all(v <= self._clock[k] for k, v in enumerate(p.vc) if k != p.sender)


class CBCASTSenderOnly(_NaiveCBCAST):
    """Checks only the sender's entry, ignoring what else the message depends on:
    FIFO holds, causal order across senders breaks."""

    protocol = "CBCASTSenderOnly"

    def _deliverable(self, p: CBCASTPacket) -> bool:
        return p.vc[p.sender] == self._clock[p.sender] + 1


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

    def receive(self, packet: object) -> list[Action]:
        p = self._validate(packet)
        if isinstance(p, ReliablePacket) and p.seq <= self.received[p.sender]:
            return [Deliver(_reliable_message(p))]
        return super().receive(packet)


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

    def _stamp(self) -> Row:
        return tuple(self._delivered)


class CBCASTBatchEager(CBCAST):
    """Delivers every new message of a batch as it arrives, skipping the check that
    the batch's causal past (the other entries of its stamp) is delivered: a batch
    sent after delivering m can be delivered before m (causal)."""

    protocol = "CBCASTBatchEager"

    def _receive_batch(self, p: CBCASTBatch) -> list[Action]:
        sender, vc, payloads = self._validate_batch(p)
        actions: list[Action] = []
        for i, payload in enumerate(payloads):
            index = vc[sender] + i - 1
            if index < self._clock[sender] or self._buffer.holds(sender, index):
                continue
            if index == self._clock[sender]:  # next from its sender: no other check
                self._clock[sender] += 1
                self._buffer.delivered_one(sender)
                actions.append(Deliver(Message(MessageId(sender, index + 1), sender, payload)))
            else:
                stamp = (*vc[:sender], index + 1, *vc[sender + 1 :])
                self._buffer.offer(sender, index, stamp, CBCASTPacket(sender, stamp, payload))
            actions += self._drain()
        return actions
