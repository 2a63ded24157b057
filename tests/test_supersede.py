"""Control packets that a later one supersedes (``latest_key``): a reliable layer's
cumulative acknowledgement, a group member's Stability report.

A link writes, of the packets waiting for one peer, only the last of each key: the
steps of one busy turn send one acknowledgement and one report per peer, not one per
step. Dropping a control packet is always safe (the network may lose it); what the
key promises is that nothing waits for a timer because of it. Hypothesis checks
that promise: groups whose network only ever carries the latest control packet of
each key deliver everything, with no timer fired.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.core.actions import Transmit
from mailroom.core.codec import encode
from mailroom.core.messages import MessageId
from mailroom.core.wire import latest_key
from mailroom.net import Node, transport
from mailroom.net import frames as fr
from mailroom.net.transport import Link
from mailroom.protocols import ReliableAck, ReliablePacket
from mailroom.protocols.membership import Group, GroupData, Stability
from mailroom.protocols.membership.detector import Heartbeat
from mailroom.sim import Simulation

from .budgets import examples
from .net_support import KEY, listening_sockets, table_of
from .test_net_coalesce import _stack


def test_which_packets_have_a_latest_key() -> None:
    """Acks and reports are keyed by what makes a later one supersede them (the channel;
    the view and the sender); data and other control packets are not keyed."""
    assert latest_key(ReliableAck(1, 0, 5)) == latest_key(ReliableAck(1, 0, 9))
    assert latest_key(ReliableAck(1, 0, 5)) != latest_key(ReliableAck(2, 0, 5))
    assert latest_key(Stability(3, 1, (1, 2))) == latest_key(Stability(3, 1, (4, 2)))
    assert latest_key(Stability(3, 1, (1, 2))) != latest_key(Stability(4, 1, (1, 2)))
    assert latest_key(Stability(3, 1, (1, 2))) != latest_key(Stability(3, 2, (1, 2)))
    acked = GroupData(3, 1, 0, 0, ReliableAck(1, 0, 5))
    assert latest_key(acked) == latest_key(GroupData(3, 1, 0, 0, ReliableAck(1, 0, 7)))
    assert latest_key(acked) != latest_key(GroupData(4, 1, 0, 0, ReliableAck(1, 0, 7)))
    assert latest_key(ReliablePacket(1, 0, 1, 1, 0, "x")) is None
    assert latest_key(GroupData(3, 1, 1, 0, ReliablePacket(1, 0, 1, 1, 0, "x"))) is None
    assert latest_key(Heartbeat(1, 3)) is None


def test_a_link_writes_the_last_packet_of_each_key_in_order() -> None:
    socks = listening_sockets(2)

    async def main() -> tuple[list[Any], list[Any], int, int]:
        node = Node(_stack("cbcast", 0, 2), table_of(socks), KEY, listen=socks[0])
        link = Link(node.transport, 1)  # not connected: the outbox keeps what waits
        data = MessageId(0, 1)
        pushed = [
            (b"ack1", None, fr.CONTROL, "a"),
            (b"d1", data, fr.BROADCAST, None),
            (b"rep1", None, fr.CONTROL, "r"),
            (b"ack2", None, fr.CONTROL, "a"),
            (b"hb", None, fr.CONTROL, None),
            (b"rep2", None, fr.CONTROL, "r"),
            (b"ack3", None, fr.CONTROL, "a"),
        ]
        for packet, mid, carries, key in pushed:
            link.push(packet, mid, carries, key)
        taken = link.take()
        superseded = node.stats.superseded
        link.push(b"ack4", None, fr.CONTROL, "a")  # alone: written as it is
        alone = link.take()
        await node.close()
        return taken, alone, superseded, len(link.outbox)

    taken, alone, superseded, left = asyncio.run(main())
    for s in socks:
        s.close()
    assert [packet for packet, _, _ in taken] == [b"d1", b"hb", b"rep2", b"ack3"]
    assert superseded == 3 and left == 0
    assert alone == [(b"ack4", None, fr.CONTROL)]


def test_a_lazy_packet_is_encoded_only_if_it_is_written(monkeypatch: pytest.MonkeyPatch) -> None:
    """A step hands a lazy packet to its link as itself, not its bytes, and the link
    encodes it only when it writes it: the many acknowledgements a later one supersedes
    cost no encoding, and what is written is the latest one's bytes."""
    socks = listening_sockets(2)
    encoded: list[object] = []

    def counting(packet: object) -> bytes:
        encoded.append(packet)
        return encode(packet)

    monkeypatch.setattr(transport, "encode", counting)

    async def main() -> tuple[list[object], list[Any], list[Any]]:
        node = Node(_stack("cbcast", 0, 2), table_of(socks), KEY, listen=socks[0])
        acks = [ReliableAck(0, 1, k) for k in range(1, 6)]
        step = node.core.engine.run(
            [Transmit(1, acks[0], None, lazy=True), Transmit(1, Heartbeat(0, 1), None)],
            [],
            [],
            0,
            0,
        )
        datas = [send.packet for send in step.sends]
        node.transport.lazy_wait = 0.005
        link = Link(node.transport, 1)  # not connected: nothing is written by itself
        for ack in acks:
            link.push(ack, None, fr.CONTROL, latest_key(ack), lazy=True)
        early = link.take_lazy(-math.inf)  # not due yet: nothing taken
        due = link.take_lazy(math.inf)
        await node.close()
        return datas, early, due

    datas, early, due = asyncio.run(main())
    for s in socks:
        s.close()
    assert datas == [ReliableAck(0, 1, 1), encode(Heartbeat(0, 1))]
    assert early == [] and encoded == [ReliableAck(0, 1, 5)]  # the four superseded: never
    assert due == [(encode(ReliableAck(0, 1, 5)), None, fr.CONTROL)]


def test_a_full_outbox_drops_its_oldest_and_still_supersedes() -> None:
    socks = listening_sockets(2)

    async def main() -> list[bytes]:
        node = Node(_stack("cbcast", 0, 2), table_of(socks), KEY, listen=socks[0], outbox_limit=3)
        link = Link(node.transport, 1)
        for k in range(6):
            link.push(f"ack{k}".encode(), None, fr.CONTROL, "a")
        link.push(b"hb", None, fr.CONTROL, None)
        taken = [packet for packet, _, _ in link.take()]
        await node.close()
        return taken

    taken = asyncio.run(main())
    for s in socks:
        s.close()
    assert taken == [b"ack5", b"hb"]


def _superseding(sim: Simulation) -> None:
    """Drop every packet in flight that a later one, same way, same key, supersedes."""
    last: dict[tuple[int, int, Any], int] = {}
    for p in sorted(sim.in_flight.values(), key=lambda p: p.id):
        key = latest_key(p.packet)
        if key is not None:
            earlier = last.get((p.src, p.dst, key))
            if earlier is not None:
                sim.drop(earlier)
            last[(p.src, p.dst, key)] = p.id


def _latest_only(
    protocol: str, quorum: str, n: int, senders: list[int], send_now: Any, pick: Any
) -> list[list[str]]:
    """Safe groups over Reliable whose network carries only the latest packet of each key
    one way; ``send_now()`` says whether the next broadcast comes before the next arrival,
    ``pick(k)`` which of k packets in flight arrives. What each member delivered."""
    eps = [
        Group(p, n, protocol, members=range(n), safe=True, safe_quorum=quorum, reliable=True)
        for p in range(n)
    ]
    sim = Simulation(eps, adversarial=True)
    got = run_schedule(sim, senders, send_now, pick, _superseding)
    assert all(ep.status().waiting_safe == 0 for ep in eps)
    return got


def run_schedule(
    sim: Simulation, senders: list[int], send_now: Any, pick: Any, cut: Any
) -> list[list[str]]:
    """Broadcast "m0", "m1"... from ``senders`` in turn while ``send_now()``, else let the
    packet ``pick(k)`` of the k in flight arrive, calling ``cut(sim)`` before each
    arrival, until every message is sent and nothing is in flight; what each member
    delivered."""
    sent = 0
    for _ in range(600):
        if sent < len(senders) and (not sim.in_flight or send_now()):
            sim.broadcast(senders[sent], f"m{sent}")
            sent += 1
            continue
        cut(sim)
        if not sim.in_flight:
            if sent < len(senders):
                continue  # the network is empty: the next message is sent now
            break
        ids = sorted(sim.in_flight)
        sim.arrive(ids[pick(len(ids))])
    assert sent == len(senders) and not sim.in_flight
    return [[m.payload for m in got] for got in sim.delivered]


@pytest.mark.parametrize("quorum", ["all", "majority"])
@pytest.mark.parametrize("protocol", ["sequencer", "cbcast", "lamport"])
@settings(max_examples=examples(25), deadline=None)
@given(data=st.data())
def test_groups_that_get_only_the_latest_acks_and_reports_deliver_everything(
    protocol: str, quorum: str, data: st.DataObject
) -> None:
    """Safe groups over Reliable, whose network carries of the acks and reports queued
    one way only the latest of each key (as a link writes them), in any order Hypothesis
    chooses: every member delivers every message and nothing waits, with no timer
    fired (no retransmission, no report asked for again)."""
    n = data.draw(st.integers(3, 4))
    senders = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=6))
    got = _latest_only(
        protocol,
        quorum,
        n,
        senders,
        lambda: data.draw(st.booleans()),
        lambda k: data.draw(st.integers(0, k - 1)),
    )
    assert all(sorted(g) == sorted(f"m{k}" for k in range(len(senders))) for g in got), got
    if protocol != "cbcast":
        assert all(g == got[0] for g in got)  # total order


def test_a_key_on_data_packets_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    """Known-buggy: keying the reliable layer's data packets too (a later packet on the
    channel would supersede an earlier one) loses P1's first request to the sequencer,
    and the check above sees the message missing."""
    monkeypatch.setattr(
        ReliablePacket, "latest_key", lambda p: ("data", p.sender, p.dest), raising=False
    )
    got = _latest_only("sequencer", "all", 3, [1, 1], lambda: True, lambda k: 0)
    assert got != [["m0", "m1"]] * 3
    assert "m0" not in got[0]
