"""Known-buggy total-order variants: the harness must catch each one.

Each docstring says which property breaks and why.
"""

from __future__ import annotations

from typing import Any

from mailroom.core.actions import Action, Deliver
from mailroom.core.persist import POSITIVE, Field, set_of
from mailroom.protocols.total.sequencer import Sequencer, SequencerOrder
from mailroom.protocols.total.sequencer import _message as _ordered_message
from mailroom.protocols.total.skeen import Skeen


class SkeenNoClockRaise(Skeen):
    """Does not raise the clock to the final numbers it learns (Skeen's
    correctness argument needs it): a process that delivered B can later
    propose for A a number below B's, so A is ordered before B elsewhere (total)."""

    protocol = "SkeenNoClockRaise"

    def _learn(self, final: int) -> None:
        pass


class SkeenEagerDelivery(Skeen):
    """Delivers a message as soon as its number is final, without waiting for the
    other held messages to be final: one of those may still end up with a smaller
    number, which other processes deliver first (total)."""

    protocol = "SkeenEagerDelivery"

    def _next_ready(self) -> tuple[int, int, int] | None:
        return self._ready[0] if self._ready else None


class SequencerNoHold(Sequencer):
    """Delivers numbered messages as they arrive, ignoring the numbers: two
    processes that receive them in different orders deliver them differently
    (total)."""

    protocol = "SequencerNoHold"

    def __init__(self, pid: int, n: int, sequencer: int = 0) -> None:
        super().__init__(pid, n, sequencer)
        self._seen: set[int] = set()

    def _on_order(self, p: SequencerOrder) -> list[Action]:
        if p.number in self._seen:
            self.duplicates += 1
            return []
        self._seen.add(p.number)
        return [Deliver(_ordered_message(p))]

    #: Sequencer's fields and the numbers delivered as they arrived
    persistent = (*Sequencer.persistent, Field("delivered_numbers", "_seen", set_of(POSITIVE)))


class SequencerBatchReversed(Sequencer):
    """Receivers deliver a batch's messages last first: the sequencer delivers them in
    number order, everyone else in reverse, so two processes disagree (total)."""

    protocol = "SequencerBatchReversed"

    def _deliver_run(
        self, origin: int, first: int, first_seq: int, payloads: tuple[Any, ...], start: int
    ) -> list[Action]:
        actions = super()._deliver_run(origin, first, first_seq, payloads, start)
        run = len(payloads) - start  # the batch's own deliveries come first
        return actions[:run][::-1] + actions[run:]
