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
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mailroom.core import validate
from mailroom.core.actions import Action, Transmit
from mailroom.core.errors import RemoteError
from mailroom.core.messages import MessageId
from mailroom.protocols.total import skeen_packets as sp

if TYPE_CHECKING:
    from mailroom.protocols.total.skeen import Skeen


def send_batch(ep: Skeen, payloads: tuple[Any, ...]) -> list[Action]:
    """Broadcast ``payloads`` (2..BATCH_LIMIT of them, checked) as one batch per destination."""
    size, dest = len(payloads), tuple(range(ep.n))
    first = ep._next_id().seq
    ep.sent_count += size - 1
    ts = ep._clock + 1
    ep._clock += size
    for q in dest:
        ep._sent_to[q] += size
    starts = tuple(ep._sent_to[q] - size + 1 for q in dest)  # first index at each q
    mid = MessageId(ep.pid, first)
    actions: list[Action] = [
        Transmit(q, sp.SkeenBatch(ep.pid, first, ts, dest, payloads, starts[q]), mid)
        for q in dest
        if q != ep.pid
    ]
    own = starts[ep.pid]
    for i, payload in enumerate(payloads):
        collecting = sp._Collecting(ts + i, dest, tuple([k + i for k in starts]), {ep.pid: ts + i})
        ep._collecting[first + i] = collecting
        ep._hold_fields(ep.pid, first + i, ts + i, dest, payload, own + i, ts + i)
    return actions + announce(ep, range(first, first + size))


def on_batch(ep: Skeen, b: sp.SkeenBatch) -> list[Action]:
    """A batch of messages: each held and proposed for as it would be alone."""
    payloads = validate.batch_payloads(b.payloads)
    size = len(payloads)
    first_seq = validate.first_of_range(b.first_seq, size, "seq")
    first_ts = validate.first_of_range(b.first_ts, size, "timestamp")
    first_index = validate.first_of_range(b.first_index, size, "index")
    first = sp.SkeenMessage(b.sender, first_seq, first_ts, b.dest, payloads[0], first_index)
    ep._check_message(first)  # (the others differ only in counters checked above)
    sender, dest = first.sender, first.dest
    if sender == ep.pid:
        raise RemoteError("a process's own messages never travel to itself")
    proposed: list[tuple[int, int]] = []
    held = ep._held
    for i, payload in enumerate(payloads):
        seq, index = first_seq + i, first_index + i
        if (sender, seq) in held or ep._seen(sender, index):
            continue
        ep._mark_seen(sender, index)
        ep._clock = max(ep._clock, first_ts + i) + 1
        ep._hold_fields(sender, seq, first_ts + i, dest, payload, index, ep._clock)
        proposed.append((seq, ep._clock))
    if not proposed:
        ep.duplicates += 1
        return []
    actions: list[Action] = []
    for run in _runs(proposed):
        if len(run) == 1:
            reply: object = sp.SkeenProposal(ep.pid, sender, run[0][0], run[0][1])
        else:
            reply = sp.SkeenProposalBatch(ep.pid, sender, run[0][0], tuple(v for _, v in run))
        actions.append(Transmit(sender, reply, None))
    return actions


def on_proposals(ep: Skeen, p: sp.SkeenProposalBatch) -> list[Action]:
    """Proposals for consecutive messages: each taken as a single proposal."""
    sender = validate.pid(p.sender, ep.n)
    origin = validate.pid(p.origin, ep.n, "origin")
    numbers = _numbers(p.numbers, "proposal")
    first = validate.first_of_range(p.first_seq, len(numbers), "seq")
    places = [
        (first + i, v, ep._check_proposal(sender, origin, first + i, v))
        for i, v in enumerate(numbers)
    ]
    fresh = [(seq, v, c) for seq, v, c in places if c is not None]
    if not fresh:
        ep.duplicates += 1
        return []
    for _, v, c in fresh:
        c.proposals[sender] = v
    return announce(ep, [seq for seq, _, _ in fresh])


def on_finals(ep: Skeen, f: sp.SkeenFinalBatch) -> list[Action]:
    """Final numbers for consecutive messages: each taken as a single final number."""
    origin = validate.pid(f.origin, ep.n, "origin")
    numbers = _numbers(f.numbers, "final number")
    first = validate.first_of_range(f.first_seq, len(numbers), "seq")
    index = validate.first_of_range(f.first_index, len(numbers), "index")
    helds = [ep._check_final(origin, first + i, v, index + i) for i, v in enumerate(numbers)]
    fresh = [(h, numbers[i]) for i, h in enumerate(helds) if h is not None]
    if not fresh:
        ep.duplicates += 1
        return []
    return _finalize(ep, fresh)


def announce(ep: Skeen, seqs: range | list[int]) -> list[Action]:
    """At the origin: of messages ``seqs`` (its own, in order), those with a proposal from
    every destination become final: learned, announced, delivered here if they can be."""
    done: list[tuple[int, int, sp._Collecting]] = []
    for seq in seqs:
        c = ep._collecting[seq]
        if len(c.proposals) == len(c.dest):
            del ep._collecting[seq]
            done.append((seq, max(c.proposals.values()), c))
    if not done:
        return []
    first_seq, _, first = done[0]
    # consecutive seqs to one destination set are consecutive indexes at each destination
    # (every multicast counts one at each of its destinations), so that suffices
    dest = first.dest
    together = len(done) > 1 and all(
        seq == first_seq + k and c.dest == dest for k, (seq, _, c) in enumerate(done)
    )
    actions: list[Action]
    if together:  # consecutive everywhere: one batch of final numbers per destination
        numbers = tuple(v for _, v, _ in done)
        actions = [
            Transmit(q, sp.SkeenFinalBatch(ep.pid, first_seq, k, numbers), None)
            for q, k in zip(first.dest, first.indexes, strict=True)
            if q != ep.pid
        ]
    else:
        actions = [
            Transmit(q, sp.SkeenFinal(ep.pid, seq, v, k), None)
            for seq, v, c in done
            for q, k in zip(c.dest, c.indexes, strict=True)
            if q != ep.pid
        ]
    own = [(ep._held.get((ep.pid, seq)), v) for seq, v, _ in done]
    ep.learn_finals([v for _, v, _ in done])
    return actions + _finalize(ep, [(h, v) for h, v in own if h is not None], learn=False)


def _finalize(ep: Skeen, fresh: list[tuple[sp._Held, int]], *, learn: bool = True) -> list[Action]:
    """Mark each held message final with its number (learned first), then deliver."""
    if learn:
        ep.learn_finals([v for _, v in fresh])
    for held, number in fresh:
        ep._mark_final(held, number)
    return ep._drain()


def _numbers(value: object, what: str) -> tuple[int, ...]:
    """A batch's numbers: 1..BATCH_LIMIT positive counters."""
    if type(value) is not tuple or not 1 <= len(value) <= validate.BATCH_LIMIT:
        raise RemoteError(f"a batch carries 1..{validate.BATCH_LIMIT} {what}s")
    if set(map(type, value)) == {int} and min(value) >= 1 and max(value) <= validate.MAX_COUNTER:
        return value  # the common case, checked without a call per number
    for v in value:
        validate.positive(v, what)
    return value


def _runs(items: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """``(seq, number)`` pairs split into runs of consecutive seqs."""
    runs: list[list[tuple[int, int]]] = []
    for item in items:
        if runs and runs[-1][-1][0] + 1 == item[0]:
            runs[-1].append(item)
        else:
            runs.append([item])
    return runs


#: The batch packets' handlers, by class (``Skeen.receive`` looks a packet up here).
HANDLERS: dict[type, Callable[[Skeen, Any], list[Action]]] = {
    sp.SkeenBatch: on_batch,
    sp.SkeenProposalBatch: on_proposals,
    sp.SkeenFinalBatch: on_finals,
}

__all__ = ["HANDLERS", "announce", "on_batch", "on_finals", "on_proposals", "send_batch"]
