"""CBCAST batches: one packet carries k consecutive broadcasts with the first one's
stamp; receivers take it as the k packets arriving one after another."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import CBCAST, Deliver, LocalError, Reliable, RemoteError, Stack, Transmit
from mailroom import MessageId as Id
from mailroom.core import codec
from mailroom.core.validate import BATCH_LIMIT, MAX_COUNTER
from mailroom.core.wire import carried_message_id, carried_message_ids
from mailroom.protocols import CBCASTBatch, CBCASTPacket, ReliablePacket
from mailroom.sim import Simulation
from mailroom.testing import Scenario, scenarios
from tests.strategies import assert_restore_midway_changes_nothing, json_values


def delivered(actions: list) -> list[object]:
    return [a.message.payload for a in actions if isinstance(a, Deliver)]


def rejects(ep: CBCAST, packet: object, words: str) -> None:
    before = ep.snapshot()
    with pytest.raises(RemoteError, match=words):
        ep.receive(packet)
    assert ep.snapshot() == before


def test_a_batch_is_one_packet_stamped_with_its_first_message() -> None:
    p0, p1, p2 = (CBCAST(i, 3) for i in range(3))
    single = p0.broadcast("m")  # P0's first message
    p1.receive(single[0].packet)
    out = p1.broadcast_many(["a", "b", "c"])
    batch = CBCASTBatch(1, (1, 1, 0), ("a", "b", "c"))
    assert [(t.to, t.packet, t.message_id) for t in out if isinstance(t, Transmit)] == [
        (0, batch, Id(1, 1)),
        (2, batch, Id(1, 1)),
    ]
    assert delivered(out) == ["a", "b", "c"]
    assert p1.clock.entries == (1, 3, 0) and p1.sent_count == 3
    # P2 has not delivered P0's message: it holds the whole batch, as three packets
    assert p2.receive(batch) == [] and p2.buffered() == 3
    assert delivered(p2.receive(single[1].packet)) == ["m", "a", "b", "c"]
    # a retransmitted batch, or our own echo, is a duplicate
    assert p2.receive(batch) == [] and p2.duplicates == 1
    assert p1.receive(batch) == [] and p1.duplicates == 1
    # a batch of one is the single packet
    assert type(p1.broadcast_many(["d"])[0].packet) is CBCASTPacket
    assert p1.broadcast_many([]) == []


def test_a_batch_delivers_what_its_single_packets_deliver() -> None:
    batched, single = CBCAST(2, 3), CBCAST(2, 3)
    batch = CBCASTBatch(0, (5, 0, 0), ("e", "f", "g"))
    singles = [CBCASTPacket(0, (5 + i, 0, 0), p) for i, p in enumerate("efg")]
    for ep in (batched, single):
        ep.receive(CBCASTPacket(0, (6, 0, 0), "f"))  # held: an overlap with the batch
    for i in range(1, 5):
        batched.receive(CBCASTPacket(0, (i, 0, 0), i))
        single.receive(CBCASTPacket(0, (i, 0, 0), i))
    got = delivered(batched.receive(batch))
    want = [x for p in singles for x in delivered(single.receive(p))]
    assert got == want == ["e", "f", "g"]
    # the same state; duplicates count packets: the single "f" was one, the batch is not
    assert {**batched.snapshot(), "duplicates": 1} == single.snapshot()


def test_a_held_batch_is_one_run_that_releases_as_its_single_packets_would() -> None:
    """A batch that must wait is held as one run, yet says, keeps and releases what its
    single packets would: the same pending messages and snapshot while it waits, and,
    once it is released, an older message that its second one releases goes before its
    third (arrival order, chosen again after every delivery)."""
    m0 = CBCASTPacket(0, (1, 0, 0, 0), "m0")
    batch = CBCASTBatch(1, (1, 1, 0, 0), ("a", "b", "c"))
    singles = [CBCASTPacket(1, (1, 1 + i, 0, 0), x) for i, x in enumerate("abc")]
    z = CBCASTPacket(2, (1, 2, 1, 0), "z")  # P2 had P0's m0 and P1's a and b
    runs, ones = CBCAST(3, 4), CBCAST(3, 4)
    assert runs.receive(z) == [] and runs.receive(batch) == []
    assert ones.receive(z) == [] and all(ones.receive(p) == [] for p in singles)
    assert runs.buffered() == ones.buffered() == 4
    held = runs._buffer._streams[1]  # P1's three messages: one item, one arrival
    assert sorted(held) == [0, 1, 2] and len({id(item) for item in held.values()}) == 1
    assert runs.pending() == ones.pending()
    assert runs.snapshot() == ones.snapshot()
    assert delivered(runs.receive(m0)) == delivered(ones.receive(m0)) == ["m0", "a", "b", "z", "c"]
    assert runs.snapshot() == ones.snapshot() and runs.buffered() == 0


def test_malformed_batches_are_refused_and_change_nothing() -> None:
    p1 = CBCAST(1, 3)
    p1.receive(CBCASTPacket(2, (0, 0, 2), "held"))
    rejects(p1, CBCASTBatch(0, (1, 0, 0), ()), "1..4096")
    rejects(p1, CBCASTBatch(0, (1, 0, 0), tuple(range(BATCH_LIMIT + 1))), "1..4096")
    rejects(p1, CBCASTBatch(0, (1, 0, 0), "ab"), "must be a sequence")
    rejects(p1, CBCASTBatch(0, (0, 0, 0), ("a", "b")), "at least 1")
    rejects(p1, CBCASTBatch(0, (MAX_COUNTER, 0, 0), ("a", "b")), "overflows")
    rejects(p1, CBCASTBatch(0, (1, 1, 0), ("a", "b")), "claims P1 broadcast")
    rejects(p1, CBCASTBatch(1, (0, 1, 0), ("a", "b")), "claims P1 broadcast")
    rejects(p1, CBCASTBatch(3, (1, 0, 0), ("a", "b")), "not a process")
    rejects(p1, CBCASTBatch(0, (1, 0), ("a", "b")), "2 entries, expected 3")
    rejects(p1, CBCASTBatch(0, (1, 0, 0), ("a", {1: 2})), "payload 1")
    assert p1.buffered() == 1


def test_a_held_batch_survives_snapshot_and_restore() -> None:
    p2 = CBCAST(2, 3)
    p2.receive(CBCASTBatch(1, (1, 1, 0), ("a", [1], None)))
    data = json.loads(json.dumps(p2.snapshot()))
    again = CBCAST.restore(data)
    assert again.snapshot() == p2.snapshot() and again.buffered() == 3
    assert delivered(again.receive(CBCASTPacket(0, (1, 0, 0), "z"))) == ["z", "a", [1], None]
    data["buffer"][1]["vc"] = [0, 1, 0]
    with pytest.raises(LocalError):
        CBCAST.restore(data)


def test_batch_packets_name_their_messages() -> None:
    batch = CBCASTBatch(2, (0, 4, 7), ("a", "b"))
    assert carried_message_id(batch) == Id(2, 7)
    assert carried_message_ids(batch) == (Id(2, 7), Id(2, 8))
    with pytest.raises(RemoteError, match="names no well-formed"):
        carried_message_ids(CBCASTBatch(0, (1,), 5))


@given(
    st.integers(0, 4),
    st.lists(st.integers(0, 2**40), min_size=5, max_size=5),
    st.lists(json_values, min_size=1, max_size=5),
)
def test_batch_packets_round_trip_through_the_codec(
    sender: int, vc: list[int], payloads: list[object]
) -> None:
    packet = CBCASTBatch(sender, tuple(vc), tuple(payloads))
    assert codec.decode(codec.encode(packet)) == packet
    carried = ReliablePacket(0, 1, 1, 1, 0, packet)
    assert codec.decode(codec.encode(carried)) == carried


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), min_size=1, max_size=6))
def test_batches_deliver_what_single_broadcasts_deliver(ops: list[tuple[int, int]]) -> None:
    """Batched and one broadcast per payload, packets arriving oldest first: the same."""
    runs = []
    for batched in (True, False):
        sim = Simulation([CBCAST(p, 3) for p in range(3)], adversarial=True)
        for k, (pid, size) in enumerate(ops):
            payloads = [f"m{k}.{i}" for i in range(size)]
            if batched:
                sim.broadcast_many(pid, payloads)
            else:
                for payload in payloads:
                    sim.broadcast(pid, payload)
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))
        runs.append([[m.payload for m in sim.delivered[p]] for p in range(3)])
    assert runs[0] == runs[1]
    assert all(len(d) == sum(size for _, size in ops) for d in runs[0])


@given(scenarios(mode=("broadcast", "batch")), st.data())
def test_restoring_midway_with_batches_changes_nothing(s: Scenario, data: st.DataObject) -> None:
    assert_restore_midway_changes_nothing(CBCAST, s, data)


def test_over_reliable_a_batch_is_one_packet_per_peer() -> None:
    ep = Stack(Reliable(0, 3), CBCAST(0, 3))
    sent = [a for a in ep.broadcast_many(["a", "b", "c"]) if isinstance(a, Transmit)]
    assert len(sent) == 2 and all(type(t.packet.payload) is CBCASTBatch for t in sent)
