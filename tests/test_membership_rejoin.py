"""A coordinator that crashed and restarted as its next incarnation before anyone
suspected it: the other members stop taking its old incarnation for the coordinator
(it will never run a flush), so the next member lets the new one in. Found by the
key-value example (examples/kv), where the group stalled for good."""

from __future__ import annotations

import pytest

from mailroom.core.actions import ViewChange
from mailroom.protocols.membership import Group
from mailroom.sim import Simulation


def settle(sim: Simulation) -> None:
    for _ in range(1_000):
        if not sim.in_flight:
            return
        sim.arrive(min(sim.in_flight))


@pytest.mark.parametrize("safe", [False, True])
@pytest.mark.parametrize("protocol", ["sequencer", "cbcast"])
def test_the_coordinator_replaced_by_its_next_incarnation_is_let_back_in(
    protocol: str, safe: bool
) -> None:
    groups = [Group(p, 3, protocol, members=range(3), safe=safe) for p in range(3)]
    sim = Simulation(groups, adversarial=True)
    changes: list[tuple[int, ViewChange]] = []
    sim.on_view = lambda s, pid, change: changes.append((pid, change))
    sim.broadcast(1, "before")
    settle(sim)
    # the coordinator (and the sequencer) crashes and nobody is told: its next
    # incarnation asks to join before anyone suspects the old one
    sim.hosts.stop(0)
    sim.wire.drop_to(0)
    sim.agenda.disarm(0)
    sim.join(0, Group(0, 3, protocol, contacts=[1, 2], incarnation=1, safe=safe))
    settle(sim)
    # the old incarnation leaves in view 2, the new one joins in view 3
    left = {pid: c for pid, c in changes if c.view.id == 2}
    assert sorted(left) == [1, 2]
    assert all((c.view.members, c.left) == ((1, 2), (0,)) for c in left.values())
    seen = {pid: c for pid, c in changes if c.view.id == 3}
    assert sorted(seen) == [0, 1, 2]
    for pid in (1, 2):
        assert (seen[pid].joined, seen[pid].left) == ((0,), ())
        assert seen[pid].incarnations == (1, 0, 0)
    assert groups[1].coordinator == 0  # the new incarnation coordinates view 3
    sim.broadcast(2, "after")
    settle(sim)
    for pid in range(3):
        delivered = [e.payload for e in sim.trace if e.kind == "deliver" and e.process == pid]
        assert delivered[-1:] == ["after"], (pid, delivered)
