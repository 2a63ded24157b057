"""The heartbeat failure detector around a Group: who is suspected when, exactly."""

from __future__ import annotations

import json

import pytest

from mailroom.core.actions import Transmit, View
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.registry import restore_endpoint
from mailroom.protocols.membership import Group, Prepare
from mailroom.protocols.membership.detector import Heartbeat, HeartbeatDetector
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing.membership import view_problems


def detector(pid: int = 0, n: int = 3, **kw: float) -> HeartbeatDetector:
    return HeartbeatDetector(Group(pid, n, "cbcast", members=range(n)), **kw)


def beats(actions: list[object]) -> list[tuple[int, object]]:
    return [(a.to, a.packet) for a in actions if isinstance(a, Transmit)]


def test_beats_every_interval_and_suspects_a_silent_member_after_timeout() -> None:
    d = detector(interval=1.0, timeout=3.0)
    assert d.next_deadline() == 0.0  # a view to watch: start at the next tick
    assert beats(d.tick(0.0)) == [(1, Heartbeat(1, 0)), (2, Heartbeat(1, 0))]
    assert d.next_deadline() == 1.0
    assert d.receive(Heartbeat(1, 1)) == []  # P1 is alive; noted at the next tick
    assert beats(d.tick(1.0)) == [(1, Heartbeat(1, 0)), (2, Heartbeat(1, 0))]
    assert d.heard == {1: 1.0, 2: 0.0}
    assert len(d.tick(2.0)) == 2 and d.suspected == set()
    out = d.tick(3.0)  # P2 silent since 0.0: 3.0 - 0.0 >= timeout
    assert beats(out) == [
        (1, Heartbeat(1, 0)),
        (2, Heartbeat(1, 0)),
        (1, Prepare(1, 0, 1, 0, (0, 1))),  # P0 coordinates the flush without P2
    ]
    assert d.suspected == {2} and d.group.suspects == {2}
    assert d.next_deadline() == 4.0  # the next beat, and P1's timeout (1.0 + 3.0)
    d.tick(3.5)
    assert d.suspected == {2}  # P1, heard at 1.0, is not due before 4.0
    d.tick(4.0)
    assert d.suspected == {1, 2}


def test_group_packets_count_as_hearing_from_their_sender() -> None:
    d = detector(timeout=2.0)
    d.tick(0.0)
    other = Group(2, 3, "cbcast", members=range(3))
    (data,) = [a.packet for a in other.broadcast("x") if isinstance(a, Transmit) and a.to == 0]
    assert len(d.receive(data)) == 1  # the group delivers it; P2 counts as heard
    d.tick(1.0)
    assert d.heard == {1: 0.0, 2: 1.0}
    d.tick(2.0)
    assert d.suspected == {1}


def test_a_timed_simulation_excludes_a_crashed_member() -> None:
    eps = [detector(p) for p in range(3)]
    sim = Simulation(eps, NetworkModel(delay=(1.0, 1.0)))
    sim.schedule(10.0, lambda s: s.crash(2))
    sim.schedule(10.0, lambda s: s.broadcast(0, "x"))
    sim.run(until=40.0)
    views = [(e.process, e.time, e.view, e.dest) for e in sim.trace if e.kind == "view"]
    # P2's last beat (sent at 9) is noted at P0's tick of 11; suspected at 14; the flush
    # takes two round trips (Prepare, Promise, Accept, Accepted), then Commit to P1.
    assert views[3:] == [(0, 18.0, 2, (0, 1)), (1, 19.0, 2, (0, 1))]
    assert [(e.process, e.time) for e in sim.trace if e.kind == "deliver"] == [(0, 10.0), (1, 11.0)]
    assert eps[0].heartbeats_sent == 2 * 19 + 21  # two peers at 0..18, one at 19..39


def test_snapshot_restores_exactly_and_rebases_time() -> None:
    d = detector(interval=1.0, timeout=3.0)
    d.tick(5.0)
    d.receive(Heartbeat(1, 1))
    data = json.loads(json.dumps(d.snapshot()))
    back = restore_endpoint(data)
    assert isinstance(back, HeartbeatDetector)
    assert back.snapshot() == data
    assert back.next_deadline() == 0.0  # tick now to re-base on the host's clock
    back.tick(1.0)  # the new host's clock is 4 behind: every kept time moves back by 4
    assert back.heard == {1: 1.0, 2: 1.0} and back.next_beat == 2.0
    back.tick(4.0)
    assert back.suspected == {1, 2}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("heard", [[0, 1.0]]),
        ("suspected", [5]),
        ("now", -1.0),
        ("params", {"interval": 0, "timeout": 3.0}),
        ("watching", None),
        ("group", {"protocol": "HeartbeatDetector"}),
    ],
)
def test_a_tampered_snapshot_is_refused(field: str, value: object) -> None:
    d = detector()
    d.tick(0.0)
    data = d.snapshot()
    data[field] = value
    with pytest.raises(LocalError):
        HeartbeatDetector.restore(data)


@pytest.mark.parametrize("beat", [Heartbeat(1, 7), Heartbeat(1, 0), Heartbeat(-1, 1)])
def test_a_bad_heartbeat_is_refused_and_changes_nothing(beat: Heartbeat) -> None:
    d = detector()
    d.tick(0.0)
    before = d.snapshot()
    with pytest.raises(RemoteError):
        d.receive(beat)
    assert d.snapshot() == before


def test_it_offers_the_groups_capabilities() -> None:
    d = detector()
    assert d.capabilities == frozenset({"broadcast"})
    assert d.sending_view == 1 and d.view == View(1, (0, 1, 2)) and d.joined
    assert d.status() == d.group.status() and d.status().view == d.view
    d.broadcast("hi")
    assert d.sent_count == 1
    with pytest.raises(LocalError):
        d.send("x", to=1)
    with pytest.raises(LocalError):
        HeartbeatDetector(object())
    with pytest.raises(LocalError):
        detector(interval=0.0)


def test_a_joiner_does_not_beat_until_it_has_a_view() -> None:
    d = HeartbeatDetector(Group(3, 4, "cbcast", contacts=(0,)))
    assert d.view is None
    assert all(not isinstance(a.packet, Heartbeat) for a in d.tick(0.0) if isinstance(a, Transmit))
    assert d.heartbeats_sent == 0


def test_a_member_cut_off_by_a_partition_rejoins_after_it_heals() -> None:
    """P2 is cut off from 10 to 20: P0 and P1 suspect it and install view 2 at 17 and 18.
    After healing, P2 must learn it was excluded, rejoin and catch up."""
    eps = [detector(p) for p in range(3)]
    sim = Simulation(eps, NetworkModel(delay=(1.0, 1.0)))
    sim.schedule(10.0, lambda s: s.partition([[2], [0, 1]], until=20.0))
    for k in range(30):
        sim.schedule(k + 0.5, lambda s, k=k: s.broadcast(k % 2, f"m{k}"))
    sim.run(until=100.0)
    views = [(e.process, e.time, e.view) for e in sim.trace if e.kind == "view"]
    assert views[3:5] == [(0, 17.0, 2), (1, 18.0, 2)]
    assert {ep.view for ep in eps} == {View(3, (0, 1, 2))}
    assert view_problems(sim, "cbcast") == []
