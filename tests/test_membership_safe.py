"""Safe (uniform) delivery, ``Group(..., safe=True)``: a message is delivered once every
member of the view holds it, so whatever any member delivered, every member that goes
on into the next view delivers too, whoever crashes or is excluded.

Hypothesis chooses schedules, crashes, false suspicions, partitions, leaves and joins
(mailroom.testing.membership) for every broadcast protocol, bare and over Reliable:
every membership property holds, and uniform agreement too. The known-buggy safe
groups are caught, the plain group breaks uniform agreement on a schedule that the
safe group survives, and the worked examples pin the mechanism (holding, announcing,
asking again after a lost report, the flush, snapshots, batches).
"""

from __future__ import annotations

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from mailroom.core.actions import Deliver, Transmit, View, ViewChange
from mailroom.core.endpoint import receive_batch, same_data
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId
from mailroom.core.registry import restore_endpoint
from mailroom.protocols.membership import (
    Group,
    GroupData,
    HeartbeatDetector,
    Prepare,
    Query,
    Stability,
)
from mailroom.sim import Simulation
from mailroom.testing.membership import (
    GroupNoQuorum,
    GroupOp,
    GroupSafeBelowMajority,
    GroupSafeForgetsSilent,
    GroupSafeOwnHold,
    GroupSafeWrongFirst,
    GroupScenario,
    GroupSkipsFlushLog,
    assert_group_properties,
    check_uniform_agreement,
    group_scenarios,
    replay_group,
    variant_factory,
    view_problems,
)
from mailroom.trace.events import Event

from .budgets import REACH_ONLY, SEARCH, examples

BROADCAST = ("cbcast", "tagged", "sequencer", "skeen", "lamport")
SAFE = variant_factory(Group, safe=True)
MAJORITY = variant_factory(Group, safe=True, safe_quorum="majority")
#: safe delivery counting every member, or a majority (bare, and over Reliable)
QUORUMS = {
    "all": (SAFE, variant_factory(Group, safe=True, reliable=True)),
    "majority": (
        MAJORITY,
        variant_factory(Group, safe=True, safe_quorum="majority", reliable=True),
    ),
}


# -- every membership property, and uniform agreement, under Hypothesis ----------------------
@pytest.mark.parametrize("quorum", QUORUMS)
@pytest.mark.parametrize("protocol", BROADCAST)
@settings(max_examples=examples(60))
@given(data=st.data())
def test_safe_delivery_under_crashes_suspicions_and_partitions(
    protocol: str, quorum: str, data: st.DataObject
) -> None:
    kinds = ("crash", "suspect", "partition")
    scenario = data.draw(group_scenarios(protocol, kinds=kinds, max_choices=120))
    assert_group_properties(scenario, QUORUMS[quorum][0])


@pytest.mark.parametrize("quorum", QUORUMS)
@pytest.mark.parametrize("protocol", ("cbcast", "sequencer", "lamport"))
@settings(max_examples=examples(100))
@given(data=st.data())
def test_safe_delivery_with_false_suspicions_of_a_majority_around_a_crash(
    protocol: str, quorum: str, data: st.DataObject
) -> None:
    """Five members, a crash and false suspicions enough to leave the coordinator no
    majority while its ballot waits for the crashed member (the nemesis's finding 7,
    met counting a majority): the group settles and loses nothing."""
    scenario = data.draw(
        group_scenarios(
            protocol, n=5, kinds=("crash", "suspect"), max_choices=120, false_suspicions=2
        )
    )
    assert_group_properties(scenario, QUORUMS[quorum][0])


#: the schedule Hypothesis found (replayed by ``replay_group``)
CHOICES = (
    *(1, 0, 168, 0, 0, 18, 208, 2, 10, 12, 21, 58, 2, 2, 2, 2, 6, 95, 0, 0),
    *(0, 0, 2, 63, 30, 130),
)


def test_a_forwarded_suspicion_that_leaves_no_majority_is_not_taken() -> None:
    """Found by the test above (thorough profile): P0 crashes, P2 falsely suspects P3
    and P4 P1. In the next view P4, which sees P2 as coordinator, forwards its
    suspicion of P1 to P2 at every retry; taken, it left P2 no majority, P2 asked P1,
    P1 answered, the suspicion was withdrawn, and the next forward brought it back,
    for good. A forwarded suspicion that would leave no majority is not taken."""
    scenario = GroupScenario(
        n=5,
        protocol="lamport",
        ops=(GroupOp(1, None, "m0"), GroupOp(2, None, "m1")),
        choices=CHOICES,
        faults=1,
        kinds=frozenset({"crash", "suspect"}),
        false_suspicions=2,
    )
    run = assert_group_properties(scenario, MAJORITY)
    assert "false suspicion" in run.notes and "crash" in run.notes


@pytest.mark.parametrize("quorum", QUORUMS)
@pytest.mark.parametrize("protocol", BROADCAST)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_safe_delivery_over_reliable(protocol: str, quorum: str, data: st.DataObject) -> None:
    kinds = ("crash", "suspect", "partition")
    scenario = data.draw(group_scenarios(protocol, kinds=kinds, max_choices=120))
    assert_group_properties(scenario, QUORUMS[quorum][1])


@pytest.mark.parametrize("quorum", QUORUMS)
@pytest.mark.parametrize("protocol", BROADCAST)
@settings(max_examples=examples(30))
@given(data=st.data())
def test_safe_delivery_with_joiners_leaves_and_late_states(
    protocol: str, quorum: str, data: st.DataObject
) -> None:
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
    assert_group_properties(scenario, QUORUMS[quorum][0])


@pytest.mark.parametrize("variant", [GroupSafeBelowMajority, GroupSafeWrongFirst])
@pytest.mark.parametrize("protocol", ("cbcast", "sequencer"))
def test_counting_one_holder_short_of_a_majority_breaks_uniform_agreement(
    protocol: str, variant: type
) -> None:
    """Known-buggy: one holder too few, or the last member counted as holding what this
    one delivered (as the sequencer rightly is)."""
    factory = variant_factory(variant, safe=True, safe_quorum="majority")

    def fails(s: GroupScenario) -> bool:
        return bool(replay_group(s, factory).violations())

    found = find(group_scenarios(protocol, n=3, kinds=("partition",)), fails, settings=SEARCH)
    props = {v.property for v in replay_group(found, factory).violations()}
    assert "uniform_agreement" in props
    assert not replay_group(found, MAJORITY).violations()  # a majority passes the same run


def test_the_plain_group_breaks_uniform_agreement_where_the_safe_one_keeps_it() -> None:
    """A member delivers a message that no survivor ever gets, then is cut off: the plain
    group's run breaks uniform agreement; the same schedule with safe delivery does not."""

    def lost(s: GroupScenario) -> bool:
        found = view_problems(replay_group(s).sim, s.protocol, uniform=True)
        # the safe group's run of the same choices takes the partition too (its packets
        # differ, so the same choice may pick another event)
        cut = "partition" in replay_group(s, SAFE).notes
        return cut and any(v.property == "uniform_agreement" for v in found)

    found = find(group_scenarios("cbcast", kinds=("partition",)), lost, settings=REACH_ONLY)
    assert not view_problems(replay_group(found).sim, "cbcast")  # its own promises hold
    run = assert_group_properties(found, SAFE)
    assert "partition" in run.notes


@pytest.mark.parametrize("variant", [GroupSafeOwnHold, GroupSafeForgetsSilent])
@pytest.mark.parametrize("protocol", ("cbcast", "sequencer"))
def test_known_buggy_safe_groups_break_uniform_agreement(variant: type, protocol: str) -> None:
    factory = variant_factory(variant, safe=True)

    def fails(s: GroupScenario) -> bool:
        return bool(replay_group(s, factory).violations())

    found = find(group_scenarios(protocol, kinds=("partition",)), fails, settings=SEARCH)
    props = {v.property for v in replay_group(found, factory).violations()}
    assert "uniform_agreement" in props
    assert not replay_group(found, SAFE).violations()  # the correct group passes the same run


@pytest.mark.parametrize("variant", [GroupSkipsFlushLog, GroupNoQuorum])
def test_a_safe_group_whose_flush_forgets_what_it_holds_is_caught(variant: type) -> None:
    """Under safe delivery the flush hands over what a member holds before the next view;
    a flush that skips it (or hears only its coordinator) loses those messages."""
    factory = variant_factory(variant, safe=True)

    def fails(s: GroupScenario) -> bool:
        return bool(replay_group(s, factory).violations())

    found = find(group_scenarios("cbcast", kinds=("crash",)), fails, settings=SEARCH)
    props = {v.property for v in replay_group(found, factory).violations()}
    assert props & {"virtual_synchrony", "liveness", "same_view"}
    assert not replay_group(found, SAFE).violations()


# -- the check itself can fail --------------------------------------------------------------
def _view(p: int, seq: int, vid: int, members: tuple[int, ...]) -> Event:
    return Event("r", p, seq, "view", MessageId(0, vid), p, members, view=vid)


def _deliver(p: int, seq: int, m: MessageId, view: int) -> Event:
    return Event("r", p, seq, "deliver", m, m.origin, (0, 1, 2), view=view)


def test_uniform_agreement_catches_a_message_only_a_crashed_member_delivered() -> None:
    m = MessageId(2, 1)
    trace = [_view(p, 1, 1, (0, 1, 2)) for p in range(3)]
    trace += [_view(p, 2, 2, (0, 1)) for p in (0, 1)]
    good = [*trace, *(_deliver(p, 3, m, 1) for p in (0, 1, 2))]
    assert not check_uniform_agreement(good)
    bad = [*trace, _deliver(2, 3, m, 1), _deliver(1, 3, m, 1)]  # P2 crashed after it
    found = check_uniform_agreement(bad)
    assert [(v.processes, v.messages) for v in found] == [((2, 0), (m,))]
    assert "P2 delivered P2#1 in view 1 and P0" in found[0].reason


# -- worked examples --------------------------------------------------------------------------
def settle(sim: Simulation) -> None:
    for _ in range(1_000):
        if not sim.in_flight:
            return
        sim.arrive(min(sim.in_flight))


def safe_group(n: int, protocol: str = "cbcast", **options: object) -> Simulation:
    eps = [Group(p, n, protocol, members=range(n), safe=True, **options) for p in range(n)]
    return Simulation(eps, adversarial=True)


def payloads(sim: Simulation) -> list[list[str]]:
    return [[m.payload for m in got] for got in sim.delivered]


@pytest.mark.parametrize("protocol", BROADCAST)
def test_the_crash_story_with_safe_delivery(protocol: str) -> None:
    """Carol's m3 reaches Bob only, and Carol crashes. With safe delivery nobody has
    delivered m3 yet (Alice does not hold it); the flush hands it to both survivors
    before view 2. Carol never delivered it: nothing she told anyone is lost."""
    sim = safe_group(3, protocol)
    sim.broadcast(0, "m1")
    settle(sim)
    assert payloads(sim) == [["m1"]] * 3
    m3 = sim.broadcast(2, "m3")
    for p in sim.packets(m3, to=0):
        sim.drop(p.id)
    for p in sim.packets(m3, to=1):
        sim.arrive(p.id)  # for the sequencer's and Skeen's order this is not yet enough
    sim.crash(2)
    settle(sim)
    assert payloads(sim)[:2] == [["m1"], ["m1"]]  # Alice lacks m3, so nobody delivers it
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    settle(sim)
    assert [ep.view for ep in sim.endpoints[:2]] == [View(2, (0, 1))] * 2
    if protocol in ("cbcast", "tagged"):  # Bob's causal protocol delivered m3: he held it
        assert payloads(sim) == [["m1", "m3"], ["m1", "m3"], ["m1"]]
        assert {e.view for e in sim.trace if e.kind == "deliver" and e.payload == "m3"} == {1}
    else:  # the order never came: nobody holds m3, nobody delivers it
        assert payloads(sim) == [["m1"]] * 3
    assert not view_problems(sim, protocol)


def test_a_message_waits_until_every_member_holds_it_and_the_status_says_so() -> None:
    sim = safe_group(3)
    a = sim.broadcast(0, "a")
    assert sim.delivered[0] == [] and sim.endpoints[0].status().waiting_safe == 1
    for p in sim.packets(a, to=1):
        sim.arrive(p.id)  # P1 holds a and announces it; P2 does not hold it yet
    reports = [p for p in sim.packets() if type(p.packet) is Stability]
    for p in reports:
        sim.arrive(p.id)
    assert payloads(sim) == [[], [], []]
    status = sim.endpoints[0].status()
    assert status.waiting_safe == 1 and status.data()["waiting_safe"] == 1
    assert "1 held until every member has them (safe delivery)" in status.summary()
    settle(sim)
    assert payloads(sim) == [["a"]] * 3
    assert [ep.status().waiting_safe for ep in sim.endpoints] == [0, 0, 0]
    assert "held" not in sim.endpoints[0].status().summary()


def test_a_lost_report_is_asked_for_again() -> None:
    """P1's report to P0 is lost: P0 waits; when its retry timer finds the same message
    first twice it asks P1 (Query), P1 answers with its report and P0 delivers."""
    sim = safe_group(3)
    sim.broadcast(0, "a")
    for _ in range(100):
        lost = [
            p for p in sim.packets() if type(p.packet) is Stability and (p.src, p.dst) == (1, 0)
        ]
        for p in lost:
            sim.drop(p.id)
        if not sim.in_flight:
            break
        sim.arrive(min(sim.in_flight))
    assert payloads(sim) == [[], ["a"], ["a"]]
    asked = []
    for _ in range(3):  # the timer starts, its first retry notes which message waits,
        fired = sim.fire(0)  # the next finds the same one: it asks whom it has not heard
        asked.append([a.to for a in fired if isinstance(a, Transmit) and type(a.packet) is Query])
    assert asked == [[], [], [1]]
    settle(sim)
    assert payloads(sim) == [["a"]] * 3
    assert sim.endpoints[0].next_deadline() is None  # nothing waits any more


def test_a_batch_of_packets_is_announced_once() -> None:
    """Packets received as one step (``receive_many``, what the runtime does with the
    packets of one read) are announced in one report to each member, not one per
    delivery; a detector around the group does the same."""
    for wrap in (False, True):
        groups = [Group(p, 3, "cbcast", members=range(3), safe=True) for p in range(3)]
        eps = [HeartbeatDetector(g) if wrap else g for g in groups]
        sent = [a for k in range(4) for a in eps[0].broadcast(f"m{k}") if a.to == 1]
        data = [a.packet for a in sent if type(a.packet) is GroupData]
        assert len(data) == 4
        actions, errors = receive_batch(eps[1], data)
        reports = [a for a in actions if isinstance(a, Transmit) and type(a.packet) is Stability]
        assert not errors and [a.to for a in reports] == [0, 2]
        assert reports[0].packet.low == (4, 0, 0)
        one_by_one = Group(1, 3, "cbcast", members=range(3), safe=True)
        each = [a for p in data for a in one_by_one.receive(p)]
        assert sum(isinstance(a, Transmit) for a in each) == 8  # two per delivery


@pytest.mark.parametrize("quorum", ["all", "majority"])
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_a_batch_hands_over_what_its_packets_one_by_one_would(
    quorum: str, data: st.DataObject
) -> None:
    """Receiving a batch, a member looks at what it holds once, at the end of the step:
    it hands over the same deliveries, in the same order, as receiving the packets one
    by one would, whatever reports and data Hypothesis puts in the batch."""
    n = data.draw(st.integers(3, 4))
    sim = Simulation(
        [
            Group(p, n, "sequencer", members=range(n), safe=True, safe_quorum=quorum)
            for p in range(n)
        ],
        adversarial=True,
    )
    for k, sender in enumerate(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5))):
        sim.broadcast(sender, f"m{k}")
    for _ in range(data.draw(st.integers(0, 30))):
        if not sim.in_flight:
            break
        ids = sorted(sim.in_flight)
        sim.arrive(ids[data.draw(st.integers(0, len(ids) - 1))])
    me = data.draw(st.integers(0, n - 1))
    batch = [p.packet for p in sim.packets(to=me)]
    ep = sim.endpoints[me]
    at_once, each = Group.restore(ep.snapshot()), Group.restore(ep.snapshot())
    actions, errors = receive_batch(at_once, batch)
    singly = [a for p in batch for a in each.receive(p)]

    def handed(actions: list[object]) -> list[str]:
        return [a.message.payload for a in actions if isinstance(a, Deliver)]

    assert not errors and handed(actions) == handed(singly)
    assert at_once.status().waiting_safe == each.status().waiting_safe


def test_what_is_held_is_in_the_snapshot_and_restores_exactly() -> None:
    """Tagged causal broadcast: P0 holds its message (P1's report is lost) and the Stable
    report that follows it; the snapshot restores to the same endpoint, which goes on
    as the original does."""
    sim = Simulation(
        [Group(p, 3, "tagged", members=range(3), safe=True) for p in range(3)], adversarial=True
    )
    sim.broadcast(0, "a")
    for _ in range(100):
        ready = [p for p in sim.packets() if (type(p.packet), p.src, p.dst) != (Stability, 1, 0)]
        if not ready:
            break
        sim.arrive(ready[0].id)
    snap = sim.endpoints[0].snapshot()
    assert snap["safe"] is True
    assert snap["held"] == [["t", 0, 1, "a", [1, 0, 0]], ["s", [[0, 1]]]]
    again = restore_endpoint(snap)
    assert same_data(again.snapshot(), snap) and again.status().waiting_safe == 1
    report = sim.packets()[0].packet
    out = again.receive(report)
    assert [type(a).__name__ for a in out] == ["Deliver", "Stable"]
    assert out == sim.endpoints[0].receive(report)


def test_snapshots_without_safe_delivery_are_as_before_and_strict() -> None:
    plain = Group(0, 3, "cbcast", members=range(3))
    plain.broadcast("x")
    snap = plain.snapshot()
    assert "safe" not in snap and "held" not in snap  # as earlier releases wrote them
    with pytest.raises(LocalError, match="not what snapshot"):
        restore_endpoint({**snap, "safe": False})  # a default value is left out
    safe = Group(0, 3, "cbcast", members=range(3), safe=True)
    data = safe.snapshot()
    assert data["safe"] is True and data["held"] == []
    with pytest.raises(LocalError, match="safe does not match field held"):
        restore_endpoint({k: v for k, v in data.items() if k != "held"})
    with pytest.raises(LocalError, match="held"):
        restore_endpoint({**data, "held": [["m", 0, 0, "x"]]})  # no message of the view
    with pytest.raises(LocalError, match="held"):
        restore_endpoint({**data, "held": [["q", 1]]})
    with pytest.raises(LocalError, match="safe"):
        restore_endpoint({**data, "safe": 1})
    unicast = Group(0, 3, "rst", members=range(3)).snapshot()
    with pytest.raises(LocalError, match="safe is true with rst, not a broadcast protocol"):
        restore_endpoint({**unicast, "safe": True, "held": []})


def test_safe_delivery_needs_a_broadcast_protocol() -> None:
    with pytest.raises(LocalError, match="broadcast protocol"):
        Group(0, 3, "rst", members=range(3), safe=True)
    with pytest.raises(LocalError, match="True or False"):
        Group(0, 3, "cbcast", members=range(3), safe=1)  # type: ignore[arg-type]
    assert Group(0, 3, "skeen", members=range(3), safe=True).safe is True
    assert Group(0, 3, "skeen", members=range(3)).safe is False


# -- what an excluded member and a view change say --------------------------------------------
def test_an_excluded_member_tells_unsent_from_in_doubt() -> None:
    """P3 sends one message that the sequencer never gets (in doubt: it went out), then
    freezes in a flush and issues another (never sent); that flush is replaced by one
    that excludes P3 too. Its ``Excluded`` lists the first in ``dropped`` and
    ``in_doubt``; the second, queued, is not dropped: P3 rejoins and sends it in the
    first view its next incarnation runs in with the state (only a member that left
    drops its queue, as ``unsent``)."""
    sim = Simulation(
        [Group(p, 5, "sequencer", members=range(5)) for p in range(5)], adversarial=True
    )
    sent = sim.broadcast(3, "sent")
    for p in sim.packets(sent, to=0):
        sim.drop(p.id)  # the sequencer P0 never orders it
    sim.suspect(0, 4)  # P0 flushes view 1 without P4: P1..P3 promise and freeze
    for p in sim.packets():
        if type(p.packet) is Prepare:
            sim.arrive(p.id)
    queued = sim.broadcast(3, "queued")  # frozen: queued for the next view
    sim.suspect(0, 3)  # a new ballot without P3 either
    settle(sim)
    found = [out for pid, out in sim.excluded if pid == 3]
    assert len(found) == 1 and found[0].view == View(2, (0, 1, 2))
    assert found[0].dropped == (sent,)
    assert found[0].unsent == () and found[0].in_doubt == (sent,)
    delivered = {e.message for e in sim.trace if e.kind == "deliver"}
    assert queued in delivered and sent not in delivered


def test_view_changes_carry_the_incarnations_of_a_restarted_member() -> None:
    """P2 crashes and restarts as its next incarnation before anyone suspects it: its old
    incarnation leaves in view 2 and the new one joins in view 3; each ViewChange
    carries the members' incarnations."""
    sim = Simulation([Group(p, 3, "cbcast", members=range(3)) for p in range(3)], adversarial=True)
    changes: list[tuple[int, ViewChange]] = []
    sim.on_view = lambda s, pid, change: changes.append((pid, change))
    sim.crash(2)
    sim.join(2, Group(2, 3, "cbcast", contacts=[0, 1], incarnation=1))
    settle(sim)
    left = {pid: c for pid, c in changes if c.view.id == 2}
    back = {pid: c for pid, c in changes if c.view.id == 3}
    assert sorted(left) == [0, 1] and sorted(back) == [0, 1, 2]
    for pid in (0, 1):
        assert (left[pid].joined, left[pid].left, left[pid].incarnations) == ((), (2,), (0, 0))
        assert (back[pid].joined, back[pid].left) == ((2,), ())
    assert all(c.incarnations == (0, 0, 1) for c in back.values())
    assert [e for e in sim.trace if e.kind == "deliver"] == []
    assert all(not isinstance(a, Deliver) for _, a in changes)


# -- counting a majority: worked examples ------------------------------------------------------
def settle_except(sim: Simulation, slow: int) -> None:
    """Let every packet arrive but those to ``slow`` (a member behind a slow link)."""
    for _ in range(1_000):
        moving = [p.id for p in sim.packets() if p.dst != slow]
        if not moving:
            return
        sim.arrive(min(moving))


@pytest.mark.parametrize("protocol", ("cbcast", "tagged", "sequencer"))
def test_counting_a_majority_a_slow_member_delays_nobody(protocol: str) -> None:
    """Bob's m reaches Alice, but nothing reaches Carol yet (a slow link). Counting every
    member, nobody delivers m while Carol lacks it; counting a majority, Alice and Bob
    deliver it (two of three hold it), and Carol once her packets arrive. (Skeen and
    Lamport's own ordering waits for every member: they gain nothing here.)"""
    for quorum, early in (("all", [[], [], []]), ("majority", [["m"], ["m"], []])):
        sim = safe_group(3, protocol, safe_quorum=quorum)
        sim.broadcast(1, "m")
        settle_except(sim, 2)
        assert payloads(sim) == early, quorum
        assert sim.endpoints[0].status().waiting_safe == (quorum == "all")
        settle(sim)
        assert payloads(sim) == [["m"]] * 3
        assert not view_problems(sim, protocol)


def test_counting_a_majority_the_sender_delivers_with_the_sequencers_order() -> None:
    """At n = 3 over the Sequencer, Bob's m goes to the sequencer Alice, whose order says
    she holds it and comes with her report: Bob holds it as the order arrives, two of
    three, and delivers first, a message delay before Carol's report would have let
    him; Alice delivers at Bob's report, Carol once she has m and the order."""
    sim = safe_group(3, "sequencer", safe_quorum="majority")
    m = sim.broadcast(1, "m")
    for p in sim.packets(m, to=0):
        sim.arrive(p.id)  # the sequencer orders m and reports that it holds it
    for p in sim.packets():
        if p.src == 0 and p.dst == 1:
            sim.arrive(p.id)  # the order and the report, as one frame carries them
    assert payloads(sim) == [[], ["m"], []]
    status = sim.endpoints[0].status()
    assert status.safe_quorum == "majority" and status.waiting_safe == 1
    assert "1 held until a majority has them" in status.summary()
    settle(sim)
    assert payloads(sim) == [["m"]] * 3


def test_the_quorum_is_in_the_snapshot_when_not_the_default_and_strict() -> None:
    g = Group(0, 3, "cbcast", members=range(3), safe=True, safe_quorum="majority")
    g.broadcast("x")
    data = g.snapshot()
    assert data["safe_quorum"] == "majority" and [r[:4] for r in data["held"]] == [["m", 0, 1, "x"]]
    back = restore_endpoint(data)
    assert back.safe_quorum == "majority" and same_data(back.snapshot(), data)
    every = Group(0, 3, "cbcast", members=range(3), safe=True).snapshot()
    assert "safe_quorum" not in every  # as earlier releases wrote them: every member
    assert restore_endpoint(every).safe_quorum == "all"
    with pytest.raises(LocalError, match="not what snapshot"):
        restore_endpoint({**every, "safe_quorum": "all"})  # a default value is left out
    with pytest.raises(LocalError, match="safe_quorum must be 'all' or 'majority'"):
        restore_endpoint({**data, "safe_quorum": "most"})
    plain = Group(0, 3, "cbcast", members=range(3)).snapshot()
    with pytest.raises(LocalError, match="pass safe=True too"):
        restore_endpoint({**plain, "safe_quorum": "majority"})


def test_a_quorum_setting_is_checked_at_construction() -> None:
    with pytest.raises(LocalError, match="safe_quorum must be 'all' or 'majority', got 'half'"):
        Group(0, 3, "cbcast", members=range(3), safe=True, safe_quorum="half")
    with pytest.raises(LocalError, match="pass safe=True too"):
        Group(0, 3, "cbcast", members=range(3), safe_quorum="majority")
    g = Group(0, 3, "sequencer", members=range(3), safe=True, safe_quorum="majority")
    assert (g.safe, g.safe_quorum, g.status().safe_quorum) == (True, "majority", "majority")
