"""The protocol lab and its evidence for the open questions of docs/story.md (docs/lab.md).

(a) Is DELIV redundant with column i of SENT?  For every other process, yes, in
    every reachable state; on the diagonal, no (self-sends): the harness finds
    the two-self-send counterexample, and one counter for self-deliveries repairs it.
(b) Increment before sending + "one greater" clause - step 2 is RST: the same
    deliveries and the same (SENT, DELIV) after every call, under the same schedules.
(c) C1 <=> C3, both imply C2, C2 implies neither (counterexamples found).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given

from mailroom import RST, Fifo, Unordered
from mailroom.lab import (
    ColumnForDeliv,
    ColumnForDelivSelfCounter,
    IncrementFirst,
    MatrixLab,
    MatrixWithoutDeliv,
    Seed003Matrix,
    all_scenarios,
    c1,
    c2,
    c3,
    chain_scenarios,
    compare,
    counterexample,
    find_difference,
    rst_state,
    separate,
    watch,
)
from mailroom.sim import Simulation
from mailroom.testing import Scenario, replay, scenarios


def _same_as_rst(factory: Any, s: Scenario) -> None:
    diff = compare(RST, factory, s, state=rst_state)
    assert diff is None, diff.describe()


@given(scenarios(mode="unicast", n=(1, 4), max_ops=10))
def test_workbench_matrixlab_is_rst(s: Scenario) -> None:
    _same_as_rst(MatrixLab, s)


# -- (a) ------------------------------------------------------------------------------


def _deliv_is_column(ep: Any) -> None:
    i = ep.pid
    for k in range(ep.n):
        if k != i:
            assert ep.deliv[k] == ep.sent[k, i], (k, ep.deliv.tolist(), ep.sent.tolist())
    assert ep.sent[i, i] >= ep.deliv[i]


@given(scenarios(mode="unicast", n=(1, 4), max_ops=10))
def test_a_deliv_equals_column_off_the_diagonal_in_every_state(s: Scenario) -> None:
    run = replay(watch(RST, _deliv_is_column), s)
    for ep in run.sim.endpoints:  # drained: the diagonal agrees too
        assert ep.deliv[ep.pid] == ep.sent[ep.pid, ep.pid]


def test_a_self_send_corner_breaks_column_for_deliv() -> None:
    found = counterexample(ColumnForDeliv, ["fifo", "causal", "liveness"], mode="unicast", n=(1, 3))
    assert found is not None
    ops = found.scenario.ops
    assert all(op.to == op.pid for op in ops)  # only messages to oneself
    assert {v.property for v in found.violations} >= {"fifo"}
    assert "m2" in found.diagram().svg()


@given(scenarios(mode="unicast", n=(2, 4), max_ops=10, self_sends=False))
def test_a_column_for_deliv_is_rst_without_self_sends(s: Scenario) -> None:
    _same_as_rst(ColumnForDeliv, s)


@given(scenarios(mode="unicast", n=(1, 4), max_ops=10))
def test_a_self_counter_repairs_it(s: Scenario) -> None:
    _same_as_rst(ColumnForDelivSelfCounter, s)


# -- (b) ------------------------------------------------------------------------------


@given(scenarios(mode="unicast", n=(1, 4), max_ops=10))
def test_b_increment_first_is_rst(s: Scenario) -> None:
    _same_as_rst(IncrementFirst, s)


def test_b_search_finds_no_difference_but_finds_one_for_a_broken_variant() -> None:
    assert find_difference(RST, IncrementFirst, state=rst_state, max_examples=150) is None
    diff = find_difference(RST, ColumnForDeliv, state=rst_state, max_examples=300)
    assert diff is not None and "P0" in diff.reason


def test_b_matrix_without_deliv_loses_self_sends() -> None:
    found = counterexample(MatrixWithoutDeliv, ["liveness"], mode="unicast", n=(1, 3))
    assert found is not None
    (op,) = found.scenario.ops
    assert op.to == op.pid  # one message to oneself is never delivered


@given(scenarios(mode="unicast", n=(2, 4), max_ops=10, self_sends=False))
def test_b_matrix_without_deliv_is_rst_without_self_sends(s: Scenario) -> None:
    diff = compare(RST, MatrixWithoutDeliv, s)  # same deliveries (M is not DELIV)
    assert diff is None, diff.describe()


def test_b_old_name_is_an_alias() -> None:
    assert Seed003Matrix is MatrixWithoutDeliv


# -- (c) ------------------------------------------------------------------------------


@given(chain_scenarios(n=4, max_ops=7))
def test_c_the_three_agree_on_random_causal_chains(s: Scenario) -> None:
    trace = replay(Unordered, s).trace  # Unordered delivers in whatever order packets arrive
    verdicts = {not c1(trace), not c2(trace), not c3(trace)}  # each: "no violation"
    assert len(verdicts) == 1, s


def test_c_the_three_agree_on_every_run_with_three_messages() -> None:
    runs = broken = 0
    for s in all_scenarios(n=3, max_ops=3):
        trace = replay(Unordered, s).trace
        verdicts = {not c1(trace), not c2(trace), not c3(trace)}
        assert len(verdicts) == 1, s
        runs += 1
        broken += verdicts == {False}
    assert runs == 3354 and broken > 0  # every workload, every arrival order


def test_c_all_three_fail_on_alice_bob_carol_under_unordered() -> None:
    sim = Simulation([Unordered(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.send(0, "meet at 3", to=2)
    m2 = sim.send(0, "join us?", to=1)
    sim.arrive_message(m2, 1)
    m3 = sim.send(1, "what meeting?", to=2)
    sim.arrive_message(m3, 2)
    sim.arrive_message(m1, 2)
    pairs = {
        name: {(a.message, b.message) for a, b in f(sim.trace)}
        for name, f in (("C1", c1), ("C2", c2), ("C3", c3))
    }
    # C2 sees m1 < m2 at Alice; C3 sees Carol's order; C1 sees both
    assert pairs == {"C1": {(m1, m2), (m1, m3)}, "C2": {(m1, m2)}, "C3": {(m1, m3)}}


def test_c_fifo_order_is_weaker_counterexample_found() -> None:
    for fails in ("C1", "C2", "C3"):
        found = separate("FIFO", fails, Fifo)
        assert found is not None
        assert len(found.scenario.ops) == 3  # the Alice/Bob/Carol shape, found first
        assert found.violations[0].property == fails


class ForgetsStepTwo(MatrixLab):
    protocol = "lab.test.ForgetsStepTwo"

    def after_delivery(self, p: Any) -> None:
        self.deliv.increment(p.sender)
        self.sent.merge(p.sent)


@given(scenarios(mode="unicast", n=(1, 4), max_ops=10))
def test_knob_step_two_decides_nothing(s: Scenario) -> None:
    diff = compare(RST, ForgetsStepTwo, s)  # deliveries only
    assert diff is None, diff.describe()


def test_knob_step_two_keeps_sent_exact() -> None:
    diff = find_difference(RST, ForgetsStepTwo, state=rst_state, max_examples=100)
    assert diff is not None and "after its call" in diff.reason


def test_searches_have_no_deadline() -> None:
    """Notebooks load no test profile: a slow example must not become a failure."""
    from mailroom.lab.explore import search_settings

    assert search_settings(10).deadline is None
