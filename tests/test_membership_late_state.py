"""A joiner whose state arrives during the next flush: exact runs.

The joiner issues a message while it waits for the application state; a further view
change starts and the joiner promises in its flush; only then does the state arrive.
Nothing goes on the wire before the joiner runs with the state: what it issued waits,
with the id it was given, for the first view in which it does, and is sent (and
traced, after that view's installation) and delivered there, everywhere, once; its
next message gets the next id. Three ways to get there, each for the five
broadcast protocols: a member leaves, a member crashes during the join's flush, and a
healed minority rejoins one member at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mailroom.core.actions import View
from mailroom.core.messages import MessageId
from mailroom.protocols.membership import Group, StateTransfer
from mailroom.sim import Simulation
from mailroom.sim.simulation import InFlight
from mailroom.testing.membership import view_problems

PROTOCOLS = ("cbcast", "tagged", "sequencer", "skeen", "lamport")
Hold = Callable[[InFlight], bool]


def founded(n: int, members: int, protocol: str) -> Simulation:
    """``members`` processes found view 1; the other slots hold idle joiners."""
    eps = [
        Group(p, n, protocol, members=range(members)) if p < members else Group(p, n, protocol)
        for p in range(n)
    ]
    return Simulation(eps, adversarial=True)


def state_to(pid: int) -> Hold:
    """The state transfer to ``pid`` (held back while everything else arrives)."""
    return lambda p: isinstance(p.packet, StateTransfer) and p.dst == pid


def settle(sim: Simulation, hold: Hold = lambda p: False, limit: int = 10_000) -> None:
    """Every packet in flight arrives, oldest first, except those ``hold`` keeps back."""
    for _ in range(limit):
        ready = [p for p in sim.packets() if not hold(p)]
        if not ready:
            return
        sim.arrive(ready[0].id)
    raise AssertionError("the run did not settle")


def arrive(sim: Simulation, kind: str, to: int) -> None:
    """The first packet of class ``kind`` in flight to ``to`` arrives."""
    found = [p for p in sim.packets() if type(p.packet).__name__ == kind and p.dst == to]
    assert found, f"no {kind} in flight to P{to}"
    sim.arrive(found[0].id)


def deliveries(sim: Simulation, pid: int) -> list[tuple[MessageId, object, int | None]]:
    """(message, payload, view) of each delivery at ``pid``, in order."""
    return [
        (e.message, e.payload, e.view)
        for e in sim.trace
        if e.kind == "deliver" and e.process == pid
    ]


def view_ids(sim: Simulation, pid: int) -> list[int]:
    return [v.id for v in sim.views[pid]]


def wake(sim: Simulation, pid: int) -> None:
    """``pid``'s retry timer fires until it sends something (its first tick only arms it)."""
    for _ in range(3):
        if sim.fire(pid):
            return
    raise AssertionError(f"P{pid} has nothing to repeat")


def once(
    sim: Simulation, message: MessageId, procs: range
) -> list[tuple[MessageId, object, int | None]]:
    """Every delivery of ``message`` at ``procs``: (message, payload, view)."""
    return [d for p in procs for d in deliveries(sim, p) if d[0] == message]


def assert_settled(sim: Simulation, protocol: str, alive: tuple[int, ...], view: View) -> None:
    """The live processes share ``view`` with the same state, nobody delivered a message
    twice, and every property of a membership run holds."""
    for p in alive:
        assert sim.endpoints[p].view == view and sim.endpoints[p].joined
        ids = [m for m, _, _ in deliveries(sim, p)]
        assert len(ids) == len(set(ids))
        assert sorted(sim.app_state[p]) == sorted(sim.app_state[alive[0]])
    assert view_problems(sim, protocol) == []


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_leaves_while_the_joiners_state_is_on_its_way(protocol: str) -> None:
    """P0-P2 found the group; P3 joins; everything arrives but P3's state; P3 issues a
    message; P2 leaves, P3 promises in that flush, and then its state arrives."""
    sim = founded(4, 3, protocol)
    sim.join(3, Group(3, 4, protocol, contacts=(0, 1, 2)))
    settle(sim, hold=state_to(3))
    assert [view_ids(sim, p) for p in range(4)] == [[1, 2], [1, 2], [1, 2], []]
    queued = sim.broadcast(3, "queued while joining")  # P3 waits for its state: queued
    assert queued == MessageId(3, 1) and [e for e in sim.trace if e.process == 3] == []
    sim.leave(2)
    arrive(sim, "Leave", 0)  # P0 coordinates the flush of view 2
    arrive(sim, "Prepare", 3)  # P3 promises in it (without the state)
    assert sim.endpoints[3].flushing
    frozen = sim.broadcast(3, "issued while frozen")  # queued too
    assert frozen == MessageId(3, 2)
    arrive(sim, "StateTransfer", 3)  # and now the state of view 2 arrives
    assert [e.kind for e in sim.trace if e.process == 3] == ["view"]  # frozen: nothing sent
    settle(sim)
    p3 = [(e.kind, e.view) for e in sim.trace if e.process == 3]
    assert p3[:3] == [("view", 2), ("view", 3), ("send", 3)]  # sent once P3 runs in view 3
    after = sim.broadcast(3, "after")
    settle(sim)
    assert after == MessageId(3, 3)
    sends = [(e.message, e.view) for e in sim.trace if e.process == 3 and e.kind == "send"]
    assert sends == [(queued, 3), (frozen, 3), (after, 3)]
    # the members of view 3 deliver both queued messages once, in view 3, where P3 sent
    # them; the leaver never had them
    assert once(sim, queued, range(4)) == [(queued, "queued while joining", 3)] * 3
    assert once(sim, frozen, range(4)) == [(frozen, "issued while frozen", 3)] * 3
    assert once(sim, after, range(4)) == [(after, "after", 3)] * 3
    assert_settled(sim, protocol, (0, 1, 3), View(3, (0, 1, 3)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_member_crashes_during_the_joins_flush(protocol: str) -> None:
    """P2 accepts the view that lets P3 in, then crashes: view 2 holds a dead member, so
    the next flush starts at once, and P3's state arrives while P3 is frozen in it."""
    sim = founded(4, 3, protocol)
    sim.join(3, Group(3, 4, protocol, contacts=(0, 1, 2)))
    arrive(sim, "Join", 0)  # P0 coordinates: Prepare to P1 and P2
    for p in (1, 2):
        arrive(sim, "Prepare", p)
        arrive(sim, "Promise", 0)
    arrive(sim, "Accept", 2)
    sim.crash(2)  # its Accepted is on its way
    settle(sim, hold=state_to(3))
    assert [view_ids(sim, p) for p in (0, 1, 3)] == [[1, 2], [1, 2], []]
    queued = sim.broadcast(3, "queued while joining")
    for p in (0, 1, 3):
        sim.suspect(p, 2)
    arrive(sim, "Prepare", 3)
    arrive(sim, "StateTransfer", 3)
    settle(sim)
    after = sim.broadcast(3, "after")
    settle(sim)
    assert (queued, after) == (MessageId(3, 1), MessageId(3, 2))
    assert once(sim, queued, range(4)) == [(queued, "queued while joining", 3)] * 3
    assert once(sim, after, range(4)) == [(after, "after", 3)] * 3
    assert_settled(sim, protocol, (0, 1, 3), View(3, (0, 1, 3)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_healed_minority_rejoins_one_member_at_a_time(protocol: str) -> None:
    """P3 and P4 are cut off and blocked; the majority goes on in view 2. After healing
    P3 rejoins (view 3) and, while its state is on its way, P4's rejoining starts the
    flush of view 3: P3 promises in it before its state arrives."""
    sim = founded(5, 5, protocol)
    sim.partition([[3, 4], [0, 1, 2]], until=float("inf"))
    for p, q in [(p, q) for p in range(5) for q in range(5) if (p < 3) != (q < 3)]:
        sim.suspect(p, q)
    settle(sim)
    assert [view_ids(sim, p) for p in range(5)] == [[1, 2]] * 3 + [[1]] * 2
    sim.partitions = []  # healed: P3 (the minority's coordinator) asks the suspected
    wake(sim, 3)
    settle(sim, hold=state_to(3))  # P3 learns it is out and rejoins: view 3
    assert [view_ids(sim, p) for p in range(5)] == [[1, 2, 3]] * 3 + [[1], [1]]
    queued = sim.broadcast(3, "queued while joining")
    wake(sim, 4)  # P4 asks P3, which tells it it is out; it rejoins
    arrive(sim, "Suspect", 3)
    arrive(sim, "Commit", 4)
    arrive(sim, "Join", 0)  # P0 coordinates the flush of view 3
    arrive(sim, "Prepare", 3)  # P3 promises in it, without the state
    arrive(sim, "StateTransfer", 3)
    settle(sim)
    after = sim.broadcast(3, "after")
    settle(sim)
    assert (queued, after) == (MessageId(3, 1), MessageId(3, 2))
    assert sim.endpoints[3].incarnation == sim.endpoints[4].incarnation == 1
    assert once(sim, queued, range(5)) == [(queued, "queued while joining", 4)] * 5
    assert once(sim, after, range(5)) == [(after, "after", 4)] * 5
    assert_settled(sim, protocol, tuple(range(5)), View(4, tuple(range(5))))
