"""Group membership under Hypothesis-chosen schedules, crash-stops, false suspicions and
partitions, for every broadcast protocol and a unicast one (mailroom.testing.membership).

Each run is checked for view agreement, self-inclusion, same-view delivery, virtual
synchrony, the protocol's order, integrity, liveness (the survivors settle in one view
without the crashed processes and deliver every survivor's message) and that the
survivors' application states (transferred to rejoining processes) agree. Known-buggy
Group variants must be caught, and the strategy must reach the hard cases.
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from mailroom.core.messages import MessageId
from mailroom.testing.membership import (
    GroupNoQuorum,
    GroupOp,
    GroupScenario,
    GroupSkipsFlushLog,
    assert_group_properties,
    check_group_liveness,
    check_same_view,
    check_self_inclusion,
    check_view_agreement,
    check_virtual_synchrony,
    group_scenarios,
    replay_group,
    variant_factory,
)
from mailroom.trace.events import Event

from .budgets import REACH_ONLY, SEARCH, examples

BROADCAST = ("cbcast", "tagged", "sequencer", "skeen", "lamport")
PROTOCOLS = (*BROADCAST, "rst", "ks")


#: The hard cases (a crash in the middle of a flush) are found about once in a thousand
#: or two; Hypothesis also biases its choices with the literals of every loaded module,
#: so a budget near that rate finds them or not depending on unrelated code. The search
#: stops at the first one found, and keeps it as found (``REACH_ONLY``: not shrunk).
REACH = settings(REACH_ONLY, max_examples=10_000)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=examples(100))
@given(data=st.data())
def test_crashes_and_false_suspicions(protocol: str, data: st.DataObject) -> None:
    scenario = data.draw(group_scenarios(protocol, kinds=("crash", "suspect"), max_choices=120))
    assert_group_properties(scenario)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=examples(40))
@given(data=st.data())
def test_a_process_joins_the_running_group_and_gets_its_state(
    protocol: str, data: st.DataObject
) -> None:
    scenario = data.draw(
        group_scenarios(protocol, n=(4, 6), joiner=True, kinds=("crash", "suspect", "leave"))
    )
    assert_group_properties(scenario)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_a_joiners_state_may_arrive_during_a_further_view_change(
    protocol: str, data: st.DataObject
) -> None:
    """One or two joiners issue messages while they wait for the application state; the
    network holds each state transfer until its receiver is frozen in a further flush
    (a leave, a crash, a false suspicion or the other join), and Hypothesis chooses when
    within that flush it arrives (or the flush ends first)."""
    scenario = data.draw(
        group_scenarios(
            protocol,
            n=(4, 6),
            joiners=(1, 2),
            hold_state=True,
            kinds=("crash", "suspect", "leave"),
            max_ops=10,
            max_choices=120,
        )
    )
    assert_group_properties(scenario)


@pytest.mark.parametrize("protocol", ("cbcast", "sequencer", "skeen", "rst"))
@settings(max_examples=examples(40))
@given(data=st.data())
def test_partitions_that_heal(protocol: str, data: st.DataObject) -> None:
    scenario = data.draw(group_scenarios(protocol, kinds=("partition", "crash")))
    assert_group_properties(scenario)


@pytest.mark.parametrize(
    "note",
    [
        "coordinator crash mid-flush",
        "crash mid-flush",
        "false suspicion",
        "rejoin",
    ],
)
def test_the_strategy_reaches(note: str) -> None:
    """The hard cases are in the search space, and a correct group survives them."""
    found = find(
        group_scenarios("cbcast", n=5, kinds=("crash", "suspect")),
        lambda s: note in replay_group(s).notes,
        settings=REACH,
    )
    run = assert_group_properties(found)
    assert note in run.notes


@pytest.mark.slow  # a search: the full tier runs it
def test_the_strategy_reaches_a_state_that_arrives_during_a_further_flush() -> None:
    """A joiner that issued a message without the state gets the state while it is
    frozen in the next flush, and a correct group survives it."""
    wanted = {"sent without the state", "late state"}
    found = find(
        group_scenarios("cbcast", n=(4, 6), joiners=(1, 2), hold_state=True, kinds=("leave",)),
        lambda s: wanted <= replay_group(s).notes,
        settings=REACH_ONLY,
    )
    assert wanted <= assert_group_properties(found).notes


def test_a_partition_heals_and_the_cut_off_process_rejoins() -> None:
    found = find(
        group_scenarios("cbcast", kinds=("partition",)),
        lambda s: {"partition", "rejoin"} <= replay_group(s).notes,
        settings=REACH_ONLY,
    )
    assert_group_properties(found)


@pytest.mark.parametrize("variant", [GroupSkipsFlushLog, GroupNoQuorum])
@pytest.mark.parametrize("protocol", ("cbcast", "sequencer"))
def test_known_buggy_groups_are_caught(variant: type, protocol: str) -> None:
    factory = variant_factory(variant)

    def fails(s: GroupScenario) -> bool:
        return bool(replay_group(s, factory).violations())

    found = find(group_scenarios(protocol, kinds=("crash",)), fails, settings=SEARCH)
    props = {v.property for v in replay_group(found, factory).violations()}
    assert props & {"virtual_synchrony", "liveness", "same_view"}
    assert not replay_group(found).violations()  # the correct group passes the same run


# -- runs the harness found: replayed exactly ---------------------------------------------------


def test_a_cut_off_member_learns_after_healing_that_it_was_excluded() -> None:
    """P1 is cut off; P0 and P2 install view 2 without it (the Commit to P1 is lost).
    After healing, P1 (still in view 1, suspecting both) sends Prepares of view 1 to
    P2, which drops them as stale: nobody ever tells P1 it was excluded, so it never
    rejoins (liveness: the live processes never share a view again)."""
    scenario = GroupScenario(
        n=3,
        protocol="cbcast",
        ops=(GroupOp(0, None, "m0"),),
        choices=(61, 0, 0, 0, 0, 0, 0, 0),
        faults=1,
        kinds=frozenset({"crash", "partition"}),
    )
    assert "partition" in replay_group(scenario).notes
    assert_group_properties(scenario)


def test_a_crashed_coordinators_higher_ballot_does_not_block_the_next_flush() -> None:
    """P1 falsely suspects P0 and opens ballot (1, P1); P2..P4 promise it; P1 crashes.
    P0 then coordinates with ballot (1, P0), lower than the promised (1, P1): P2..P4
    ignore it, P0 repeats the same ballot forever, and P2..P4 only Query the dead P1.
    The survivors never install a view (liveness, virtual synchrony of P0#1)."""
    scenario = GroupScenario(
        n=5,
        protocol="cbcast",
        ops=(GroupOp(0, None, "m0"),),
        choices=(218, 9),
        faults=2,
        kinds=frozenset({"crash", "suspect"}),
    )
    assert {"crash", "false suspicion"} <= replay_group(scenario).notes
    assert_group_properties(scenario)


def test_a_healed_minority_that_only_suspects_learns_it_was_excluded() -> None:
    """P2 is cut off while P0 and P1 install view 2 (the Commit to P2 is lost). After
    healing, P2 suspects both and, alone, cannot install a view: its Suspect reaches P1,
    who answers with the Commit that excluded it, and P2 rejoins (found by the thorough
    profile)."""
    scenario = GroupScenario(
        n=3,
        protocol="cbcast",
        ops=(GroupOp(pid=0, to=None, payload="m0"),),
        choices=(6, 1, 0, 0, 0, 0, 0),
        faults=1,
        kinds=frozenset({"crash", "partition"}),
        duplicate=True,
        joiner=False,
    )
    assert "partition" in " ".join(replay_group(scenario).notes)
    assert_group_properties(scenario)


def test_a_coordinator_outbid_between_its_promises_and_its_accept_waits() -> None:
    """The coordinator's own Accept meets a higher ballot it promised meanwhile: it
    answers itself with a Nack and waits, rather than taking that for an Accepted
    (found by the thorough profile)."""
    scenario = GroupScenario(
        n=6,
        protocol="ks",
        ops=(GroupOp(pid=0, to=1, payload="m0"),),
        choices=(1, 1, 1, 133, 37),
        faults=2,
        kinds=frozenset({"crash", "leave", "suspect"}),
        duplicate=True,
        joiner=True,
    )
    assert_group_properties(scenario)


def test_a_joiner_waiting_for_its_state_sends_its_message_in_the_next_view() -> None:
    """P2 and P3 join {0, 1} one after the other. P2, admitted to view 2, issues m2 while
    it waits for its state; P3's join starts the flush of view 2 and P2 promises in it
    without the state. m2 waits at P2 for the first view P2 runs in with the state
    (view 3): it is sent there, after P2 installs it, and everyone delivers it there.
    Before the fix P2 sent it alone in view 2 (or the flush log delivered it in a view
    P2 never installed, so no trace could show where it was sent)."""
    scenario = GroupScenario(
        n=4,
        protocol="cbcast",
        ops=(GroupOp(0, None, "m0"), GroupOp(0, None, "m1"), GroupOp(2, None, "m2")),
        choices=(0, 0, 0, 0, 0, 0, 0, 1, 1),
        faults=0,
        kinds=frozenset({"crash", "leave", "suspect"}),
        joiners=2,
        hold_state=True,
    )
    run = assert_group_properties(scenario)
    sent = MessageId(2, 1)
    m2 = [(e.kind, e.process, e.message, e.view) for e in run.trace if e.payload == "m2"]
    assert [e for e in m2 if e[0] == "send"] == [("send", 2, sent, 3)]
    assert sorted(e[1:] for e in m2 if e[0] == "deliver") == [(p, sent, 3) for p in range(4)]
    p2 = [(e.kind, e.view) for e in run.trace if e.process == 2]
    assert p2.index(("view", 3)) < p2.index(("send", 3))  # installed, then sent
    assert [2, 1] in run.sim.app_state[2] and [2, 1] in run.sim.app_state[3]


# -- the checks themselves can fail --------------------------------------------------------------
def _view(p: int, seq: int, vid: int, members: tuple[int, ...]) -> Event:
    return Event("r", p, seq, "view", MessageId(0, vid), p, members, view=vid)


def _ev(p: int, seq: int, kind: str, m: MessageId, view: int | None) -> Event:
    return Event("r", p, seq, kind, m, m.origin, (0, 1, 2), view=view)


A, B = MessageId(0, 1), MessageId(1, 1)


def test_view_agreement_and_self_inclusion_catch_bad_views() -> None:
    trace = [_view(0, 1, 1, (0, 1)), _view(1, 1, 1, (0, 1, 2)), _view(2, 1, 1, (0, 1))]
    assert [v.reason for v in check_view_agreement(trace)] == [
        "P0 installed view 1 as [0, 1] and P1 as [0, 1, 2]",
        "P1 installed view 1 as [0, 1, 2] and P2 as [0, 1]",
    ]
    assert [v.processes for v in check_self_inclusion(trace)] == [(2,)]
    assert check_self_inclusion(trace)[0].reason == (
        "P2 installed view 1 [0, 1], which does not include it"
    )
    backwards = [_view(0, 1, 2, (0, 1)), _view(0, 2, 1, (0, 1))]
    assert check_view_agreement(backwards)[0].reason == "P0 installed view 1 after view 2"


def test_same_view_virtual_synchrony_and_liveness_catch_bad_deliveries() -> None:
    views = [_view(p, 1, 1, (0, 1)) for p in (0, 1)] + [_view(p, 2, 2, (0, 1)) for p in (0, 1)]
    sends = [_ev(0, 3, "send", A, 1), _ev(1, 3, "send", B, 2)]
    good = views + sends + [_ev(p, 4, "deliver", A, 1) for p in (0, 1)]
    good += [_ev(p, 5, "deliver", B, 2) for p in (0, 1)]
    final = {0: 2, 1: 2}
    assert not check_same_view(good) and not check_virtual_synchrony(good, final=final)
    assert not check_group_liveness(good, final=final)
    moved = (1, "deliver", A)
    late = [
        _ev(1, 4, "deliver", A, 2) if (e.process, e.kind, e.message) == moved else e for e in good
    ]
    assert [v.processes for v in check_same_view(late)] == [(1,)]
    assert len(check_virtual_synchrony(late, final=final)) == 2  # views 1 and 2 differ
    assert [v.processes for v in check_group_liveness(late, final=final)] == [(1,)]


@pytest.mark.parametrize("protocol", BROADCAST)
@settings(max_examples=examples(300))
@given(data=st.data())
def test_false_suspicions_of_a_majority_around_a_crash(protocol: str, data: st.DataObject) -> None:
    """Five members, one fault (a crash, say) and two more false suspicions: enough for
    a coordinator to suspect so many live members that no view it proposes keeps a
    majority, while the ballot it already runs waits for the crashed one. The group
    must still settle (the suspected answer its questions and are let off)."""
    scenario = data.draw(
        group_scenarios(
            protocol, n=5, kinds=("crash", "suspect"), max_choices=120, false_suspicions=2
        )
    )
    assert_group_properties(scenario)
