"""Leaves that take a group below a majority of its view, under Hypothesis-chosen
schedules (mailroom.testing.membership): up to all members but one leave, so a group of
two shrinks to one, and three to one. A member that leaves takes part in the flush that
lets it go, so its promise counts towards the majority the next view needs; the view
properties (agreement, self-inclusion, same view, virtual synchrony, order, integrity,
liveness: the members that stay settle in one view and deliver every message of theirs)
hold in every run, and the known-buggy groups are caught on these schedules too."""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from mailroom.core.actions import View
from mailroom.protocols.membership import Group
from mailroom.protocols.membership.changes import Changes
from mailroom.testing.membership import (
    GroupNoQuorum,
    GroupOp,
    GroupScenario,
    GroupSkipsFlushLog,
    assert_group_properties,
    replay_group,
    variant_factory,
)

from .budgets import SEARCH, examples

BROADCAST = ("cbcast", "sequencer", "skeen", "lamport")


@st.composite
def leave_scenarios(draw: st.DrawFn, protocol: str, n: tuple[int, int] = (2, 4)) -> GroupScenario:
    """``n`` founders, a few broadcasts, and up to all members but one leaving."""
    size = draw(st.integers(*n))
    ops = tuple(
        GroupOp(draw(st.integers(0, size - 1)), None, f"m{i}")
        for i in range(draw(st.integers(1, 5)))
    )
    length = draw(st.integers(0, 60))
    choices = tuple(draw(st.lists(st.integers(0, 255), min_size=length, max_size=length)))
    faults = draw(st.integers(1, size - 1))
    return GroupScenario(size, protocol, ops, choices, faults, frozenset({"leave"}))


@pytest.mark.parametrize("protocol", BROADCAST)
@settings(max_examples=examples(40))
@given(data=st.data())
def test_leaves_below_a_majority_keep_every_view_property(
    protocol: str, data: st.DataObject
) -> None:
    assert_group_properties(data.draw(leave_scenarios(protocol)))


def test_a_group_of_two_shrinks_to_one_by_a_leave() -> None:
    ops = (GroupOp(0, None, "m0"), GroupOp(1, None, "m1"))

    def two(choices: list[int]) -> GroupScenario:
        return GroupScenario(2, "sequencer", ops, tuple(choices), 1, frozenset({"leave"}))

    found = find(
        st.lists(st.integers(0, 255), max_size=30).map(two),
        lambda s: "leave" in replay_group(s).notes,
        settings=SEARCH,
    )
    run = assert_group_properties(found)
    views = [ep.view for ep in run.sim.endpoints if ep.view is not None]
    assert len(views) == 1 and len(views[0].members) == 1  # one left, one stays, alone


def test_a_leaver_counts_only_while_nobody_suspects_it() -> None:
    view = View(3, (0, 1))
    changes = Changes(2, leaving={0})
    assert changes.voters(view, [1]) == [1, 0]  # a majority of two: the leaver counts
    assert not changes.lacks_majority(view)
    changes.suspects.add(0)  # it may be gone: a crash never shrinks two to one
    assert changes.voters(view, [1]) == [1] and changes.lacks_majority(view)
    nobody = Changes(2, leaving={0, 1})
    assert nobody.voters(view, []) == []  # the last members do not all leave at once


def test_a_crash_alone_still_cannot_shrink_two_to_one() -> None:
    group = Group(1, 2, "sequencer", members=[0, 1])
    group.suspect(0)
    assert group.status().waiting_for_majority and group.view == View(1, (0, 1))


@pytest.mark.parametrize("variant", [GroupSkipsFlushLog, GroupNoQuorum])
def test_known_buggy_groups_are_caught_on_leave_schedules(variant: type) -> None:
    factory = variant_factory(variant)

    def fails(s: GroupScenario) -> bool:
        return bool(replay_group(s, factory).violations())

    found = find(leave_scenarios("sequencer", n=(3, 4)), fails, settings=SEARCH)
    assert replay_group(found, factory).violations()
    assert not replay_group(found).violations()  # the correct group passes the same run
