"""Skeen's batch form: k broadcasts of one process in three packets per destination.

Rules, in words (the single-message rules of ``mailroom.protocols.total.skeen``, for k
consecutive messages at once):

- ``broadcast_many``: the sender stamps its k messages clock + 1 .. clock + k (one
  tick each, as k broadcasts would) and sends one ``SkeenBatch`` per destination.
- Receipt of a batch: its messages are taken one after another, as k single
  messages arriving in a row (each proposed max(clock, stamp) + 1, the clock raised
  each time); the proposals for a run of consecutive messages go back in one
  ``SkeenProposalBatch``. The mail room holds single messages, so the state and the
  snapshot are those of k single messages.
- Receipt of proposals: each is a single proposal; the messages whose numbers become
  final are announced together, one ``SkeenFinalBatch`` per destination when they
  are consecutive at each destination (else one ``SkeenFinal`` each).
- Receipt of final numbers: each is a single final number (``learn_finals``, a hook,
  learns them); then the mail room delivers what it can.

Every packet is checked whole before anything changes: a batch with one impossible
entry is a RemoteError and leaves the endpoint as it was.

``Skeen`` owns the code of these rules (its ``_send_batch``, ``_on_batch``,
``_on_proposals``, ``_on_finals``); this module keeps the rules in words, the two pure
helpers they use, and its older entry points, each now a call of ``Skeen``'s public
API (``broadcast_many``, ``receive``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mailroom.core import validate
from mailroom.core.actions import Action
from mailroom.core.errors import RemoteError
from mailroom.protocols.total import skeen_packets as sp

if TYPE_CHECKING:
    from mailroom.protocols.total.skeen import Skeen


def checked_numbers(value: object, what: str) -> tuple[int, ...]:
    """A batch's numbers: 1..BATCH_LIMIT positive counters (RemoteError otherwise)."""
    if type(value) is not tuple or not 1 <= len(value) <= validate.BATCH_LIMIT:
        raise RemoteError(f"a batch carries 1..{validate.BATCH_LIMIT} {what}s")
    if set(map(type, value)) == {int} and min(value) >= 1 and max(value) <= validate.MAX_COUNTER:
        return value  # the common case, checked without a call per number
    for v in value:
        validate.positive(v, what)
    return value


def runs(items: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """``(seq, number)`` pairs split into runs of consecutive seqs."""
    out: list[list[tuple[int, int]]] = []
    for item in items:
        if out and out[-1][-1][0] + 1 == item[0]:
            out[-1].append(item)
        else:
            out.append([item])
    return out


# -- the older entry points (kept: public names are promises) ----------------------------


def send_batch(ep: Skeen, payloads: tuple[Any, ...]) -> list[Action]:
    """Broadcast ``payloads`` (2..BATCH_LIMIT of them) as one batch per destination
    (``ep.broadcast_many``)."""
    return ep.broadcast_many(payloads)


def on_batch(ep: Skeen, b: sp.SkeenBatch) -> list[Action]:
    """A batch of messages: each held and proposed for as it would be alone."""
    return ep.receive(b)


def on_proposals(ep: Skeen, p: sp.SkeenProposalBatch) -> list[Action]:
    """Proposals for consecutive messages: each taken as a single proposal."""
    return ep.receive(p)


def on_finals(ep: Skeen, f: sp.SkeenFinalBatch) -> list[Action]:
    """Final numbers for consecutive messages: each taken as a single final number."""
    return ep.receive(f)


def announce(ep: Skeen, seqs: range | list[int]) -> list[Action]:
    """At the origin: of messages ``seqs`` (its own, in order), those with a proposal from
    every destination become final: learned, announced, delivered here if they can be."""
    return ep._announce(seqs)  # the one step with no public call of its own


#: The batch packets' handlers, by class (``Skeen.receive`` dispatches them itself).
HANDLERS: dict[type, Callable[[Skeen, Any], list[Action]]] = {
    sp.SkeenBatch: on_batch,
    sp.SkeenProposalBatch: on_proposals,
    sp.SkeenFinalBatch: on_finals,
}

__all__ = [
    "HANDLERS",
    "announce",
    "checked_numbers",
    "on_batch",
    "on_finals",
    "on_proposals",
    "runs",
    "send_batch",
]
