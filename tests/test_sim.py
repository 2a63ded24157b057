"""The simulator: determinism, faults, metrics, timed and adversarial modes."""

from __future__ import annotations

import pytest

from mailroom import CBCAST, RST, Fifo, LocalError, Message, Stack, Unordered
from mailroom.codec import encode, metadata_bytes
from mailroom.sim import NetworkModel, Simulation, random_workload, varint_size
from mailroom.trace import check


def _run(factory: type, seed: int, mode: str = "unicast", **net: object) -> Simulation:
    sim = Simulation(
        [factory(pid, 4) for pid in range(4)], NetworkModel(delay=(1.0, 20.0), **net), seed=seed
    )
    random_workload(sim, 60, mode=mode, seed=seed)
    sim.run()
    return sim


def test_same_seed_same_trace_other_seed_other_trace() -> None:
    a, b, c = _run(RST, 1), _run(RST, 1), _run(RST, 2)
    assert [e.to_dict() for e in a.trace] == [e.to_dict() for e in b.trace]
    assert [e.to_dict() for e in a.trace] != [e.to_dict() for e in c.trace]


@pytest.mark.parametrize(("factory", "mode"), [(RST, "unicast"), (CBCAST, "broadcast")])
def test_timed_runs_with_reordering_and_duplication_are_correct(factory: type, mode: str) -> None:
    sim = _run(factory, 7, mode, duplicate=0.2)
    assert sim.metrics.duplicated > 0
    assert sim.quiescent()
    assert check(sim.trace, ("integrity", "fifo", "causal", "liveness")).ok
    summary = sim.metrics.summary()
    assert summary["app_messages"] == 60
    assert summary["largest_buffer"] >= 1  # delays up to 20x reorder enough to buffer
    assert summary["mean_delay"] > 0


def test_unordered_violates_causality_under_reordering() -> None:
    bad = [s for s in range(10) if not check(_run(Unordered, s).trace, ["causal"]).ok]
    assert bad  # some seeds reorder enough to break causality


def test_metrics_count_packets_and_metadata() -> None:
    sim = Simulation([RST(pid, 3) for pid in range(3)])
    sim.send(0, "x", to=1)
    sim.run()
    m = sim.metrics
    assert (m.packets, m.data_packets, m.control_packets, m.deliveries) == (1, 1, 0, 1)
    # through the codec: every encoded byte of the packet but the payload's
    (t,) = RST(0, 3).send("x", to=1)
    assert m.metadata_bytes == metadata_bytes(t.packet) == len(encode(t.packet)) - 3
    assert m.delay_max == 1.0
    assert varint_size(127) == 1 and varint_size(128) == 2 and varint_size(-1) == 10


def test_per_link_delays_and_loss() -> None:
    net = NetworkModel(delay=(1.0, 1.0), links={(0, 2): (50.0, 50.0)})
    sim = Simulation([RST(pid, 3) for pid in range(3)], net)
    sim.send(0, "slow", to=2)
    sim.send(0, "fast", to=1)
    sim.run()
    times = {e.payload: e.time for e in sim.trace if e.kind == "deliver"}
    assert times == {"slow": 50.0, "fast": 1.0}
    lossy = Simulation([Fifo(pid, 2) for pid in range(2)], NetworkModel(loss=0.5), seed=3)
    for i in range(40):
        lossy.send(0, i, to=1)
    lossy.run()
    assert 0 < lossy.metrics.dropped < 40


def test_callback_model_sends_from_delivery() -> None:
    def reply(sim: Simulation, pid: int, message: Message) -> None:
        if pid == 1 and message.payload == "hello":
            sim.broadcast(1, "ack")

    sim = Simulation([CBCAST(pid, 3) for pid in range(3)], on_deliver=reply)
    sim.broadcast(0, "hello")
    sim.run()
    assert [m.payload for m in sim.delivered[2]] == ["hello", "ack"]
    assert check(sim.trace, ["causal", "liveness"]).ok


def test_adversarial_mode_and_errors() -> None:
    sim = Simulation([RST(pid, 2) for pid in range(2)], adversarial=True)
    m = sim.send(0, "x", to=1)
    assert not sim.step()  # nothing arrives by itself
    (p,) = sim.packets()
    copy = sim.duplicate(p.id)
    sim.arrive(copy)
    sim.drop(p.id)
    assert sim.in_flight == {}
    assert [x.payload for x in sim.delivered[1]] == ["x"]
    with pytest.raises(LocalError, match="no packet"):
        sim.arrive_message(m, 1)
    with pytest.raises(LocalError, match="expected"):
        Simulation([RST(1, 2), RST(0, 2)])


def test_stack_of_fifo_under_cbcast() -> None:
    sim = Simulation(
        [Stack(Fifo(pid, 3), CBCAST(pid, 3)) for pid in range(3)],
        NetworkModel(delay=(1.0, 9.0)),
        seed=4,
    )
    random_workload(sim, 30, mode="broadcast", seed=4)
    sim.run()
    assert check(sim.trace, ("integrity", "fifo", "causal", "liveness")).ok
    ep = sim.endpoints[0]
    data = ep.snapshot()
    assert Stack.restore(data).snapshot() == data
    assert ep.sent_count == sum(1 for e in sim.trace if e.kind == "send" and e.process == 0)
