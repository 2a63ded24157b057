"""The simulator drives Group endpoints: view events, views on events, state transfer,
the host's inputs (suspect, leave, join) and crash-stop."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.core.actions import View, ViewChange
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId
from mailroom.protocols.membership import Group
from mailroom.protocols.membership.detector import HeartbeatDetector
from mailroom.sim import NetworkModel, Simulation, view_of
from mailroom.testing.membership import view_problems
from mailroom.trace.events import Event


def group(n: int, members: int, protocol: str = "cbcast") -> list[Group]:
    """``members`` processes in view 1; the other slots hold idle joiners (no contacts)."""
    return [
        Group(p, n, protocol, members=range(members)) if p < members else Group(p, n, protocol)
        for p in range(n)
    ]


def drain(sim: Simulation, limit: int = 10_000) -> None:
    """Packets arrive oldest first; when none is left, the earliest timer fires."""
    for _ in range(limit):
        if sim.in_flight:
            sim.arrive(sim.packets()[0].id)
            continue
        timed = [
            (d, q)
            for q, ep in enumerate(sim.endpoints)
            if q not in sim.stopped and (d := ep.next_deadline()) is not None
        ]
        if not timed:
            return
        sim.fire(min(timed)[1])
    raise AssertionError("the run did not settle")


def views(sim: Simulation) -> list[tuple[int, int, tuple[int, ...]]]:
    return [(e.process, e.view, e.dest) for e in sim.trace if e.kind == "view"]


def test_views_are_trace_events_and_events_carry_their_view() -> None:
    seen: list[tuple[int, ViewChange]] = []
    sim = Simulation(group(3, 3), adversarial=True, on_view=lambda s, p, c: seen.append((p, c)))
    assert views(sim) == [(p, 1, (0, 1, 2)) for p in range(3)]
    m1 = sim.broadcast(1, "a")
    drain(sim)
    sim.suspect(0, 2)
    drain(sim)
    m2 = sim.broadcast(1, "b")
    drain(sim)
    # P2, excluded while alive, rejoins as a new incarnation (view 3)
    assert views(sim)[3:5] == [(0, 2, (0, 1)), (1, 2, (0, 1))]
    assert sorted(views(sim)[5:]) == [(p, 3, (0, 1, 2)) for p in range(3)]
    assert [(p, c.view.id, c.joined, c.left) for p, c in seen][:2] == [
        (0, 2, (), (2,)),
        (1, 2, (), (2,)),
    ]
    assert [(p, out.view, out.rejoining) for p, out in sim.excluded] == [(2, View(2, (0, 1)), True)]
    rows = [(e.process, e.kind, e.message, e.view) for e in sim.trace if e.kind != "view"]
    assert (1, "send", m1, 1) in rows and (2, "deliver", m1, 1) in rows
    assert (1, "send", m2, 3) in rows and (2, "deliver", m2, 3) in rows
    assert all(e.view is not None for e in sim.trace)
    view_row = next(e for e in sim.trace if e.kind == "view" and e.view == 2)
    assert view_row.to_dict()["view"] == 2 and view_row.message == MessageId(0, 2)
    assert Event.from_dict(view_row.to_dict()) == view_row
    assert view_problems(sim, "cbcast") == []


def test_a_joiner_gets_the_state_of_the_group_and_converges() -> None:
    sim = Simulation(group(4, 3), adversarial=True)
    a, b = sim.broadcast(0, "a"), sim.broadcast(2, "b")
    drain(sim)
    assert sim.app_state[0] == [[0, 1], [2, 1]] or sim.app_state[0] == [[2, 1], [0, 1]]
    sim.join(3, Group(3, 4, "cbcast", contacts=(1,)))
    drain(sim)
    assert sorted(views(sim)[-4:]) == [(p, 2, (0, 1, 2, 3)) for p in (0, 1, 2, 3)]
    c = sim.broadcast(3, "c")
    drain(sim)
    expect = sorted(sim.app_state[0])
    assert expect == sorted([[a.origin, a.seq], [b.origin, b.seq], [c.origin, c.seq]])
    assert all(sorted(sim.app_state[q]) == expect for q in range(4))
    assert view_problems(sim, "cbcast") == []


def test_on_state_gives_the_application_state() -> None:
    asked: list[tuple[int, int]] = []

    def state(sim: Simulation, pid: int, view: int) -> Any:
        asked.append((pid, view))
        return {"counter": 41}

    got: list[Any] = []
    sim = Simulation(
        group(3, 2),
        adversarial=True,
        on_state=state,
        on_view=lambda s, p, c: got.append((p, c.state)),
    )
    sim.join(2, Group(2, 3, "cbcast", contacts=(0,)))
    drain(sim)
    assert asked == [(0, 2)]
    assert sorted(got) == [(0, None), (1, None), (2, {"counter": 41})]


def test_leave_ends_with_excluded_and_the_others_go_on() -> None:
    sim = Simulation(group(3, 3), adversarial=True)
    sim.broadcast(2, "x")
    drain(sim)
    sim.leave(2)
    drain(sim)
    assert [(p, out.view, out.rejoining) for p, out in sim.excluded] == [
        (2, View(2, (0, 1)), False)
    ]
    assert sim.app_state[2] == [] and sim.current_view[2] is None
    assert views(sim)[3:] == [(0, 2, (0, 1)), (1, 2, (0, 1))]
    with pytest.raises(LocalError):
        sim.broadcast(2, "late")


def test_crash_stop_in_a_membership_run() -> None:
    sim = Simulation(group(3, 3), adversarial=True)  # no checkpoints needed
    sim.broadcast(0, "a")
    sim.crash(1)
    assert sim.stopped == {1} and not sim.is_up(1)
    assert all(p.dst != 1 for p in sim.in_flight.values())  # packets to it are lost
    with pytest.raises(LocalError):
        sim.broadcast(1, "never")
    with pytest.raises(LocalError):
        sim.crash(1)
    with pytest.raises(LocalError):
        sim.suspect(1, 0)
    sim.suspect(0, 1)
    sim.suspect(2, 1)
    drain(sim)
    assert views(sim)[3:] == [(0, 2, (0, 2)), (2, 2, (0, 2))]
    assert view_problems(sim, "cbcast") == []


def test_join_takes_a_stopped_or_unused_slot_only() -> None:
    sim = Simulation(group(4, 3), adversarial=True)
    with pytest.raises(LocalError):
        sim.join(1, Group(1, 4, "cbcast", contacts=(0,)))  # P1 is running
    sim.broadcast(1, "a")
    drain(sim)
    sim.crash(1)
    with pytest.raises(LocalError):  # a new incarnation must not reuse P1#1
        sim.join(1, Group(1, 4, "cbcast", contacts=(0,), incarnation=1))
    sim.suspect(0, 1)
    sim.suspect(2, 1)
    drain(sim)
    again = Group(1, 4, "cbcast", contacts=(0,), incarnation=1)
    again.sent_count = 1
    sim.join(1, again)
    drain(sim)
    m = sim.broadcast(1, "b")
    drain(sim)
    assert m == MessageId(1, 2)
    assert sorted(views(sim)[-3:]) == [(p, 3, (0, 1, 2)) for p in (0, 1, 2)]
    assert view_problems(sim, "cbcast") == []


def test_the_coordinator_crashes_mid_flush_and_another_takes_over() -> None:
    sim = Simulation(group(5, 5), adversarial=True)
    m = sim.broadcast(4, "from the doomed")
    sim.arrive_message(m, 1)  # only P1 gets it before P4 stops
    sim.crash(4)
    for p in range(4):
        sim.suspect(p, 4)
    prepares = [p for p in sim.packets() if type(p.packet).__name__ == "Prepare"]
    assert prepares and all(p.src == 0 for p in prepares)
    sim.arrive(prepares[0].id)  # one member promises to P0; then P0 dies mid-flush
    assert sim.endpoints[0].flushing
    sim.crash(0)
    for p in (1, 2, 3):
        sim.suspect(p, 0)
    drain(sim)
    assert {v for v in views(sim) if v[1] > 1} == {(p, 2, (1, 2, 3)) for p in (1, 2, 3)}
    # P1's promise carried m: the flush delivered it to P2 and P3 before view 2
    got = [(e.process, e.view) for e in sim.trace if e.kind == "deliver" and e.message == m]
    assert sorted(got) == [(1, 1), (2, 1), (3, 1), (4, 1)]
    assert view_problems(sim, "cbcast") == []


@settings(max_examples=30)
@given(
    protocol=st.sampled_from(["cbcast", "tagged", "sequencer", "skeen", "lamport"]),
    n=st.integers(3, 5),
    seed=st.integers(0, 2**16),
    crash_at=st.floats(5.0, 30.0),
    victim=st.integers(0, 4),
)
def test_heartbeat_detectors_let_the_survivors_go_on_in_a_timed_run(
    protocol: str, n: int, seed: int, crash_at: float, victim: int
) -> None:
    """Random delays (0.5..2), heartbeats every 1 with timeout 6, steady broadcasts, one
    crash-stop: the survivors install a view without it and every property holds."""
    victim %= n
    eps = [
        HeartbeatDetector(Group(p, n, protocol, members=range(n)), interval=1.0, timeout=6.0)
        for p in range(n)
    ]
    sim = Simulation(eps, NetworkModel(delay=(0.5, 2.0)), seed=seed)

    def send(s: Simulation, k: int) -> None:
        if k % n not in s.stopped:
            s.broadcast(k % n, f"m{k}")

    for k in range(40):
        sim.schedule(k + 0.3, lambda s, k=k: send(s, k))
    sim.schedule(crash_at, lambda s: s.crash(victim))
    sim.run(until=120.0)
    assert view_problems(sim, protocol) == []
    survivors = tuple(q for q in range(n) if q != victim)
    assert {view_of(sim.endpoints[q]) for q in survivors} == {View(2, survivors)}
    assert sim.metrics.packets > 100 * n * (n - 1) // 2  # the heartbeats ran all along
    sent = {e.message for e in sim.trace if e.kind == "send" and e.process in survivors}
    for q in survivors:
        assert sent <= {e.message for e in sim.trace if e.kind == "deliver" and e.process == q}
