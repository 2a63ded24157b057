"""The parts a ``Group`` owns, driven without a Group: safe delivery (``SafeDelivery``),
a member's flush (``MemberFlush``) and the coordinator's flush (``CoordinatorFlush``).

Each part holds its own state and returns decisions or packets; the group hands it
what it needs (the installed view, whether the flush froze it, its hooks' answers).
These tests give it those inputs directly and check what it decides."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom.core.actions import Deliver, Transmit, View
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId
from mailroom.core.persist import dump_fields, load_fields
from mailroom.core.registry import entry
from mailroom.protocols.membership.changes import Changes
from mailroom.protocols.membership.flush import (
    ACCEPT,
    ACCEPTED,
    IDLE,
    PREPARE,
    PROMISED,
    RUNNING,
    CoordinatorFlush,
    Flush,
    MemberFlush,
)
from mailroom.protocols.membership.packets import Accept, Accepted, Prepare, Promise, Query
from mailroom.protocols.membership.safe import SafeDelivery
from mailroom.protocols.membership.values import NextView
from mailroom.protocols.membership.view import InstalledView

VALUE = NextView((0, 1), (0, 0), (0, 0), (), [])


def installed(pid: int = 0, members: tuple[int, ...] = (0, 1, 2)) -> InstalledView:
    """View 1 of ``members`` at ``pid`` under safe delivery, over CBCAST."""
    view = View(1, members)
    inner = entry("cbcast").factory(view.rank(pid), len(members))
    zeros = (0,) * len(members)
    return InstalledView(view, pid, 5, zeros, zeros, inner, safe=True)


def deliver(origin: int, seq: int) -> Deliver:
    mid = MessageId(origin, seq)
    return Deliver(Message(mid, origin, [origin, seq]))


def holding(view: InstalledView, *items: tuple[int, int]) -> InstalledView:
    """``view`` holding a delivery of each (rank, inner seq) in ``items``, in order."""
    assert view.held is not None
    for rank, seq in items:
        view.held.add(rank, seq, deliver(view.view.members[rank], seq))
    return view


# -- safe delivery ---------------------------------------------------------------------------
def test_safe_delivery_releases_what_every_hold_covers_from_the_head() -> None:
    view = holding(installed(), (0, 1), (1, 1), (0, 2))
    part = SafeDelivery("all")
    assert part.may_release(view, frozen=False)
    holds = [(2, 1, 0), (1, 1, 0), (2, 0, 0)]  # the third member lacks (1, 1)
    out = part.release(view, holds, part.needed(view))
    assert out == [deliver(0, 1)]  # (1, 1) is not covered, so (0, 2) waits behind it
    assert view.held is not None and view.held.messages == 2


def test_safe_delivery_by_majority_needs_one_hold_fewer_of_three() -> None:
    view = holding(installed(), (0, 1), (1, 1), (0, 2))
    part = SafeDelivery("majority")
    assert part.needed(view) == 2 and SafeDelivery("all").needed(view) is None
    assert part.lazy_needed(3) == 2 and SafeDelivery("all").lazy_needed(3) is None
    holds = [(2, 1, 0), (1, 1, 0), (2, 0, 0)]
    out = part.release(view, holds, part.needed(view))
    assert out == [deliver(0, 1), deliver(1, 1), deliver(0, 2)]
    assert view.held is not None and not view.held and view.held.messages == 0


def test_safe_delivery_releases_nothing_while_frozen_or_within_a_batch() -> None:
    view = holding(installed(), (0, 1))
    part = SafeDelivery()
    assert not part.may_release(view, frozen=True)
    assert not part.may_release(None, frozen=False)
    assert not part.may_release(installed(), frozen=False)  # nothing held
    part.start_batch()
    assert part.batching and not part.may_release(view, frozen=False)
    part.end_batch()
    assert not part.batching
    assert part.may_release(view, frozen=False)


def test_safe_delivery_asks_the_members_behind_only_when_the_head_is_stuck() -> None:
    view = holding(installed(), (1, 1))
    part = SafeDelivery()
    assert part.ask_holds(view, False) == []  # first retry that sees this head
    asked = part.ask_holds(view, False)  # the same head at the next retry
    assert asked == [Transmit(m, Query(1, 0), None) for m in (0, 1, 2)]
    assert part.ask_holds(view, True) == []  # frozen: the Commit hands it over
    part.new_view()
    assert part.ask_holds(view, False) == []  # a new view: it has not waited a retry yet


@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(1, 4)), max_size=8),
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 4)), min_size=3),
    st.sampled_from(["all", "majority"]),
)
def test_safe_delivery_releases_the_longest_covered_prefix(
    items: list[tuple[int, int]], all_holds: list[tuple[int, int, int]], quorum: str
) -> None:
    """Property: what is released is the longest prefix of the held deliveries whose
    every message enough holds cover, in order; the rest stays held."""
    holds = all_holds[:3]
    view = holding(installed(), *items)
    part = SafeDelivery(quorum)
    needed = part.needed(view)
    wanted = len(holds) if needed is None else needed
    prefix = 0
    for rank, seq in items:
        if sum(hold[rank] >= seq for hold in holds) < wanted:
            break
        prefix += 1
    out = part.release(view, list(holds), needed)
    assert out == [deliver(view.view.members[r], s) for r, s in items[:prefix]]
    assert view.held is not None and view.held.messages == len(items) - prefix


# -- the wanted changes -------------------------------------------------------------------------
def test_the_coordinator_is_the_lowest_member_neither_suspected_nor_replaced() -> None:
    view = View(3, (0, 2, 4))
    changes = Changes(5)
    assert changes.coordinator(view, (0, 0, 0)) == 0
    changes.suspects.add(0)
    assert changes.coordinator(view, (0, 0, 0)) == 2
    changes.joiners[2] = (1, 7)  # a later incarnation of P2 asks to join: P2 restarted
    assert changes.coordinator(view, (0, 0, 0)) == 4
    assert changes.coordinator(view, (0, 1, 0)) == 2  # that incarnation is the member's own
    changes.suspects.add(4)
    assert changes.coordinator(view, (0, 0, 0)) is None


# -- a member's flush --------------------------------------------------------------------------
def test_a_member_promises_accepts_and_names_a_higher_ballot() -> None:
    m = MemberFlush(3)
    assert not m.frozen and m.repeat(1, 0) is None
    assert m.promise((2, 1)) is None and m.freeze is PROMISED and m.frozen
    assert m.promise((1, 2)) == (2, 1)  # lower: a Nack names (2, 1)
    assert m.accept((1, 2), VALUE) == (2, 1) and m.accepted is None
    assert m.accept((2, 1), VALUE) is None and m.freeze is ACCEPTED
    assert m.accepted_data() == [2, 1, *VALUE.data()]
    assert m.promise((3, 2)) is None and m.freeze is ACCEPTED  # the value stays accepted
    assert m.repeat(1, 0) == [(2, Query(1, 0))]  # it asks the coordinator it promised
    assert m.repeat(1, 2) is None  # (its own ballot: nobody to ask)


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.booleans()), max_size=20))
def test_a_member_never_goes_back_on_a_promise(events: list[tuple[int, int, bool]]) -> None:
    """Property: a member's promised ballot never decreases; it answers None exactly for
    a ballot at least the one promised, and once frozen it stays frozen."""
    m = MemberFlush(4)
    for attempt, coord, is_accept in events:
        before, frozen = m.promised, m.frozen
        ballot = (attempt, coord)
        answer = m.accept(ballot, VALUE) if is_accept else m.promise(ballot)
        assert (answer is None) == (ballot >= before)
        assert answer is None or answer == before
        assert m.promised >= before and (m.frozen or not frozen)
        assert m.promised == max(before, ballot) if answer is None else m.promised == before


# -- the coordinator's flush -----------------------------------------------------------------------
def test_a_coordinator_opens_above_what_it_promised_and_was_outbid_by() -> None:
    c = CoordinatorFlush(1, 3)
    prepare = c.open(4, (0, 1), promised=(5, 2))
    assert prepare == Prepare(4, 1, 6, 1, (0, 1)) and c.round is PREPARE
    assert c.count_nack((7, 2)) and c.outbid == (7, 2)
    assert not c.count_nack((7, 2))  # known already
    assert not c.can_finish({0, 1}, {2})  # the coordinator that outbid it is suspected
    assert c.can_finish({0, 1}, set()) and not c.can_finish({0, 1}, {0})
    assert c.open(4, (0, 1)).attempt == 8


def test_a_coordinator_repeats_its_ballot_to_whoever_has_not_answered() -> None:
    c = CoordinatorFlush(0, 3)
    assert c.repeat(1, {0, 1, 2}) is None  # IDLE
    prepare = c.open(1, (0, 1, 2))
    c.count_promise(Promise(1, 0, 1, 0, 0, True, [], [], None), {0, 1, 2})
    assert c.repeat(1, {0, 1, 2}) == [(1, prepare), (2, prepare)]
    c.count_promise(Promise(1, 1, 1, 0, 0, True, [], [], None), {0, 1, 2})
    c.count_promise(Promise(1, 2, 9, 9, 0, True, [], [], None), {0, 1, 2})  # another ballot
    assert c.round is PREPARE and set(c.promises) == {0, 1}
    c.count_promise(Promise(1, 2, 1, 0, 0, True, [], [], None), {0, 1, 2})
    accept = c.propose(1, VALUE)
    assert isinstance(accept, Accept) and c.round is ACCEPT
    assert c.count_accepted(Accepted(1, 0, 1, 0), {0, 2}) is False
    assert c.repeat(1, {0, 2}) == [(2, accept)]
    assert c.count_accepted(Accepted(1, 2, 1, 0), {0, 2}) and c.round is IDLE


def test_the_flush_repeats_the_coordinators_ballot_before_the_members_query() -> None:
    f = Flush(1, 3)
    f.member.promise((1, 0))
    assert f.repeat(1, {0, 1}) == [(0, Query(1, 1))]
    prepare = f.coordinator.open(1, (1, 2), f.member.promised)
    assert f.repeat(1, {1, 2}) == [(1, prepare), (2, prepare)]


# -- the flush's snapshot: the two parts' tables, in the order snapshots always had -------------
def flush_data(f: Flush) -> dict[str, Any]:
    data: dict[str, Any] = {}
    dump_fields(f, Flush.persistent, data)
    return data


def test_the_flush_snapshot_keeps_its_keys_and_round_trips() -> None:
    f = Flush(0, 3)
    f.coordinator.open(1, (0, 1), f.member.promised)
    f.member.promise(f.coordinator.ballot)
    data = flush_data(f)
    assert list(data) == [
        "flushing",
        "promised",
        "accepted",
        "attempt",
        "outbid",
        "proposal",
        "phase",
        "promises",
        "accepts",
        "value",
    ]
    back = Flush(0, 3)
    load_fields(back, Flush.persistent, data)
    assert back == f and back.coordinator.round is PREPARE and back.member.freeze is PROMISED


def test_a_snapshot_that_coordinates_without_a_promise_is_refused() -> None:
    data = flush_data(Flush(0, 3))
    data["phase"] = "prepare"
    back = Flush(0, 3)
    with pytest.raises(LocalError, match="coordinates a flush it did not promise"):
        load_fields(back, Flush.persistent, data)
    assert back.member.freeze is RUNNING and Flush(0, 3).coordinator.round is IDLE
