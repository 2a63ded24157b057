"""Fault injection: every protocol over the reliable layer survives loss (up to 30%),
duplication, reordering, partitions that heal, and crashes with restore from checkpoints.

Hypothesis chooses the workload and the faults. Two drivers:

- timed simulations (``Simulation``): loss, duplication, delay ranges that reorder,
  partitions with a healing time, crashes with down time, and whole-group
  checkpoint/restore through JSON in the middle of the run;
- the adversarial harness (``mailroom.testing``): Hypothesis picks every arrival,
  duplicate, drop, timer, crash and partition.

After the run, the trace must show integrity, the protocol's ordering guarantee
and liveness, every mail room must be empty and every sender must have forgotten
every packet. Known-buggy reliable layers must be caught.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom import (
    CBCAST,
    KS,
    RST,
    Fifo,
    LamportTotalOrder,
    LocalError,
    Reliable,
    Sequencer,
    Skeen,
    Stack,
    Unordered,
)
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing import (
    ReliableNoDedup,
    ReliableNoRetransmit,
    assert_properties,
    find_counterexample,
    scenarios,
)
from mailroom.trace import check

Factory = Callable[[int, int], Any]


def over_reliable(*uppers: type) -> Factory:
    def make(pid: int, n: int) -> Stack:
        return Stack(Reliable(pid, n, rto=2.5, max_rto=20.0), *(u(pid, n) for u in uppers))

    return make


ALL = ("integrity", "fifo", "causal", "total", "liveness")

#: name -> (factory, operation kinds, the properties the protocol promises)
PROTOCOLS: dict[str, tuple[Factory, tuple[str, ...], tuple[str, ...]]] = {
    "Fifo": (over_reliable(Fifo), ("unicast", "broadcast"), ("integrity", "fifo", "liveness")),
    "RST": (over_reliable(RST), ("unicast",), ("integrity", "fifo", "causal", "liveness")),
    "KS": (over_reliable(KS), ("unicast",), ("integrity", "fifo", "causal", "liveness")),
    "CBCAST": (over_reliable(CBCAST), ("broadcast",), ("integrity", "fifo", "causal", "liveness")),
    "Fifo+CBCAST": (
        over_reliable(Fifo, CBCAST),
        ("broadcast",),
        ("integrity", "fifo", "causal", "liveness"),
    ),
    "Unordered": (over_reliable(Unordered), ("unicast", "broadcast"), ("integrity", "liveness")),
    # Reliable's channels are FIFO, so the total orders are FIFO and causal over it too.
    "Sequencer": (over_reliable(Sequencer), ("broadcast",), ALL),
    "Skeen": (over_reliable(Skeen), ("broadcast",), ALL),
    "Lamport": (over_reliable(LamportTotalOrder), ("broadcast",), ALL),
    "Fifo+Lamport": (over_reliable(Fifo, LamportTotalOrder), ("broadcast",), ALL),
    "Reliable": (
        lambda pid, n: Reliable(pid, n, rto=2.5),
        ("unicast",),
        ("integrity", "fifo", "liveness"),
    ),
}


def _reliable_layers(ep: Any) -> list[Reliable]:
    layers = ep.layers if isinstance(ep, Stack) else [ep]
    return [x for x in layers if isinstance(x, Reliable)]


@st.composite
def faulty_runs(draw: st.DrawFn, kinds: tuple[str, ...]) -> dict[str, Any]:
    n = draw(st.integers(2, 4))
    lo = draw(st.floats(0.1, 2.0))
    network = NetworkModel(
        delay=(lo, lo + draw(st.floats(0.0, 4.0))),
        loss=draw(st.sampled_from([0.0, 0.1, 0.3]) | st.floats(0.0, 0.3)),
        duplicate=draw(st.floats(0.0, 0.3)),
        local=draw(st.sampled_from([0.0, 0.5])),
    )
    ops = []
    for i in range(draw(st.integers(1, 12))):
        pid = draw(st.integers(0, n - 1))
        kind = draw(st.sampled_from(kinds))
        to = None if kind == "broadcast" else draw(st.integers(0, n - 1))
        ops.append((draw(st.floats(0.0, 30.0)), pid, to, f"m{i}"))
    partitions = draw(
        st.lists(
            st.tuples(
                st.floats(0.0, 30.0),
                st.floats(1.0, 40.0),
                st.sets(st.integers(0, n - 1), min_size=1, max_size=n - 1),
            ),
            max_size=2,
        )
    )
    crashes = draw(
        st.lists(
            st.tuples(st.floats(0.0, 30.0), st.integers(0, n - 1), st.floats(0.0, 15.0)),
            max_size=3,
        )
    )
    restores = draw(st.lists(st.floats(0.0, 40.0), max_size=2))
    seed = draw(st.integers(0, 2**32 - 1))
    return {
        "n": n,
        "network": network,
        "ops": ops,
        "partitions": partitions,
        "crashes": crashes,
        "restores": restores,
        "seed": seed,
    }


def _op(sim: Simulation, pid: int, to: int | None, payload: str) -> None:
    if not sim.is_up(pid):
        return  # the application is down with its process: it sends nothing
    if to is None:
        sim.broadcast(pid, payload)
    else:
        sim.send(pid, payload, to=to)


def _restore_everyone(sim: Simulation) -> None:
    """Checkpoint every process through JSON, rebuild it from that and carry on."""
    for pid, ep in enumerate(sim.endpoints):
        if not sim.is_up(pid):
            continue
        data = json.loads(json.dumps(ep.snapshot()))
        again = type(ep).restore(data)
        assert again.snapshot() == ep.snapshot()
        sim.endpoints[pid] = again


def run_faulty(factory: Factory, spec: dict[str, Any]) -> Simulation:
    n = spec["n"]
    sim = Simulation(
        [factory(pid, n) for pid in range(n)], spec["network"], seed=spec["seed"], checkpoints=True
    )
    for time, pid, to, payload in spec["ops"]:
        sim.schedule(time, partial(_op, pid=pid, to=to, payload=payload))
    for start, length, group in spec["partitions"]:
        rest = [q for q in range(n) if q not in group]
        sim.schedule(
            start, partial(Simulation.partition, groups=[group, rest], until=start + length)
        )
    for time, pid, down in spec["crashes"]:
        sim.schedule(time, lambda s, pid=pid, down=down: s.is_up(pid) and s.crash(pid, down))
    for time in spec["restores"]:
        sim.schedule(time, _restore_everyone)
    sim.run(max_steps=200_000)
    return sim


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
@given(data=st.data())
def test_every_protocol_over_reliable_survives_faults(name: str, data: st.DataObject) -> None:
    factory, kinds, properties = PROTOCOLS[name]
    spec = data.draw(faulty_runs(kinds))
    sim = run_faulty(factory, spec)
    report = check(sim.trace, properties)
    assert report.ok, report.summary()
    assert sim.quiescent()
    for ep in sim.endpoints:
        assert ep.pending() == []
        assert all(r.retained() == 0 and r.buffered() == 0 for r in _reliable_layers(ep))
        assert getattr(ep, "rejected", 0) == 0
    sent = sum(1 for e in sim.trace if e.kind == "send")
    expected = sum(len(e.dest) for e in sim.trace if e.kind == "send")
    assert sum(1 for e in sim.trace if e.kind == "deliver") == expected
    assert sent == sim.metrics.app_messages


def test_a_third_lost_with_crashes_exact_counts() -> None:
    """The issue's "done when": lose a third, restart from checkpoints, still exactly once."""
    spec = {
        "n": 4,
        "network": NetworkModel(delay=(0.5, 3.0), loss=1 / 3, duplicate=0.1),
        "ops": [(i * 0.25, i % 4, None, f"m{i}") for i in range(60)],
        "partitions": [(2.0, 10.0, {0, 1})],
        "crashes": [(3.0, 2, 5.0), (7.0, 0, 0.0), (9.0, 3, 20.0)],
        "restores": [6.0],
        "seed": 7,
    }
    sim = run_faulty(PROTOCOLS["CBCAST"][0], spec)
    assert check(sim.trace).count("causal") == 0
    assert check(sim.trace).count("integrity") == 0
    sent = [e for e in sim.trace if e.kind == "send"]
    assert [len(d) for d in sim.delivered] == [len(sent)] * 4
    assert sim.crashes == 3 and sim.metrics.dropped > 100
    assert sum(r.retransmissions for ep in sim.endpoints for r in _reliable_layers(ep)) > 50


# -- the adversarial harness: Hypothesis picks every event -----------------------------


@pytest.mark.parametrize(
    "name", ["Fifo", "RST", "KS", "CBCAST", "Reliable", "Skeen", "Fifo+Lamport"]
)
@settings(max_examples=80)
@given(data=st.data())
def test_harness_with_drop_duplicate_crash_partition(name: str, data: st.DataObject) -> None:
    factory, kinds, properties = PROTOCOLS[name]
    scenario = data.draw(
        scenarios(
            n=(2, 3),
            mode=kinds,
            max_ops=6,
            drop=True,
            duplicate=True,
            crash=True,
            partition=True,
        )
    )
    run = assert_properties(factory, scenario, properties)
    for ep in run.sim.endpoints:
        assert all(r.retained() == 0 for r in _reliable_layers(ep))


def test_harness_steps_name_the_new_faults() -> None:
    from mailroom.testing import Op, Scenario, replay

    scenario = Scenario(
        2,
        (Op(0, 1, "a"),),
        # issue, drop the packet, P1 crashes, P0 cut off, then drain (timers fire)
        (0, 2, 3, 2),
        frozenset({"drop", "crash", "partition"}),
    )
    run = replay(over_reliable(Fifo), scenario)
    text = run.describe()
    assert "is lost" in text and "crashes and restarts" in text
    assert "is cut off" in text and "timer fires" in text
    assert not run.violations(("integrity", "fifo", "liveness"))


def test_no_retransmission_is_caught_losing_messages() -> None:
    found = find_counterexample(
        lambda pid, n: Stack(ReliableNoRetransmit(pid, n), Fifo(pid, n)),
        ["liveness"],
        max_examples=300,
        n=2,
        drop=True,
        duplicate=False,
    )
    assert found is not None
    assert "is lost" in found.describe()


def test_no_dedup_is_caught_delivering_twice() -> None:
    found = find_counterexample(
        ReliableNoDedup, ["integrity"], max_examples=300, n=2, duplicate=True
    )
    assert found is not None
    assert "duplicated" in found.describe()


def test_without_the_reliable_layer_loss_breaks_liveness() -> None:
    found = find_counterexample(CBCAST, ["liveness"], max_examples=300, mode="broadcast", drop=True)
    assert found is not None


def test_partition_crash_and_restart_semantics() -> None:
    sim = Simulation([Fifo(p, 3) for p in range(3)], checkpoints=True)
    sim.partition([[0], [1, 2]], until=5.0)
    sim.send(0, "cut", to=1)  # sent across the cut: lost
    sim.send(1, "inside", to=2)  # inside one group: arrives
    sim.run()
    assert [m.payload for m in sim.delivered[2]] == ["inside"] and sim.delivered[1] == []
    assert sim.metrics.dropped == 1
    sim.schedule(6.0, lambda s: s.send(0, "healed", to=2))
    sim.run()
    assert [m.payload for m in sim.delivered[2]] == ["inside", "healed"]
    before = sim.endpoints[2].snapshot()
    sim.send(1, "in flight", to=2)
    sim.crash(2, down_for=3.0)  # the packet on its way is lost with P2's memory
    assert not sim.is_up(2) and sim.in_flight == {}
    with pytest.raises(LocalError, match="down"):
        sim.send(2, "x", to=0)
    sim.run()
    assert sim.is_up(2) and sim.endpoints[2].snapshot() == before and sim.crashes == 1
    with pytest.raises(LocalError, match="checkpoints=True"):
        Simulation([Fifo(0, 1)]).crash(0)
