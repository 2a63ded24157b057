"""Known-buggy total-order variants: the harness must catch each one.

Each docstring says which property breaks and why.
"""

from __future__ import annotations

from mailroom.core.actions import Action, Deliver
from mailroom.core.messages import Message, MessageId
from mailroom.core.persist import POSITIVE, Field, set_of
from mailroom.protocols.total.sequencer import Sequencer, SequencerOrder, SequencerOrderBatch
from mailroom.protocols.total.skeen import Skeen


class SkeenNoClockRaise(Skeen):
    """Does not raise the clock to the final numbers it learns (Skeen's
    correctness argument needs it): a process that delivered B can later
    propose for A a number below B's, so A is ordered before B elsewhere (total)."""

    protocol = "SkeenNoClockRaise"

    def learn_final(self, number: int) -> None:
        pass


class SkeenEagerDelivery(Skeen):
    """Delivers a message as soon as its number is final, without waiting for the
    other held messages to be final: one of those may still end up with a smaller
    number, which other processes deliver first (total)."""

    protocol = "SkeenEagerDelivery"

    def next_delivery(self) -> tuple[int, int, int] | None:
        return self.lowest_final()


class SequencerNoHold(Sequencer):
    """Delivers numbered messages as they arrive, ignoring the numbers: two
    processes that receive them in different orders deliver them differently
    (total)."""

    protocol = "SequencerNoHold"

    def __init__(self, pid: int, n: int, sequencer: int = 0) -> None:
        super().__init__(pid, n, sequencer)
        #: the numbers delivered (nothing is held, so ``delivered`` stays 0)
        self.seen_numbers: set[int] = set()

    def deliver_order(self, order: SequencerOrder) -> list[Action]:
        if order.number in self.seen_numbers:
            self.duplicates += 1
            return []
        self.seen_numbers.add(order.number)
        return [Deliver(Message(MessageId(order.origin, order.seq), order.origin, order.payload))]

    #: Sequencer's fields and the numbers delivered as they arrived
    persistent = (
        *Sequencer.persistent,
        Field("delivered_numbers", "seen_numbers", set_of(POSITIVE)),
    )


class SequencerBatchReversed(Sequencer):
    """Receivers deliver a batch's messages last first: the sequencer delivers them in
    number order, everyone else in reverse, so two processes disagree (total)."""

    protocol = "SequencerBatchReversed"

    def deliver_batch(self, batch: SequencerOrderBatch, start: int) -> list[Action]:
        actions = super().deliver_batch(batch, start)
        run = len(batch.payloads) - start  # the batch's own deliveries come first
        return actions[:run][::-1] + actions[run:]
