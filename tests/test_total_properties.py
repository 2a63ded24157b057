"""Total order: Hypothesis chooses workloads and schedules.

For each protocol: integrity, total order and liveness hold; FIFO and causal
order hold exactly where the protocol's docstring says, and a shrunk
counterexample shows where they do not. Known-buggy variants must be caught.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom import Fifo, LamportTotalOrder, Reliable, Sequencer, Skeen, Stack
from mailroom.core.endpoint import Endpoint
from mailroom.testing import (
    Op,
    Scenario,
    SequencerBatchReversed,
    SequencerNoHold,
    SkeenEagerDelivery,
    SkeenNoClockRaise,
    assert_properties,
    find_counterexample,
    replay,
    scenarios,
)

SAFE = ("integrity", "total", "liveness")
ALL = ("integrity", "fifo", "causal", "total", "liveness")


def over_fifo(make: Callable[[int, int], Endpoint]) -> Callable[[int, int], Endpoint]:
    def factory(pid: int, n: int) -> Endpoint:
        return Stack(Fifo(pid, n), make(pid, n))  # type: ignore[return-value]

    return factory


def sequencer_at_last(pid: int, n: int) -> Sequencer:
    return Sequencer(pid, n, sequencer=n - 1)


# -- what each protocol guarantees -------------------------------------------------------


@given(scenarios(mode="broadcast"))
def test_sequencer_is_total(s):
    assert_properties(Sequencer, s, SAFE)


@given(scenarios(mode="broadcast"))
def test_sequencer_elsewhere_is_total(s):
    assert_properties(sequencer_at_last, s, SAFE)


@given(scenarios(mode="broadcast"))
def test_sequencer_over_fifo_is_fifo_and_causal(s):
    """Over FIFO channels the coordinator's order is causal."""
    assert_properties(over_fifo(Sequencer), s, ALL)


# -- batches: broadcast_many in the schedule (Hypothesis picks sizes 0..5) -------------------


def over_reliable(make: Callable[[int, int], Endpoint]) -> Callable[[int, int], Endpoint]:
    def factory(pid: int, n: int) -> Endpoint:
        return Stack(Reliable(pid, n, rto=2.0, max_rto=8.0), make(pid, n))  # type: ignore[return-value]

    return factory


@given(scenarios(mode=("broadcast", "batch")))
def test_sequencer_with_batches_is_total(s):
    assert_properties(Sequencer, s, SAFE)


@given(scenarios(mode=("broadcast", "batch")))
def test_sequencer_elsewhere_with_batches_is_total(s):
    assert_properties(sequencer_at_last, s, SAFE)


@given(scenarios(mode=("broadcast", "batch")))
def test_sequencer_with_batches_over_fifo_is_fifo_and_causal(s):
    assert_properties(over_fifo(Sequencer), s, ALL)


@given(scenarios(mode=("broadcast", "batch"), drop=True))
def test_sequencer_with_batches_over_reliable_survives_loss_and_duplication(s):
    """Reliable retransmits whole batch packets; receivers deliver each message once."""
    assert_properties(over_reliable(Sequencer), s, SAFE)


def test_a_batch_op_broadcasts_its_payloads_in_one_step():
    ops = (Op(1, None, "m0", ("m0.0", "m0.1", "m0.2")), Op(2, None, "m1", ()))
    run = replay(Sequencer, Scenario(3, ops, ()))
    assert run.steps[0] == "P1 broadcasts the batch ['m0.0', 'm0.1', 'm0.2'] (P1#1, P1#2, P1#3)"
    assert run.steps[1] == "P2 broadcasts the batch [] (nothing)"
    assert len(run.sim.packets()) == 0 and not run.violations(SAFE)
    assert [m.payload for m in run.sim.delivered[2]] == ["m0.0", "m0.1", "m0.2"]


def test_reversed_batch_delivery_breaks_total_order():
    """The sequencer delivers a batch in number order, receivers in reverse."""
    run = find_counterexample(
        SequencerBatchReversed, ["total"], max_examples=1000, mode=("broadcast", "batch")
    )
    assert run is not None, "SequencerBatchReversed was not caught"
    assert run.violations(("total",))
    assert any("broadcasts the batch" in step for step in run.steps)


@given(scenarios(mode=("broadcast", "multicast")))
def test_skeen_is_total_for_any_destination_sets(s):
    assert_properties(Skeen, s, SAFE)


@settings(max_examples=60)
@given(scenarios(n=(2, 5), mode="multicast", max_ops=10))
def test_skeen_multicast_is_total_with_more_processes(s):
    assert_properties(Skeen, s, SAFE)


@given(scenarios(mode="broadcast"))
def test_skeen_broadcast_over_fifo_is_fifo_and_causal(s):
    assert_properties(over_fifo(Skeen), s, ALL)


@given(scenarios(mode="broadcast"))
def test_lamport_over_fifo_is_total_fifo_and_causal(s):
    assert_properties(LamportTotalOrder.stack, s, ALL)


@settings(max_examples=40)
@given(scenarios(n=(4, 5), mode="broadcast", max_ops=10, max_choices=200))
def test_lamport_with_more_processes(s):
    assert_properties(LamportTotalOrder.stack, s, ALL)


# -- where they stop: shrunk counterexamples ------------------------------------------------


def _shows(run, prop: str) -> list:
    assert run is not None, f"no counterexample to {prop}"
    found = run.violations((prop,))
    assert found and all(v.property == prop for v in found)
    assert not run.violations(SAFE), "the counterexample must still be totally ordered"
    return found


def test_sequencer_is_not_fifo_over_a_reordering_network():
    """A sender's second request overtakes its first on the way to the sequencer;
    everyone then delivers them in the wrong order (hence not causal either)."""
    run = find_counterexample(Sequencer, ["fifo"], max_examples=500, mode="broadcast")
    found = _shows(run, "fifo")
    m1, m2 = found[0].messages
    assert m1.origin == m2.origin != 0 and m1.seq < m2.seq
    # every process made the same mistake: the order is total, just not FIFO
    assert {v.processes[0] for v in found} == set(range(run.scenario.n))


def test_sequencer_is_not_causal_over_a_reordering_network():
    run = find_counterexample(Sequencer, ["causal"], max_examples=500, mode="broadcast")
    _shows(run, "causal")


def test_skeen_is_not_fifo_over_a_reordering_network():
    """The second message reaches a receiver first and gets the lower proposal."""
    run = find_counterexample(Skeen, ["fifo"], max_examples=500, mode="broadcast")
    found = _shows(run, "fifo")
    m1, m2 = found[0].messages
    assert m1.origin == m2.origin and m1.seq < m2.seq


def test_skeen_is_not_causal_over_a_reordering_network():
    run = find_counterexample(Skeen, ["causal"], max_examples=500, mode="broadcast")
    _shows(run, "causal")


def test_skeen_multicast_is_not_fifo_even_over_fifo_channels():
    """A message to a set with a busy process gets a high final number; the same
    sender's next message, to a quieter set, gets a lower one."""
    run = find_counterexample(over_fifo(Skeen), ["fifo"], max_examples=1000, mode="multicast", n=2)
    found = _shows(run, "fifo")
    m1, m2 = found[0].messages
    dests = {op.payload: op.to for op in run.scenario.ops}
    assert m1.origin == m2.origin
    assert len({dests[f"m{i}"] for i in range(len(run.scenario.ops))}) > 1


def test_lamport_without_fifo_breaks_total_order():
    """The argument needs "messages from the same process arrive in order". Without
    FIFO channels a sender's acknowledgement overtakes its own message, the
    receiver believes it has heard everything stamped below, and delivers early."""
    run = find_counterexample(LamportTotalOrder, ["total"], max_examples=500, mode="broadcast")
    assert run is not None
    assert run.violations(("total",))
    arrivals = [
        (m.group(1), m.group(2), m.group(3))
        for step in run.steps
        if (m := re.search(r"\((\S+) P(\d+)->P(\d+)\) arrives", step))
    ]
    overtaken = [
        (src, dst)
        for i, (what, src, dst) in enumerate(arrivals)
        if what == "LamportAck"
        and any(w.startswith(f"P{src}#") and (s, d) == (src, dst) for w, s, d in arrivals[i:])
    ]
    assert overtaken, f"no acknowledgement overtook its sender's message:\n{run.describe()}"


# -- known-buggy variants must be caught -------------------------------------------------------


@pytest.mark.parametrize(
    "variant",
    [SkeenNoClockRaise, SkeenEagerDelivery, SequencerNoHold],
    ids=lambda c: c.__name__,
)
def test_buggy_variant_breaks_total_order(variant):
    # SkeenNoClockRaise takes a few hundred examples to reach, sometimes over a thousand
    # (12 random searches: 162 to 1,792, two missed at 1,000); the derandomized examples
    # also shift with the constants of the modules loaded before (Hypothesis draws some
    # from them), so the bound leaves room: a search stops at its first counterexample
    run = find_counterexample(variant, ["total"], max_examples=5000, mode="broadcast")
    assert run is not None, f"{variant.__name__} was not caught"
    assert run.violations(("total",))


# -- snapshots mid-run: restore and carry on ------------------------------------------------------

FACTORIES: dict[str, Callable[[int, int], Endpoint]] = {
    "sequencer": Sequencer,
    "skeen": Skeen,
    "lamport": LamportTotalOrder.stack,
}


@settings(max_examples=60)
@given(st.sampled_from(sorted(FACTORIES)), st.integers(2, 4), st.data())
def test_snapshot_restore_mid_run(name, n, data):
    """Any state, snapshotted and restored, round-trips exactly and carries on correctly."""
    import json

    from mailroom.sim.simulation import Simulation
    from mailroom.trace.checkers import check

    make = FACTORIES[name]
    sim = Simulation([make(p, n) for p in range(n)], adversarial=True)
    ops = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6))
    for i, pid in enumerate(ops):
        sim.broadcast(pid, f"m{i}")
        for _ in range(data.draw(st.integers(0, 4))):
            if sim.in_flight:
                sim.arrive(data.draw(st.sampled_from(sorted(sim.in_flight))))
    for pid, ep in enumerate(sim.endpoints):
        snap = json.loads(json.dumps(ep.snapshot()))
        again = type(ep).restore(snap)
        assert again.snapshot() == ep.snapshot()
        assert again.buffered() == ep.buffered()
        sim.endpoints[pid] = again
    while sim.in_flight:
        sim.arrive(min(sim.in_flight))
    assert check(sim.trace, SAFE).ok
    assert all(ep.buffered() == 0 for ep in sim.endpoints)
