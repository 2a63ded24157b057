"""Lazy packets (``Transmit.lazy``): control packets nothing waits on soon, whose write a
host may hold a moment so that the next packet for the same peer carries them.

A reliable layer's acknowledgement is lazy (only the sender's memory and window wait
on it, and the next data packet carries the same ack) until half the sender's window
waits on it (then it is urgent). Under safe delivery by a majority, a member waits on
the reports of the first ``majority - 1`` other members of the view; under the
Sequencer every member counts the sequencer as holding what it delivered (it
delivered it first), so nobody waits on the sequencer's reports and the others wait
on the first ``majority - 2`` others. A report to a member that does not wait on its
sender is lazy; under "all" every report but the sequencer's is on the path, and a
plain group's periodic report (for pruning) is lazy. The promise is checked as
strongly as it can be: groups whose network never carries a lazy packet at all still
deliver everything, with no timer fired. Marking one report too many lazy is caught.
On real sockets, a member that never sends data writes its lazy packets rarely, and a
member whose report partner is gone still delivers, by the others' lazy reports.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.core.actions import Transmit
from mailroom.net import PeerTable
from mailroom.net.membership import group_endpoint
from mailroom.protocols import Reliable, ReliableAck
from mailroom.protocols.membership import Group, Stability
from mailroom.protocols.membership.view import InstalledView
from mailroom.replicated import AsyncReplica, ReplCounter
from mailroom.sim import Simulation

from .budgets import examples
from .net_support import KEY, listening_sockets
from .test_supersede import run_schedule


def _reports(group: Group) -> dict[int, bool]:
    """To whom ``group``'s report goes, and whether lazily."""
    installed = group.installed
    assert installed is not None
    return {t.to: t.lazy for t in installed.report() if isinstance(t, Transmit)}


def _lazy_marks(n: int, quorum: str, protocol: str) -> dict[int, list[int]]:
    """To whom each member of a fresh safe group of ``n`` sends its reports lazily."""
    groups = [
        Group(p, n, protocol, members=range(n), safe=True, safe_quorum=quorum) for p in range(n)
    ]
    return {g.pid: sorted(q for q, z in _reports(g).items() if z) for g in groups}


def test_which_reports_are_lazy() -> None:
    """CBCAST, n = 3 by majority: P1 and P2 wait on P0's reports, P0 on P1's; n = 5: each
    waits on the first two others. Under "all" no report is lazy."""

    def lazy(n: int, quorum: str) -> dict[int, list[int]]:
        return _lazy_marks(n, quorum, "cbcast")

    assert lazy(3, "majority") == {0: [], 1: [2], 2: [0, 1]}
    assert lazy(5, "majority") == {0: [], 1: [], 2: [3, 4], 3: [0, 1, 2, 4], 4: [0, 1, 2, 3]}
    assert lazy(3, "all") == {0: [], 1: [], 2: []}
    assert lazy(5, "all") == {p: [] for p in range(5)}


def test_under_a_sequencer_nobody_waits_on_its_reports() -> None:
    """The sequencer holds whatever a member delivered (it numbered it first), so every
    member counts it without its reports, which are all lazy. n = 3 by majority: P0
    waits on P1 and the others on nobody; n = 5: P0 on P1 and P2, the others on the
    sequencer and the first other of P1, P2; under "all", on every other but P0."""

    def lazy(n: int, quorum: str) -> dict[int, list[int]]:
        return _lazy_marks(n, quorum, "sequencer")

    assert lazy(3, "majority") == {0: [1, 2], 1: [2], 2: [0, 1]}
    assert lazy(5, "majority") == {
        0: [1, 2, 3, 4],
        1: [],
        2: [3, 4],
        3: [0, 1, 2, 4],
        4: [0, 1, 2, 3],
    }
    assert lazy(3, "all") == {0: [1, 2], 1: [], 2: []}
    assert lazy(5, "all") == {0: [1, 2, 3, 4], 1: [], 2: [], 3: [], 4: []}


def test_a_restored_member_marks_the_same_reports_lazy() -> None:
    """The marks follow from the view and ``safe_quorum``, so a restore makes them again."""
    g = Group(2, 3, "sequencer", members=range(3), safe=True, safe_quorum="majority")
    back = Group.restore(g.snapshot())
    assert _reports(back) == _reports(g) == {0: True, 1: True}


def test_acknowledgements_and_a_plain_groups_reports_are_lazy() -> None:
    """A reliable layer's ack, and the report a group without safe delivery sends every
    ``stability_every`` deliveries (only pruning waits on it), are lazy; data is not."""
    a, b = Reliable(0, 2), Reliable(1, 2)
    [sent] = a.send("x", to=1)
    assert isinstance(sent, Transmit) and not sent.lazy
    acks = [t for t in b.receive(sent.packet) if isinstance(t, Transmit)]
    assert [type(t.packet) for t in acks] == [ReliableAck] and acks[0].lazy
    eps = [Group(p, 3, "cbcast", members=range(3), stability_every=1) for p in range(3)]
    sim = Simulation(eps)
    seen: list[Transmit] = []
    sim.on_transmit = lambda _sim, _pid, t: seen.append(t)
    sim.broadcast(0, "m")
    sim.run()
    reports = [t for t in seen if isinstance(t.packet, Stability)]
    assert reports and all(t.lazy for t in reports)
    assert all(not t.lazy for t in seen if t.message_id is not None)


def _without_lazy(
    protocol: str, quorum: str, n: int, senders: list[int], send_now: Any, pick: Any
) -> tuple[list[list[str]], list[Group]]:
    """Safe groups over Reliable whose network never carries a lazy packet (each is cut
    as it is sent), in the order ``pick`` chooses; what each member delivered."""
    eps = [
        Group(p, n, protocol, members=range(n), safe=True, safe_quorum=quorum, reliable=True)
        for p in range(n)
    ]
    lazy: set[tuple[int, int, int]] = set()
    kept: list[object] = []  # the lazy packets themselves, so that no id is reused

    def note(_sim: Simulation, pid: int, t: Transmit) -> None:
        if t.lazy:
            lazy.add((pid, t.to, id(t.packet)))
            kept.append(t.packet)

    def cut(sim: Simulation) -> None:
        for k, p in list(sim.in_flight.items()):
            if (p.src, p.dst, id(p.packet)) in lazy:
                sim.drop(k)

    sim = Simulation(eps, adversarial=True, on_transmit=note)
    return run_schedule(sim, senders, send_now, pick, cut), eps


@pytest.mark.parametrize("quorum", ["all", "majority"])
@pytest.mark.parametrize("protocol", ["sequencer", "cbcast", "lamport"])
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_groups_that_never_get_a_lazy_packet_deliver_everything(
    protocol: str, quorum: str, data: st.DataObject
) -> None:
    """No delivery waits on a lazy packet: with every one of them lost, in any order
    Hypothesis chooses, every member delivers every message and holds nothing, with no
    timer fired (no retransmission, no report asked for again)."""
    n = data.draw(st.integers(3, 5))
    senders = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6))
    got, eps = _without_lazy(
        protocol,
        quorum,
        n,
        senders,
        lambda: data.draw(st.booleans()),
        lambda k: data.draw(st.integers(0, k - 1)),
    )
    assert all(sorted(g) == sorted(f"m{k}" for k in range(len(senders))) for g in got), got
    assert all(ep.status().waiting_safe == 0 for ep in eps)
    if protocol != "cbcast":
        assert all(g == got[0] for g in got)  # total order


def test_one_lazy_report_too_many_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known-buggy: P1 marks its report to P0 lazy too, though P0 waits on P1 alone (its
    first partner at n = 3). Without lazy packets P0 then never delivers P1's message."""
    mark = InstalledView.quorum

    def too_lazy(self: InstalledView, needed: int | None) -> None:
        mark(self, needed)
        if self.pid == 1:
            self.lazy_to = self.lazy_to | {0}

    monkeypatch.setattr(InstalledView, "quorum", too_lazy)
    got, eps = _without_lazy("sequencer", "majority", 3, [1], lambda: True, lambda k: 0)
    assert got[1] == got[2] == ["m0"]
    assert got[0] == [] and eps[0].status().waiting_safe == 1


# -- real sockets ---------------------------------------------------------------------------


def _members(socks: list[Any], suspect_after: float, **node: Any) -> list[AsyncReplica]:
    table = PeerTable.of({p: f"127.0.0.1:{s.getsockname()[1]}" for p, s in enumerate(socks)})

    def member(p: int) -> AsyncReplica:
        group = group_endpoint(
            "sequencer",
            p,
            3,
            members=range(3),
            safe=True,
            safe_quorum="majority",
            heartbeat=suspect_after / 4,
            suspect_after=suspect_after,
        )
        return AsyncReplica(ReplCounter(), group, table, KEY, safe=True, listen=socks[p], **node)

    return [member(p) for p in range(3)]


@pytest.mark.parametrize(
    "node",
    [{"lazy_wait": 3600.0}, {"lazy_alone": 3600.0}],
    ids=["held-an-hour", "alone-after-an-hour"],
)
def test_a_member_that_sends_no_data_writes_its_lazy_packets_rarely(node: dict[str, float]) -> None:
    """Three replicated counters, calls at P1 only: P2 sends nothing a delivery waits on
    (no calls, no report anyone waits on), so it writes only its first frames, its
    heartbeats and an urgent ack per half window, while every call completes: with a
    lazy wait longer than the run, and with lazy packets due at the default
    ``lazy_wait`` but going alone only after an hour (``lazy_alone``): P2 has no frame
    for them to ride, while P1's ride its requests to the sequencer."""
    socks = listening_sockets(3)

    async def main() -> tuple[list[int], int]:
        rs = _members(socks, 40.0, **node)
        for r in rs:
            await r.start()
        try:
            await asyncio.wait_for(asyncio.gather(*(r.wait_joined() for r in rs)), 30)
            before = rs[2].node.stats.data_frames_out
            results = [await asyncio.wait_for(rs[1].call.add(1), 30) for _ in range(100)]
            return results, rs[2].node.stats.data_frames_out - before
        finally:
            for r in rs:
                await r.close()

    results, frames = asyncio.run(main())
    assert results == list(range(1, 101))
    # against one frame per lazy_wait when lazy_alone is lazy_wait (59 in this run)
    assert frames <= 10


def test_a_member_whose_partner_is_gone_delivers_by_the_lazy_reports() -> None:
    """P0 waits on P1's reports; with P1 gone (and too short a run to suspect it) P0's
    calls still complete, by P2's lazy reports, a lazy wait later."""
    socks = listening_sockets(3)

    async def main() -> list[int]:
        rs = _members(socks, 60.0, lazy_wait=0.01)
        for r in rs:
            await r.start()
        try:
            await asyncio.wait_for(asyncio.gather(*(r.wait_joined() for r in rs)), 30)
            await rs[1].close()
            return [await asyncio.wait_for(rs[0].call.add(1), 30) for _ in range(20)]
        finally:
            for r in (rs[0], rs[2]):
                await r.close()

    assert asyncio.run(main()) == list(range(1, 21))


def test_an_ack_is_urgent_once_half_the_window_waits_on_it() -> None:
    """A host may hold a lazy ack for a while; so that the sender's window never closes
    on held acks, the ack that finds half the window (4 of 8 here) received since the
    receiver last told the sender at once is not lazy. A data packet back tells it too."""
    a, b = Reliable(0, 2, window=8), Reliable(1, 2, window=8)

    def ack_laziness(count: int) -> list[bool]:
        out = []
        for k in range(count):
            [sent] = a.send(f"m{k}", to=1)
            assert isinstance(sent, Transmit)
            [ack] = [t for t in b.receive(sent.packet) if isinstance(t, Transmit)]
            out.append(ack.lazy)
            a.receive(ack.packet)
        return out

    assert ack_laziness(8) == [True, True, True, False, True, True, True, False]
    [back] = b.send("reply", to=0)  # carries ack 8: told
    assert isinstance(back, Transmit) and back.packet.ack == 8
    assert ack_laziness(5) == [True, True, True, False, True]
