"""Replicated objects under Hypothesis-chosen calls, schedules, crashes, false suspicions,
partitions and joins (mailroom.replicated.testing): the history checker and the replicas'
states judge every run, and known-buggy variants must be caught.

The default Group delivers non-uniformly: a member may apply and acknowledge an
operation that no survivor holds, then crash or be excluded. So the properties hold
"acknowledged by a replica alive at the end" (``safe=False``); the stronger
"acknowledged by anyone" holds with safe delivery (``Group(safe=True)``), and a pinned
schedule shows the plain group losing such an operation and the safe group keeping it.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import find, given, settings
from hypothesis import strategies as st

from mailroom.core.actions import View
from mailroom.replicated import (
    ReplDict,
    ReplLockManager,
    SimGroup,
    check_history,
    replicated,
)
from mailroom.replicated.replica import OutcomeUnknown
from mailroom.replicated.simhost import group_factory
from mailroom.replicated.testing import (
    EagerLock,
    ForgetfulLock,
    NoRollback,
    ReplicaCall,
    ReplicaScenario,
    ReversedBatches,
    arrival_order,
    lock_problems,
    replay_replicas,
    replica_scenarios,
    run_problems,
)

from .budgets import SEARCH as SHARED_SEARCH
from .budgets import examples

PROTOCOLS = ("sequencer", "skeen", "lamport")
KEYS = st.sampled_from(["a", "b"])
DICT_CALLS = st.one_of(
    st.tuples(st.just("set"), st.tuples(KEYS, st.integers(0, 9))),
    st.tuples(st.just("incr"), st.tuples(KEYS)),
    st.tuples(st.just("pop"), st.tuples(KEYS)),
    st.tuples(st.just("cas"), st.tuples(KEYS, st.sampled_from([None, 1]), st.integers(0, 9))),
)
DICT_READS = st.tuples(st.just("get"), st.tuples(KEYS))
LOCK_CALLS = st.tuples(st.sampled_from(["acquire", "release"]), st.tuples(st.sampled_from("LM")))
#: Every call takes the one lock: what a lock variant gets wrong shows soonest.
ACQUIRES = st.tuples(st.just("acquire"), st.just(("L",)))


class Ledger:
    """A user class whose method changes the state, then may raise: the replica must
    undo the change on every replica."""

    def __init__(self) -> None:
        self.balance = 0
        self.entries: list[int] = []

    @replicated
    def move(self, amount: int) -> int:
        self.entries.append(amount)
        if self.balance + amount < 0:
            raise ValueError(f"overdrawn by {-(self.balance + amount)}")
        self.balance += amount
        return self.balance

    def total(self) -> int:
        return self.balance


LEDGER_CALLS = st.tuples(st.just("move"), st.tuples(st.integers(-3, 3)))
LEDGER_READS = st.tuples(st.just("total"), st.just(()))


#: the shared derandomized search, with this file's budget
SEARCH = settings(SHARED_SEARCH, max_examples=600)


def assert_run(s: ReplicaScenario, factory: Any, **options: Any) -> Any:
    run = replay_replicas(s, factory, **options)
    found = run_problems(run, factory)
    if factory is ReplLockManager:
        found += lock_problems(run)
    assert not found, "\n".join(found[:10]) + "\nschedule:\n" + run.describe()
    return run


@settings(max_examples=examples(80))
@given(replica_scenarios(DICT_CALLS, reads=DICT_READS, protocols=PROTOCOLS))
def test_a_dict_under_crashes_suspicions_partitions_and_joins(s: ReplicaScenario) -> None:
    assert_run(s, ReplDict)


@settings(max_examples=examples(60))
@given(replica_scenarios(LEDGER_CALLS, reads=LEDGER_READS))
def test_a_method_that_raises_changes_nothing_anywhere(s: ReplicaScenario) -> None:
    assert_run(s, Ledger)


def test_a_rejoiner_sends_its_queued_call_before_its_hello() -> None:
    """P0, cut off, queues an ordered read, is excluded and rejoins; its queued call
    keeps its id (P0.1) and goes out in its first view, then its replica's hello
    (P0.2). The hello was sent from ``on_view`` between the actions of the step that
    installed the view, so the sequencer P0 delivered P0.2 before P0.1 while the
    others delivered P0.1 first (found by the property above)."""
    s = ReplicaScenario(
        members=3,
        spares=1,
        protocol="sequencer",
        calls=(ReplicaCall(pid=0, method="total", args=(), ordered=True),),
        choices=(63, 1),
        faults=1,
        kinds=frozenset({"crash", "partition", "suspect"}),
        joins=0,
    )
    run = assert_run(s, Ledger)
    applied = [tuple(r["op"]) for r in run.rows if r["row"] == "apply" and r["replica"] == 0]
    assert applied == [(0, 1), (0, 2)]


@settings(max_examples=examples(60))
@given(replica_scenarios(LOCK_CALLS, max_calls=10))
def test_the_lock_is_never_held_by_two_members_in_one_view(s: ReplicaScenario) -> None:
    assert_run(s, ReplLockManager)


@pytest.mark.parametrize("quorum", ["all", "majority"])
@settings(max_examples=examples(60))
@given(replica_scenarios(DICT_CALLS, reads=DICT_READS))
def test_nothing_acknowledged_by_anyone_is_lost_with_safe_delivery(
    quorum: str, s: ReplicaScenario
) -> None:
    """Counting every member or a majority as holders (``safe_quorum``)."""
    factory = group_factory(s.protocol, safe=True, safe_quorum=quorum)
    run = replay_replicas(s, ReplDict, endpoint=factory)
    found = run_problems(run, ReplDict, safe=True)
    assert not found, "\n".join(found[:10]) + "\nschedule:\n" + run.describe()


def test_the_plain_group_can_lose_what_one_member_acknowledged() -> None:
    """The sequencer (P0) is cut off, applies its own call at once and tells its caller;
    the others install a view without it and never see the call. The checker says so
    under ``safe=True`` and accepts it under the plain group's promise."""
    g = SimGroup(ReplDict, 3, "sequencer", adversarial=True)
    g.partition([[0], [1, 2]])
    told = g.call(0, "set", "k", 1)
    assert told.result() is None  # applied at P0 and acknowledged
    for p, q in [(1, 0), (2, 0), (0, 1), (0, 2)]:  # the detectors on both sides
        g.suspect(p, q)
    g.settle(timers=False)  # P1 and P2 install view 2; P0, a minority, waits
    g.sim.partitions = []
    g.settle()  # P0 learns it is out, rejoins as its next incarnation, gets the state
    assert g.read(1, "get", "k") is None and g.read(0, "get", "k") is None
    assert g.members() == (0, 1, 2) and g.replicas[0].incarnation == 1  # type: ignore[union-attr]
    rows = g.end()
    lost = [p for p in check_history(rows, ReplDict).problems if p.property == "lost"]
    assert lost and lost[0].op == (0, 1)
    assert check_history(rows, ReplDict, safe=False).ok


def test_the_safe_group_does_not_acknowledge_what_it_could_lose() -> None:
    """The same schedule with safe delivery: P0 holds its call until every member holds
    it, which never happens before the others exclude it, so it is never applied nor
    acknowledged (its caller learns the outcome is unknown). Nothing acknowledged is
    lost, and the group goes on without it."""
    g = SimGroup(ReplDict, 3, "sequencer", adversarial=True, safe=True)
    g.partition([[0], [1, 2]])
    told = g.call(0, "set", "k", 1)
    assert not told.done  # held: P1 and P2 do not have it
    for p, q in [(1, 0), (2, 0), (0, 1), (0, 2)]:
        g.suspect(p, q)
    g.settle(timers=False)
    g.sim.partitions = []
    g.settle()
    assert told.outcome is not None and isinstance(told.outcome.error, OutcomeUnknown)
    assert g.read(1, "get", "k") is None and g.read(0, "get", "k") is None
    assert g.members() == (0, 1, 2) and g.replicas[0].incarnation == 1  # type: ignore[union-attr]
    assert check_history(g.end(), ReplDict).ok


# -- known-buggy variants: each must be caught ----------------------------------------------
def caught(strategy: Any, check: Any) -> ReplicaScenario:
    found: ReplicaScenario = find(strategy, check, settings=SEARCH)
    return found


def test_replicas_that_apply_in_arrival_order_are_caught() -> None:
    def diverges(s: ReplicaScenario) -> bool:
        run = replay_replicas(s, ReplDict, endpoint=arrival_order)
        return any("[prefix]" in p or "[equal]" in p for p in run_problems(run, ReplDict))

    caught(replica_scenarios(DICT_CALLS, kinds=()), diverges)


def test_replicas_that_apply_a_batch_in_another_order_are_caught() -> None:
    def diverges(s: ReplicaScenario) -> bool:
        run = replay_replicas(s, ReplDict, replica=ReversedBatches)
        return any("[prefix]" in p or "[equal]" in p for p in run_problems(run, ReplDict))

    caught(replica_scenarios(DICT_CALLS, kinds=(), joins=False), diverges)


def test_a_replica_that_does_not_roll_back_is_caught() -> None:
    def wrong(s: ReplicaScenario) -> bool:
        run = replay_replicas(s, Ledger, replica=NoRollback)
        return any("[results]" in p for p in run_problems(run, Ledger))

    caught(replica_scenarios(LEDGER_CALLS, kinds=()), wrong)


def test_a_lock_that_forgets_view_changes_is_caught() -> None:
    def kept(s: ReplicaScenario) -> bool:
        return bool(lock_problems(replay_replicas(s, ForgetfulLock)))

    caught(replica_scenarios(ACQUIRES, kinds=("crash",), spares=0, joins=False), kept)


@pytest.mark.slow  # a search: the full tier runs it
def test_a_lock_released_at_every_view_change_is_caught() -> None:
    def twice(s: ReplicaScenario) -> bool:
        return any("held by" in p for p in lock_problems(replay_replicas(s, EagerLock)))

    caught(replica_scenarios(ACQUIRES, kinds=("crash",), spares=0, joins=False), twice)


def test_the_strategy_reaches_the_hard_cases() -> None:
    """Crashes, exclusions (false suspicion or partition), partitions, joins and calls
    sent as one batch all occur."""
    seen: set[str] = set()

    @settings(max_examples=150, derandomize=True, database=None, deadline=None)
    @given(replica_scenarios(DICT_CALLS))
    def collect(s: ReplicaScenario) -> None:
        seen.update(replay_replicas(s, ReplDict).notes)

    collect()
    assert seen >= {"crash", "exclusion", "partition", "join", "false suspicion", "batch"}, seen


def test_a_view_is_installed_at_the_same_point_everywhere() -> None:
    g = SimGroup(ReplLockManager, 4, "skeen", members=[0, 1, 2], adversarial=True)
    assert g.call(2, "acquire", "L") and True
    g.settle()
    g.crash(2)
    g.suspect(0, 2)
    g.suspect(1, 2)
    g.settle()
    assert g.read(0, "held") == g.read(1, "held") == {}
    assert g.members() == (0, 1)
    assert [r["view"] for r in g.history.rows if r["row"] == "view"] == [2, 2]
    assert View(2, (0, 1)) == g.replicas[0].view  # type: ignore[union-attr]
