"""The Group endpoint on a small hand-driven network: views, flush, joins, state transfer."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import Any

import pytest

from mailroom.codec import decode, encode
from mailroom.core.actions import Deliver, Excluded, StateRequest, Transmit, View, ViewChange
from mailroom.core.endpoint import same_data
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.registry import restore_endpoint
from mailroom.protocols.membership import Freeze, Group, GroupData, Prepare, Round

SEEDS = int(os.environ.get("GROUP_SEEDS", "8"))
#: Snapshots written by the Group of an earlier release (see data/membership/README.md).
EARLIER = Path(__file__).parent / "data" / "membership" / "snapshots-before-split.json"


class Net:
    """Endpoints by pid; packets through the codec; a crashed pid receives nothing."""

    def __init__(self, eps: dict[int, Any], seed: int = 0) -> None:
        self.eps = eps
        self.queue: list[tuple[int, bytes]] = []
        self.down: set[int] = set()
        self.log: dict[int, list[Any]] = {p: [] for p in eps}
        self.states: dict[int, Any] = {}
        self.rng = random.Random(seed)

    def apply(self, pid: int, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, Transmit):
                self.queue.append((a.to, encode(a.packet)))
            elif isinstance(a, StateRequest):
                self.log[pid].append(a)
                state = [str(x.message.id) for x in self.log[pid] if isinstance(x, Deliver)]
                self.apply(pid, self.eps[pid].provide_state(a.view, state))
            else:
                self.log[pid].append(a)

    def do(self, pid: int, call: str, *args: Any) -> None:
        self.apply(pid, getattr(self.eps[pid], call)(*args))

    def run(self, shuffle: bool = False, limit: int = 100_000) -> None:
        while self.queue and limit:
            limit -= 1
            k = self.rng.randrange(len(self.queue)) if shuffle else 0
            to, data = self.queue.pop(k)
            if to in self.down or to not in self.eps:
                continue
            self.apply(to, self.eps[to].receive(decode(data)))

    def delivered(self, pid: int) -> list[MessageId]:
        return [a.message.id for a in self.log[pid] if isinstance(a, Deliver)]

    def views(self, pid: int) -> list[View]:
        return [a.view for a in self.log[pid] if isinstance(a, ViewChange)]


def group(n: int, protocol: str = "cbcast", size: int | None = None) -> Net:
    size = size or n
    return Net({p: Group(p, size, protocol, members=range(n)) for p in range(n)})


@pytest.mark.parametrize("protocol", ["cbcast", "tagged", "sequencer", "skeen", "lamport"])
def test_crash_then_survivors_install_a_view_and_go_on(protocol: str) -> None:
    net = group(3, protocol)
    net.do(0, "broadcast", "a")
    net.do(2, "broadcast", "b")
    net.run()
    # P2 broadcasts c; only P1 gets it before P2 crashes
    net.do(2, "broadcast", "c")
    net.queue = [(to, d) for to, d in net.queue if to == 1]
    net.run()
    net.down.add(2)
    net.do(0, "suspect", 2)
    net.do(1, "suspect", 2)
    net.run()
    for p in (0, 1):
        assert net.views(p) == [View(2, (0, 1))]
        assert net.eps[p].view == View(2, (0, 1))
    assert set(net.delivered(0)) == set(net.delivered(1))
    if protocol == "cbcast":  # CBCAST delivered c at P1 at once: the flush gives it to P0
        assert MessageId(2, 2) in net.delivered(0)
    if protocol in ("sequencer", "skeen", "lamport"):
        assert net.delivered(0) == net.delivered(1)
    net.do(0, "broadcast", "d")
    net.do(1, "broadcast", "e")
    net.run()
    assert {MessageId(0, 2), MessageId(1, 1)} <= set(net.delivered(0))
    assert set(net.delivered(0)) == set(net.delivered(1))


def test_the_viewchange_comes_after_every_delivery_of_the_old_view() -> None:
    net = group(3)
    net.do(1, "broadcast", "x")
    net.queue = [(to, d) for to, d in net.queue if to == 2]  # only P2 gets it
    net.run()
    net.down.add(1)
    for p in (0, 2):
        net.do(p, "suspect", 1)
    net.run()
    kinds = [type(a).__name__ for a in net.log[0]]
    assert kinds == ["Deliver", "ViewChange"]  # x recovered by the flush, then the view


def test_sends_during_a_flush_go_into_the_next_view() -> None:
    net = group(3, "sequencer")
    net.down.add(2)
    net.do(0, "suspect", 2)  # P0 coordinates: it freezes at once
    assert net.eps[0].flushing and net.eps[0].sending_view == 2
    net.do(0, "broadcast", "queued")
    net.do(1, "suspect", 2)
    net.run()
    assert net.views(0)[-1] == View(2, (0, 1))
    assert net.delivered(0) == net.delivered(1) == [MessageId(0, 1)]


def test_a_joiner_gets_the_state_and_then_the_same_messages() -> None:
    net = group(3, "cbcast", size=4)
    net.do(0, "broadcast", "a")
    net.run()
    net.eps[3] = Group(3, 4, "cbcast", contacts=[0, 1])
    net.log[3] = []
    net.do(3, "join")
    net.run()
    view = View(2, (0, 1, 2, 3))
    assert all(net.eps[p].view == view for p in range(4))
    change = [a for a in net.log[3] if isinstance(a, ViewChange)]
    # it had no view before; the members are their first incarnations
    assert change == [ViewChange(view, (0, 1, 2, 3), (), ["P0#1"], incarnations=(0, 0, 0, 0))]
    requests = [a for p in range(3) for a in net.log[p] if isinstance(a, StateRequest)]
    assert requests == [StateRequest(2, (3,))]  # one member (the lowest) sends the state
    net.do(3, "broadcast", "hello")
    net.do(1, "broadcast", "b")
    net.run()
    assert set(net.delivered(3)) == {MessageId(3, 1), MessageId(1, 1)}
    assert set(net.delivered(0)) == {MessageId(0, 1), MessageId(3, 1), MessageId(1, 1)}


def test_a_falsely_suspected_member_is_excluded_and_rejoins_as_a_new_incarnation() -> None:
    net = group(3)
    for p in (0, 1):
        net.do(p, "suspect", 2)
    net.run()
    excluded = [a for a in net.log[2] if isinstance(a, Excluded)]
    assert excluded == [Excluded(View(2, (0, 1)), (), True)]
    assert net.eps[2].incarnation == 1
    net.do(2, "tick", 0.0)
    net.do(2, "tick", 1.0)  # resends its Join: the group lets it in
    net.run()
    assert all(net.eps[p].view == View(3, (0, 1, 2)) for p in range(3))
    assert net.eps[2].joined


def test_a_minority_does_not_install_a_view() -> None:
    net = group(3)
    net.down |= {1, 2}
    net.do(0, "suspect", 1)
    net.do(0, "suspect", 2)
    net.run()
    assert net.eps[0].view == View(1, (0, 1, 2))
    assert net.views(0) == []


def test_coordinator_crash_mid_flush_starts_another() -> None:
    net = group(5)
    net.do(4, "broadcast", "m")
    net.queue = [(to, d) for to, d in net.queue if to == 2]
    net.run()
    net.down.add(4)
    net.do(0, "suspect", 4)  # P0 sends Prepare to 1, 2 and 3, then dies
    net.down.add(0)
    net.run()  # the promises reach nobody: the others stay frozen
    assert all(net.eps[p].flushing for p in (1, 2, 3))
    for p in (1, 2, 3):
        net.do(p, "suspect", 0)
        net.do(p, "suspect", 4)
    net.run()
    assert all(net.eps[p].view == View(2, (1, 2, 3)) for p in (1, 2, 3))
    assert net.delivered(1) == net.delivered(2) == net.delivered(3) == [MessageId(4, 1)]


def test_two_of_four_is_not_a_majority() -> None:
    net = group(4)
    net.down |= {0, 3}
    for p in (1, 2):
        net.do(p, "suspect", 0)
        net.do(p, "suspect", 3)
    net.run()
    assert net.eps[1].view == View(1, (0, 1, 2, 3))


def test_leave() -> None:
    net = group(3)
    net.do(2, "leave")
    net.run()
    assert [type(a) for a in net.log[2]] == [Excluded]
    assert net.eps[0].view == View(2, (0, 1))
    with pytest.raises(LocalError):
        net.eps[2].broadcast("x")
    gone = net.eps[2].status()
    assert gone.summary() == "P2#0 has left the group" and gone.data()["view"] is None


@pytest.mark.parametrize("protocol", ["cbcast", "sequencer", "skeen", "lamport", "tagged"])
def test_random_schedules_with_crashes_keep_virtual_synchrony(protocol: str) -> None:
    for seed in range(max(20, SEEDS)):
        rng = random.Random(seed)
        net = group(4, protocol)
        net.rng = rng
        victim = rng.randrange(4)
        for step in range(12):
            p = rng.randrange(4)
            if p not in net.down:
                net.do(p, "broadcast", f"{p}-{step}")
            for _ in range(rng.randrange(4)):
                if net.queue:
                    to, data = net.queue.pop(rng.randrange(len(net.queue)))
                    if to not in net.down:
                        net.apply(to, net.eps[to].receive(decode(data)))
            if step == 5:
                net.down.add(victim)
                for q in range(4):
                    if q != victim:
                        net.do(q, "suspect", victim)
        net.run(shuffle=True)
        alive = [q for q in range(4) if q != victim]
        for q in alive:
            assert net.eps[q].view is not None and victim not in net.eps[q].view.members
        sets = [set(net.delivered(q)) for q in alive]
        assert sets[0] == sets[1] == sets[2], seed
        if protocol != "cbcast" and protocol != "tagged":
            assert net.delivered(alive[0]) == net.delivered(alive[1]), seed
        # every message a survivor sent was delivered by all survivors
        for q in alive:
            sent = net.eps[q].sent_count
            assert {MessageId(q, k) for k in range(1, sent + 1)} <= sets[0], seed


def test_snapshot_round_trip_mid_flush() -> None:
    net = group(3, "skeen")
    net.do(0, "broadcast", "a")
    net.run()
    net.do(0, "suspect", 2)
    for p in range(3):
        ep = net.eps[p]
        again = restore_endpoint(ep.snapshot())
        assert again.snapshot() == ep.snapshot()
        net.eps[p] = again
    net.do(1, "suspect", 2)
    net.down.add(2)
    net.run()
    assert net.eps[0].view == View(2, (0, 1))


def test_checkpoints_of_an_earlier_release_restore_exactly() -> None:
    earlier = json.loads(EARLIER.read_text())
    assert len(earlier) == 27
    for data in earlier:
        again = restore_endpoint(data)
        assert same_data(again.snapshot(), data)
        again.tick(data.get("now") or 0.0)  # and it runs


def test_an_excluded_process_checkpoints_and_restores() -> None:
    """Once out (it left, or it waits to rejoin), a process keeps nothing of its old
    view: its snapshot restores exactly, and the restored joiner gets back in."""
    net = group(3)
    net.do(1, "broadcast", "x")
    net.do(2, "leave")
    net.run()
    assert net.eps[2].view is None and net.eps[2].snapshot()["bases"] == []
    restore_endpoint(net.eps[2].snapshot())
    net = group(3)
    for p in (0, 1):
        net.do(p, "suspect", 2)
    net.down.add(2)
    net.run()  # views 2 without P2; the Commit to P2 is lost
    net.down.discard(2)
    net.do(2, "broadcast", "late")  # stale: the others tell P2 it is out
    for _ in range(10):  # until P2 gets that Commit (and asks to join again)
        if any(isinstance(a, Excluded) for a in net.log[2]):
            break
        net.run(limit=1)
    assert net.eps[2].view is None and net.eps[2].incarnation == 1
    again = restore_endpoint(net.eps[2].snapshot())
    assert same_data(again.snapshot(), net.eps[2].snapshot())
    net.eps[2] = again
    net.run()
    assert all(net.eps[p].view == View(3, (0, 1, 2)) for p in range(3))


def test_a_blocked_minority_says_that_it_waits_for_a_majority() -> None:
    """Two of four are gone: the survivors install nothing, and their status says why
    (and since when, in the host's time: the first tick that found them waiting)."""
    net = group(4)
    net.down |= {0, 3}
    for p in (1, 2):
        net.do(p, "suspect", 0)
        net.do(p, "suspect", 3)
    net.run()
    one, two = net.eps[1].status(), net.eps[2].status()
    assert (one.view, one.coordinator, one.suspects, one.staying) == (
        View(1, (0, 1, 2, 3)),
        1,
        (0, 3),
        (1, 2),
    )
    assert one.waiting_for_majority and two.waiting_for_majority and two.coordinator == 1
    # P1 opened a ballot when only P0 was suspected: frozen in it, it cannot open another
    assert (one.flush, one.round, one.waiting_since) == (Freeze.PROMISED, Round.PREPARE, None)
    net.do(1, "tick", 5.0)
    net.do(1, "tick", 6.5)  # it asks the suspected whether they went on: still waiting
    assert net.eps[1].status().waiting_since == 5.0
    assert net.eps[1].status().summary() == (
        "P1#0 in view 1 [0, 1, 2, 3]; coordinator P1; frozen by a flush (promised), "
        "coordinating (prepare); suspects P0, P3; WAITING FOR A MAJORITY since t=5: "
        "2 of 4 members would stay"
    )
    # the host's log gives the wait as a duration, not as a time on the host's clock
    assert "WAITING FOR A MAJORITY for 7.5 s: 2 of" in net.eps[1].status().summary(12.5)
    assert "; no flush" in group(3).eps[0].status().summary()
    assert not net.eps[2].status().waiting_since  # it has not ticked yet
    healthy = group(3).eps[0].status()
    assert not healthy.waiting_for_majority and healthy.staying == (0, 1, 2)


def test_a_minority_that_learns_it_is_out_stops_waiting() -> None:
    net = group(3)
    net.do(0, "suspect", 1)  # P0 is cut off: alone it waits for a majority
    net.do(0, "suspect", 2)
    net.do(0, "tick", 1.0)
    assert net.eps[0].status().waiting_since == 1.0
    net.queue = []
    net.down.add(0)
    for p in (1, 2):
        net.do(p, "suspect", 0)
    net.run()
    net.down.discard(0)
    net.do(0, "tick", 2.0)  # healed: it asks the suspected, learns it is out, rejoins
    net.run()
    status = net.eps[0].status()
    assert status.view == View(3, (0, 1, 2)) and status.incarnation == 1
    assert (status.waiting_for_majority, status.waiting_since) == (False, None)


def test_status_shows_the_flush_the_changes_and_what_is_held() -> None:
    net = group(3, size=5)
    net.do(0, "suspect", 2)  # P0 coordinates: it promised its own ballot
    status = net.eps[0].status()
    assert (status.flush, status.round, status.staying) == (Freeze.PROMISED, Round.PREPARE, (0, 1))
    to_p1 = [(to, d) for to, d in net.queue if to == 1]
    net.queue = to_p1
    net.run(limit=1)  # P1 gets the Prepare: it promises too
    assert (net.eps[1].status().flush, net.eps[1].status().round) == (Freeze.PROMISED, Round.IDLE)
    net.eps[4] = Group(4, 5, "cbcast", contacts=[0])
    net.log[4] = []
    assert "is not in a view: it asks to join" in net.eps[4].status().summary()
    net.queue = []
    net.do(4, "join")
    net.run()  # the Join reaches P0: the next flush will let P4 in
    assert net.eps[0].status().joiners == (4,)
    net.eps[4].receive(GroupData(7, 0, 0, 0, None))  # a packet of a later view: held
    later = net.eps[4].status()
    assert (later.future, later.view, later.joined) == (1, None, False)
    data = json.loads(json.dumps(net.eps[0].status().data()))
    assert data["view"] == {"id": 1, "members": [0, 1, 2]} and data["flush"] == "promised"
    assert (
        data["round"] == "prepare" and data["joiners"] == [4] and data["incarnations"] == [0, 0, 0]
    )


def test_a_snapshot_that_queues_a_unicast_is_refused() -> None:
    """Only broadcasts wait for a view (a send to one member while none is ready is a
    LocalError), so a snapshot whose queue holds a unicast was not written by a Group."""
    joiner = Group(3, 4, "cbcast", contacts=[0])
    joiner.broadcast("early")
    data = joiner.snapshot()
    assert data["outbox"] == [["early", None]]
    assert same_data(restore_endpoint(data).snapshot(), data)
    with pytest.raises(LocalError, match="queues a unicast"):
        restore_endpoint({**data, "outbox": [["early", 1]]})


def test_bad_packets_are_remote_errors_and_change_nothing() -> None:
    net = group(3)
    ep = net.eps[0]
    before = ep.snapshot()
    for bad in (
        GroupData(1, 7, 0, 0, None),
        GroupData(1, 1, 2, 5, None),
        Prepare(1, 1, 1, 2, (0, 1)),
        Prepare(1, 1, 1, 1, (1, 0)),
        "junk",
    ):
        with pytest.raises(RemoteError):
            ep.receive(bad)
    assert ep.snapshot() == before


def test_unicast_inside_views_and_over_reliable() -> None:
    net = Net({p: Group(p, 3, "rst", members=range(3), reliable=True) for p in range(3)})
    net.do(0, "send", "to two", 2)
    net.run()
    assert net.delivered(2) == [MessageId(0, 1)]
    net.down.add(1)
    net.do(0, "suspect", 1)
    with pytest.raises(LocalError):
        net.eps[0].send("while flushing", 2)
    net.do(2, "suspect", 1)
    net.run()
    net.do(2, "send", "back", 0)
    net.run()
    assert net.delivered(0) == [MessageId(2, 1)]
    with pytest.raises(LocalError):
        net.eps[0].send("gone", 1)


def test_a_member_that_wrongly_suspects_the_coordinator_takes_over() -> None:
    net = group(3, "sequencer")
    net.do(1, "suspect", 0)  # only P1 thinks P0 died: P1 coordinates, P2 agrees
    net.run()  # P0 learns it was excluded and at once asks to join again
    for p in (1, 2):
        assert net.views(p) == [View(2, (1, 2)), View(3, (0, 1, 2))]
    assert [type(a) for a in net.log[0]] == [Excluded, ViewChange]
    assert net.eps[0].incarnation == 1 and net.eps[0].joined
    net.do(0, "broadcast", "back")
    net.run()
    assert all(net.delivered(p)[-1:] == [MessageId(0, 1)] for p in range(3))


@pytest.mark.parametrize("protocol", ["cbcast", "sequencer", "skeen"])
def test_lossy_network_with_retries(protocol: str) -> None:
    """20% of packets lost, control ones included: Reliable inside the view and the
    group's own retries (Prepare, Accept, Query, Join, StateTransfer) still finish."""
    for seed in range(SEEDS):
        rng = random.Random(seed)
        eps: dict[int, Any] = {
            p: Group(p, 5, protocol, members=range(4), reliable=True) for p in range(4)
        }
        net = Net(eps)
        now = 0.0
        joined = False
        for step in range(400):
            now += 0.25
            if step < 40 and step % 4 == 0:
                p = rng.randrange(3)
                if eps[p].joined and not eps[p].flushing:
                    net.do(p, "broadcast", f"{p}-{step}")
            if step == 20:
                net.down.add(3)
            if step == 40:
                for p in range(3):
                    net.do(p, "suspect", 3)
            if step == 60:
                eps[4] = Group(4, 5, protocol, contacts=[0, 1, 2], reliable=True)
                net.log[4] = []
                net.do(4, "join")
                joined = True
            queue, net.queue = net.queue, []
            for to, data in queue:
                if rng.random() < 0.2 or to in net.down or to not in eps:
                    continue
                net.apply(to, eps[to].receive(decode(data)))
            for p in list(eps):
                if p not in net.down:
                    net.do(p, "tick", now)
        assert joined
        alive = [0, 1, 2, 4]
        for p in alive:
            assert eps[p].view is not None and eps[p].view.members == (0, 1, 2, 4), (seed, p)
            assert eps[p].joined, (seed, p)
        sets = [set(net.delivered(p)) for p in (0, 1, 2)]
        assert sets[0] == sets[1] == sets[2], seed
        for p in (0, 1, 2):
            assert {MessageId(p, k) for k in range(1, eps[p].sent_count + 1)} <= sets[0], seed


def test_steady_traffic_keeps_the_flush_log_bounded() -> None:
    """Stability reports prune what every member has: the log does not grow with the run."""
    net = group(3, "sequencer")
    rng = random.Random(1)
    longest = 0
    for k in range(3000):
        net.do(k % 3, "broadcast", k)
        for _ in range(rng.randrange(4, 12)):
            if net.queue:
                to, data = net.queue.pop(rng.randrange(len(net.queue)))
                net.apply(to, net.eps[to].receive(decode(data)))
        longest = max(longest, *(net.eps[p].status().flush_log for p in range(3)))
    net.run()
    assert len(net.delivered(0)) == 3000
    assert longest < 200  # about stability_every x n plus what is in flight, not 3000
    assert max(len(net.eps[p].snapshot()["log"]) for p in range(3)) < 100


def test_a_minority_learns_it_was_excluded_when_the_partition_heals() -> None:
    net = group(3)
    net.do(0, "suspect", 1)  # P0 is cut off: it suspects both others and freezes
    net.do(0, "suspect", 2)
    held = [(to, d) for to, d in net.queue if to != 0]  # its Prepare waits in the cut
    net.queue = []
    net.down.add(0)  # nothing reaches P0 either
    for p in (1, 2):
        net.do(p, "suspect", 0)
    net.run()  # the majority installs {1, 2}
    assert net.eps[1].view == View(2, (1, 2)) and net.eps[0].flushing
    net.down.discard(0)
    net.queue = held  # the partition heals: P0's stale Prepare reaches P2
    net.run()  # P2 tells P0 it was excluded; P0 rejoins
    assert [type(a) for a in net.log[0]] == [Excluded, ViewChange]
    assert all(net.eps[p].view == View(3, (0, 1, 2)) for p in range(3))
