"""Sequencer batches: one request and one order packet carry many messages, with the
deliveries of one broadcast each; malformed batches are refused with nothing changed."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import Deliver, LocalError, Reliable, RemoteError, Sequencer, Stack, Transmit
from mailroom import MessageId as Id
from mailroom.core import codec
from mailroom.core.validate import MAX_COUNTER
from mailroom.core.wire import carried_message_id, carried_message_ids
from mailroom.protocols import ReliablePacket
from mailroom.protocols.total import (
    SequencerOrder,
    SequencerOrderBatch,
    SequencerRequest,
    SequencerRequestBatch,
)
from mailroom.protocols.total.sequencer import BATCH_LIMIT
from mailroom.sim import Simulation
from mailroom.testing import Scenario, scenarios
from tests.strategies import assert_restore_midway_changes_nothing, json_values


def delivered(actions: list) -> list[object]:
    return [a.message.payload for a in actions if isinstance(a, Deliver)]


def packets(actions: list) -> list[tuple[int, object]]:
    return [(a.to, a.packet) for a in actions if isinstance(a, Transmit)]


def rejects(ep: Sequencer, packet: object, words: str) -> None:
    before = ep.snapshot()
    with pytest.raises(RemoteError, match=words):
        ep.receive(packet)
    assert ep.snapshot() == before


def test_a_batch_is_one_request_numbered_as_one_range() -> None:
    p0, p1, p2 = (Sequencer(i, 3) for i in range(3))
    p0.broadcast("z")  # number 1
    out = p1.broadcast_many(["a", "b", "c"])
    request = SequencerRequestBatch(1, 1, ("a", "b", "c"))
    assert out == [Transmit(0, request, Id(1, 1))] and p1.sent_count == 3
    out = p0.receive(request)
    order = SequencerOrderBatch(2, 1, 1, ("a", "b", "c"))
    assert packets(out) == [(1, order), (2, order)]
    assert [a.message_id for a in out if isinstance(a, Transmit)] == [Id(1, 1)] * 2
    assert delivered(out) == ["a", "b", "c"] and p0.numbered == p0.delivered == 4
    # P2 gets the batch before number 1: it holds the batch's three orders
    assert p2.receive(order) == [] and p2.buffered() == 3
    assert delivered(p2.receive(SequencerOrder(1, 0, 1, "z"))) == ["z", "a", "b", "c"]
    assert delivered(p1.receive(SequencerOrder(1, 0, 1, "z")) + p1.receive(order)) == [
        "z",
        "a",
        "b",
        "c",
    ]
    # a retransmitted batch is a duplicate, at the sequencer and at receivers
    assert p0.receive(request) == [] and p0.duplicates == 1
    assert p2.receive(order) == [] and p2.duplicates == 1


def test_the_sequencers_own_batch_is_numbered_and_delivered_at_once() -> None:
    p0 = Sequencer(0, 2)
    out = p0.broadcast_many(["x", "y"])
    assert packets(out) == [(1, SequencerOrderBatch(1, 0, 1, ("x", "y")))]
    assert delivered(out) == ["x", "y"]
    assert p0.broadcast_many([]) == [] and p0.sent_count == 2
    # a batch of one is the single packet
    assert packets(p0.broadcast_many(["w"])) == [(1, SequencerOrder(3, 0, 3, "w"))]


def test_a_long_batch_travels_in_packets_of_at_most_the_limit() -> None:
    p1 = Sequencer(1, 2)
    out = p1.broadcast_many(list(range(BATCH_LIMIT + 2)))
    sizes = [len(t.packet.payloads) for t in out if isinstance(t.packet, SequencerRequestBatch)]
    assert sizes == [BATCH_LIMIT, 2]
    assert [t.message_id for t in out] == [Id(1, 1), Id(1, BATCH_LIMIT + 1)]


def test_packet_payloads_travel_one_by_one() -> None:
    inner = SequencerRequest(1, 1, "x")
    out = Sequencer(1, 2).broadcast_many([inner, "y"])
    assert [type(t.packet) for t in out] == [SequencerRequest, SequencerRequest]


def test_partial_overlap_with_delivered_numbers_delivers_only_the_rest() -> None:
    p1 = Sequencer(1, 3)
    assert delivered(p1.receive(SequencerOrderBatch(1, 2, 1, ("a", "b")))) == ["a", "b"]
    # a (faulty-looking but consistent) batch 2..4: number 2 is delivered already
    assert delivered(p1.receive(SequencerOrderBatch(2, 2, 2, ("b", "c", "d")))) == ["c", "d"]
    assert p1.delivered == 4
    # held numbers inside a batch: delivered with it, not twice
    p1.receive(SequencerOrder(6, 2, 6, "f"))
    assert p1.buffered() == 1
    assert delivered(p1.receive(SequencerOrderBatch(5, 2, 5, ("e", "f", "g")))) == ["e", "f", "g"]
    assert p1.buffered() == 0 and p1.delivered == 7


def test_a_request_batch_partly_numbered_numbers_the_rest_as_runs() -> None:
    p0 = Sequencer(0, 2)
    p0.receive(SequencerRequest(1, 2, "b"))
    out = p0.receive(SequencerRequestBatch(1, 1, ("a", "b", "c")))
    assert packets(out) == [(1, SequencerOrder(2, 1, 1, "a")), (1, SequencerOrder(3, 1, 3, "c"))]
    assert delivered(out) == ["a", "c"]


def test_malformed_batches_are_refused_and_change_nothing() -> None:
    p0, p1 = Sequencer(0, 3), Sequencer(1, 3)
    p1.receive(SequencerOrder(3, 2, 3, "held"))
    rejects(p1, SequencerRequestBatch(2, 1, ("x", "y")), "sequencer is P0")
    rejects(p0, SequencerOrderBatch(1, 1, 1, ("x", "y")), "is the sequencer")
    rejects(p0, SequencerRequestBatch(0, 1, ("x", "y")), "own messages")
    rejects(p0, SequencerRequestBatch(2, 1, ()), "1..4096")
    rejects(p0, SequencerRequestBatch(2, 1, tuple(range(BATCH_LIMIT + 1))), "1..4096")
    rejects(p0, SequencerRequestBatch(2, 1, "xy"), "must be a sequence")
    rejects(p0, SequencerRequestBatch(2, MAX_COUNTER, ("x", "y")), "overflows")
    rejects(p0, SequencerRequestBatch(2, 0, ("x", "y")), "at least 1")
    rejects(p1, SequencerOrderBatch(MAX_COUNTER, 2, 1, ("x", "y")), "overflows")
    rejects(p1, SequencerOrderBatch(1, 2, 1, ("x", (1, 2))), "payload 1")
    rejects(p1, SequencerOrderBatch(1, 2, 1, ("x", SequencerOrder(1, 2, 1, "x"))), "packet")
    rejects(p1, SequencerOrderBatch(1, 1, 1, ("x", "y")), "never sent")
    rejects(p1, SequencerOrderBatch(1, 5, 1, ("x", "y")), "not a process")
    # number 3 is held as P2#3: a batch naming another message for it is impossible
    rejects(p1, SequencerOrderBatch(2, 2, 1, ("x", "y")), "already")
    assert p1.buffered() == 1


def test_a_held_batch_survives_snapshot_and_restore() -> None:
    p1 = Sequencer(1, 3)
    p1.receive(SequencerOrderBatch(2, 2, 1, ("a", {"b": [1]}, None)))
    data = json.loads(json.dumps(p1.snapshot()))
    again = Sequencer.restore(data)
    assert again.snapshot() == p1.snapshot() and again.buffered() == 3
    assert delivered(again.receive(SequencerOrder(1, 0, 1, "z"))) == ["z", "a", {"b": [1]}, None]
    data["held"][1]["number"] = 2
    with pytest.raises(LocalError):
        Sequencer.restore(data)


def test_batch_packets_name_their_messages() -> None:
    batch = SequencerOrderBatch(4, 2, 7, ("a", "b", "c"))
    assert carried_message_id(batch) == Id(2, 7)
    assert carried_message_ids(batch) == (Id(2, 7), Id(2, 8), Id(2, 9))
    wrapped = Stack(Reliable(1, 3), Sequencer(1, 3)).broadcast_many(["a", "b"])
    [t] = [a for a in wrapped if isinstance(a, Transmit)]
    assert carried_message_ids(t.packet) == (Id(1, 1), Id(1, 2)) and t.message_id == Id(1, 1)
    with pytest.raises(RemoteError, match="names no well-formed"):
        carried_message_ids(SequencerRequestBatch(1, 1, 5))


batches = st.lists(json_values, min_size=1, max_size=6).map(tuple)


@given(st.integers(1, 2**40), st.integers(0, 9), st.integers(1, 2**40), batches)
def test_batch_packets_round_trip_through_the_codec(
    first: int, origin: int, seq: int, payloads: tuple[object, ...]
) -> None:
    for packet in (
        SequencerOrderBatch(first, origin, seq, payloads),
        SequencerRequestBatch(origin, seq, payloads),
    ):
        data = codec.encode(packet)
        assert codec.decode(data) == packet
        carried = ReliablePacket(0, 1, 1, 1, 0, packet)  # carried over Reliable too
        assert codec.decode(codec.encode(carried)) == carried


@given(st.binary(max_size=60), st.integers(0, 40))
def test_corrupted_batch_bytes_are_refused_or_refused_by_the_endpoint(
    junk: bytes, cut: int
) -> None:
    """Bytes around a real batch packet: decode raises only RemoteError, and what
    decodes either is a fine step or is refused with the endpoint unchanged."""
    data = codec.encode(SequencerOrderBatch(2, 2, 1, ("a", "b", [1, 2])))
    for mutated in (data[:cut] + junk, data[: 3 + cut % 8] + junk + data[3 + cut % 8 :]):
        try:
            packet = codec.decode(mutated)
        except RemoteError:
            continue
        ep = Sequencer(1, 3)
        before = ep.snapshot()
        try:
            ep.receive(packet)
        except RemoteError:
            assert ep.snapshot() == before


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 5)), min_size=1, max_size=6))
def test_batches_deliver_what_single_broadcasts_deliver(ops: list[tuple[int, int]]) -> None:
    """The same workload, batched and one broadcast per payload, with packets arriving
    oldest first: every process delivers the same sequence either way."""
    runs = []
    for batched in (True, False):
        sim = Simulation([Sequencer(p, 3) for p in range(3)], adversarial=True)
        for k, (pid, size) in enumerate(ops):
            payloads = [f"m{k}.{i}" for i in range(size)]
            if batched:
                assert sim.broadcast_many(pid, payloads) == [
                    Id(pid, sim.endpoints[pid].sent_count - size + 1 + i) for i in range(size)
                ]
            else:
                for payload in payloads:
                    sim.broadcast(pid, payload)
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))
        runs.append([[m.payload for m in sim.delivered[p]] for p in range(3)])
    assert runs[0] == runs[1]
    assert all(len(d) == sum(size for _, size in ops) for d in runs[0])


@given(scenarios(mode=("broadcast", "batch")), st.data())
def test_restoring_midway_with_batches_in_flight_and_held_changes_nothing(
    s: Scenario, data: st.DataObject
) -> None:
    assert_restore_midway_changes_nothing(Sequencer, s, data)
