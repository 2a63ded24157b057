"""Batch forms of Fifo, Skeen, LamportTotalOrder, TaggedCausalBroadcast, RST and KS:
Hypothesis mixes single and batch sends (``broadcast_many``, ``send_many``) and chooses
the schedule; each protocol keeps its order promise and liveness, bare, over FIFO
channels and over a lossy network, and a known-buggy batch variant of each is caught."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import (
    CBCAST,
    KS,
    RST,
    Deliver,
    Fifo,
    LamportTotalOrder,
    Reliable,
    RemoteError,
    Skeen,
    Stack,
    TaggedCausalBroadcast,
    Transmit,
)
from mailroom.core import codec, wire_format
from mailroom.core.endpoint import Endpoint, capabilities
from mailroom.core.messages import MessageId
from mailroom.core.wire import carried_message_ids
from mailroom.protocols import (
    CBCASTPacket,
    FifoBatch,
    FifoPacket,
    KSBatch,
    RSTBatch,
    TaggedBatch,
)
from mailroom.protocols.total import (
    LamportBatch,
    SkeenBatch,
    SkeenFinalBatch,
    SkeenProposalBatch,
)
from mailroom.testing import (
    FifoBatchReversed,
    KSBatchFirstOnly,
    LamportBatchOneTick,
    RSTBatchOneMatrix,
    SkeenBatchLearnsFirst,
    TaggedBatchFirstTag,
    assert_properties,
    find_counterexample,
    replay,
    scenarios,
    stability_violations,
    tag_violations,
    unstable_violations,
)
from tests.strategies import assert_restore_midway_changes_nothing

SAFE = ("integrity", "total", "liveness")
ALL = ("integrity", "fifo", "causal", "total", "liveness")
FIFO = ("integrity", "fifo", "liveness")
CAUSAL = ("integrity", "fifo", "causal", "liveness")
BATCHED = ("broadcast", "batch")


def over(*lower: Callable[[int, int], Any]) -> Callable[[Callable[[int, int], Any]], Any]:
    def wrap(make: Callable[[int, int], Any]) -> Callable[[int, int], Endpoint]:
        def factory(pid: int, n: int) -> Endpoint:
            return Stack(*(f(pid, n) for f in lower), make(pid, n))  # type: ignore[return-value]

        return factory

    return wrap


def reliable(pid: int, n: int) -> Reliable:
    return Reliable(pid, n, rto=2.0, max_rto=8.0)


# -- the promises hold with batches in the schedule ---------------------------------------


@given(scenarios(mode=("unicast", "broadcast", "batch", "unicast_batch")))
def test_fifo_with_batches_is_fifo(s):
    assert_properties(Fifo, s, FIFO)


@given(scenarios(mode=("unicast", "batch", "unicast_batch"), drop=True))
def test_fifo_with_batches_over_reliable_survives_loss_and_duplication(s):
    assert_properties(over(reliable)(Fifo), s, FIFO)


@given(scenarios(mode=(*BATCHED, "multicast")))
def test_skeen_with_batches_is_total(s):
    assert_properties(Skeen, s, SAFE)


@given(scenarios(mode=BATCHED))
def test_skeen_with_batches_over_fifo_is_fifo_and_causal(s):
    assert_properties(over(Fifo)(Skeen), s, ALL)


@given(scenarios(mode=BATCHED, drop=True))
def test_skeen_with_batches_over_reliable_survives_loss_and_duplication(s):
    assert_properties(over(reliable)(Skeen), s, SAFE)


@given(scenarios(mode=BATCHED))
def test_lamport_with_batches_is_total_fifo_and_causal(s):
    assert_properties(LamportTotalOrder.stack, s, ALL)


@given(scenarios(mode=BATCHED, drop=True))
def test_lamport_with_batches_over_reliable_survives_loss_and_duplication(s):
    assert_properties(over(reliable, Fifo)(LamportTotalOrder), s, ALL)


def explicit(pid: int, n: int) -> TaggedCausalBroadcast:
    return TaggedCausalBroadcast(pid, n, consume="explicit")


@given(scenarios(mode=BATCHED))
def test_tagged_with_batches_is_causal_with_precise_tags_and_stability(s):
    run = assert_properties(explicit, s, CAUSAL)
    found = tag_violations(run.sim) + stability_violations(run.sim)
    assert [v.explain() for v in found + unstable_violations(run.sim)] == [], run.describe()


UNICAST = ("unicast", "unicast_batch")
#: The causal protocols with a batch form, and the sends their schedules mix.
CAUSAL_BATCHES = [
    pytest.param(TaggedCausalBroadcast, BATCHED, id="tagged-on-delivery"),
    pytest.param(explicit, BATCHED, id="tagged-explicit"),
    pytest.param(RST, UNICAST, id="rst"),
    pytest.param(KS, UNICAST, id="ks"),
    pytest.param(KS, (*UNICAST, "multicast"), id="ks-multicast"),
]


@pytest.mark.parametrize("make, mode", CAUSAL_BATCHES)
@given(data=st.data())
def test_causal_protocols_with_batches_are_causal(make, mode, data):
    assert_properties(make, data.draw(scenarios(mode=mode)), CAUSAL)


@pytest.mark.parametrize("make, mode", CAUSAL_BATCHES)
@given(data=st.data())
def test_causal_protocols_with_batches_over_reliable_survive_loss_and_duplication(make, mode, data):
    assert_properties(over(reliable)(make), data.draw(scenarios(mode=mode, drop=True)), CAUSAL)


@pytest.mark.parametrize("make, mode", CAUSAL_BATCHES)
@given(data=st.data())
def test_causal_protocols_with_batches_restore_midway_to_the_same_run(make, mode, data):
    """Batches leave single packets in the mail rooms: a snapshot taken mid-run (held
    messages, batches in flight) restores to exactly the same run."""
    s = data.draw(scenarios(mode=mode, max_ops=6, max_choices=40))
    assert_restore_midway_changes_nothing(make, s, data)


@given(scenarios(mode=UNICAST, n=(2, 5), max_ops=10, max_choices=120, crash=True))
def test_ks_and_rst_with_batches_deliver_the_same_in_the_same_order(s):
    """Batches are taken as their packets in a row, so KS and RST still agree at every
    step (crashes and restores from snapshots included)."""
    ks, rst = replay(KS, s), replay(RST, s)
    assert ks.steps == rst.steps
    assert ks.sim.delivered == rst.sim.delivered
    safe = ("integrity", "fifo", "causal")  # a crash may lose what was in flight
    assert ks.violations(safe) == [] == rst.violations(safe)


# -- and the property tests can fail -------------------------------------------------------


#: each known-buggy batch form: the properties it breaks, the search's budget, the
#: scenario modes, and the step that shows it used its batch form
BUGGY_BATCHES = [
    (FifoBatchReversed, ["fifo"], 1000, ("unicast", "unicast_batch"), "sends the batch"),
    (SkeenBatchLearnsFirst, ["total"], 2000, BATCHED, "broadcasts the batch"),
    (over(Fifo)(LamportBatchOneTick), ["fifo", "total"], 1000, BATCHED, "broadcasts the batch"),
    (TaggedBatchFirstTag, ["liveness"], 1000, BATCHED, "broadcasts the batch"),
    (RSTBatchOneMatrix, ["liveness"], 1000, UNICAST, "sends the batch"),
    (KSBatchFirstOnly, ["fifo", "causal"], 2000, UNICAST, "sends the batch"),
]


@pytest.mark.parametrize(
    "make, properties, budget, mode, shown",
    BUGGY_BATCHES,
    ids=[
        "fifo-reversed",
        "skeen-learns-first",
        "lamport-one-tick",
        "tagged-first-tag",
        "rst-one-matrix",
        "ks-first-only",
    ],
)
def test_a_known_buggy_batch_form_is_caught(make, properties, budget, mode, shown):
    run = find_counterexample(make, properties, max_examples=budget, mode=mode)
    assert run is not None, f"{make} was not caught"
    assert any(shown in step for step in run.steps)


@pytest.mark.parametrize("make", [RST, KS])
def test_a_batch_leaves_the_state_of_its_single_sends(make):
    """Some traffic first (held messages included), then three messages to P2 as one
    batch or as three sends: sender and receiver end in the same state."""

    def run(batch: bool) -> list[Any]:
        eps = [make(p, 3) for p in range(3)]
        late = eps[1].send("late", to=2)  # held back: what P0's batch will depend on
        for t in eps[1].send("b", to=0) + eps[0].send("c", to=1) + eps[0].send("c", to=2):
            eps[t.to].receive(t.packet)
        if batch:
            sends = eps[0].send_many(["d", "e", "f"], to=2)
        else:
            sends = [a for x in ("d", "e", "f") for a in eps[0].send(x, to=2)]
        got = [a for t in sends + late for a in eps[2].receive(t.packet)]
        assert [a.message.payload for a in got] == ["late", "d", "e", "f"]
        for t in eps[2].send("g", to=0):
            eps[0].receive(t.packet)
        return [ep.snapshot() for ep in eps]

    assert run(batch=True) == run(batch=False)


# -- the packets and the capability --------------------------------------------------------


def exchange(eps: list[Any], pid: int, payloads: list[str]) -> tuple[list[str], list[list[Any]]]:
    """``pid`` broadcasts ``payloads`` with ``broadcast_many``; every packet delivered
    oldest first. The packet classes sent and each process's deliveries."""
    queue = [(pid, a) for a in eps[pid].broadcast_many(payloads)]
    kinds: list[str] = []
    delivered: list[list[Any]] = [[] for _ in eps]
    while queue:
        at, action = queue.pop(0)
        if isinstance(action, Transmit):
            kinds.append(type(action.packet).__name__)
            queue += [(action.to, a) for a in eps[action.to].receive(action.packet)]
        elif isinstance(action, Deliver):
            delivered[at].append(action.message.payload)
    return kinds, delivered


def test_a_batch_travels_as_one_packet_per_destination_and_step():
    kinds, delivered = exchange([Skeen(p, 3) for p in range(3)], 0, ["a", "b", "c"])
    assert kinds == ["SkeenBatch"] * 2 + ["SkeenProposalBatch"] * 2 + ["SkeenFinalBatch"] * 2
    assert delivered == [["a", "b", "c"]] * 3
    kinds, delivered = exchange([Fifo(p, 3) for p in range(3)], 1, ["a", "b"])
    assert kinds == ["FifoBatch"] * 2 and delivered == [["a", "b"]] * 3
    # Lamport over FIFO: the batch and one acknowledgement from each process, not one each
    kinds, delivered = exchange([LamportTotalOrder.stack(p, 3) for p in range(3)], 2, list("abcd"))
    assert len(kinds) == 2 + 2 + 2 * 2 and delivered == [list("abcd")] * 3


def test_batch_forms_are_declared_capabilities():
    for ep in (
        Fifo(0, 3),
        Skeen(0, 3),
        LamportTotalOrder(0, 3),
        LamportTotalOrder.stack(0, 3),
        TaggedCausalBroadcast(0, 3),
    ):
        assert "broadcast_many" in capabilities(ep)
    assert "send_many" in capabilities(Fifo(0, 3))
    assert "send_many" in capabilities(RST(0, 3))
    assert "send_many" in capabilities(KS(0, 3))
    assert "send_many" in capabilities(Stack(Reliable(0, 3), RST(0, 3)))
    assert "broadcast_many" not in capabilities(Stack(Fifo(0, 3), Reliable(0, 3)))
    assert "send_many" in capabilities(Stack(Reliable(0, 3), Fifo(0, 3)))


@pytest.mark.parametrize(
    "make, packet",
    [
        (lambda: Skeen(1, 3), SkeenBatch(0, 1, 1, (0, 1, 2), ("a", "b"), 2)),  # index > seq
        (lambda: Skeen(1, 3), SkeenBatch(0, 1, 1, (0, 2), ("a",), 1)),  # not for P1
        (lambda: Skeen(1, 3), SkeenProposalBatch(0, 1, 1, (5, 6))),  # never sent
        (lambda: Skeen(1, 3), SkeenFinalBatch(0, 1, 1, (5, 0))),  # a zero number
        (lambda: LamportTotalOrder(1, 3), LamportBatch(1, 1, 1, ("a",))),  # its own
        (lambda: LamportTotalOrder(1, 3), LamportBatch(0, 1, 1, ())),  # empty
        (lambda: Fifo(1, 3), FifoBatch(0, 2, 1, 1, ("a",))),  # for P2
        (lambda: RST(1, 3), RSTBatch(0, 2, 1, ((0,) * 3,) * 3, ("a",))),  # for P2
        (lambda: RST(1, 3), RSTBatch(0, 1, 1, ((0, 0, 0), (0, 1, 0), (0, 0, 0)), ("a",))),
        (lambda: RST(1, 3), RSTBatch(0, 1, 1, ((0, 1, 0),) * 3, ("a", "b"))),  # seq 1 is 2nd
        (lambda: RST(1, 3), RSTBatch(0, 1, 1, ((0,) * 3,) * 2, ("a",))),  # wrong size
        (lambda: KS(1, 3), KSBatch(0, 2, 1, (), ("a",))),  # for P2
        (lambda: KS(1, 3), KSBatch(0, 1, 2, (6,), ("a",))),  # its own seq 2 as a dependency
        (lambda: KS(1, 3), KSBatch(0, 1, 1, (0, 3), ("a",))),  # P1's seq 1, never sent
        (lambda: KS(1, 3), KSBatch(0, 1, 1, (), ())),  # empty
        (lambda: TaggedCausalBroadcast(1, 3), TaggedBatch(0, (1, 1, 0), ("a",))),  # P1's future
        (lambda: TaggedCausalBroadcast(1, 3), TaggedBatch(0, (0, 0, 0), ("a",))),  # own entry 0
        (lambda: TaggedCausalBroadcast(1, 3), TaggedBatch(1, (1, 0, 0), ("a",))),  # never sent
        (lambda: TaggedCausalBroadcast(1, 3), TaggedBatch(0, (1, 0), ("a",))),  # wrong size
        (lambda: TaggedCausalBroadcast(1, 3), TaggedBatch(0, (1, 0, 0), ())),  # empty
    ],
)
def test_an_impossible_batch_is_a_remote_error_and_changes_nothing(make, packet):
    ep = make()
    before = ep.snapshot()
    with pytest.raises(RemoteError):
        ep.receive(packet)
    assert ep.snapshot() == before


def test_a_final_batch_with_one_impossible_entry_changes_nothing():
    eps = [Skeen(p, 2) for p in range(2)]
    sent = [a for a in eps[0].broadcast_many(["a", "b"]) if isinstance(a, Transmit)]
    replies = eps[1].receive(sent[0].packet)
    (proposals,) = [a.packet for a in replies if isinstance(a, Transmit)]
    assert type(proposals) is SkeenProposalBatch
    finals = [a.packet for a in eps[0].receive(proposals) if isinstance(a, Transmit)]
    good = finals[0]
    assert type(good) is SkeenFinalBatch
    before = eps[1].snapshot()
    bad = SkeenFinalBatch(0, 1, 1, (good.numbers[0], good.numbers[1] - 1))  # below its proposal
    with pytest.raises(RemoteError):
        eps[1].receive(bad)
    assert eps[1].snapshot() == before
    assert [a.message.payload for a in eps[1].receive(good)] == ["a", "b"]


# -- the inline fast paths refuse what the general checks refuse ------------------------------


@pytest.mark.parametrize(
    "packet",
    [
        CBCASTPacket(0, (True, 0, 0), "x"),  # a bool is not a counter
        CBCASTPacket(0, (1.0, 0, 0), "x"),
        CBCASTPacket(0, (1, -1, 0), "x"),
        CBCASTPacket(0, (1, "a", 0), "x"),
        CBCASTPacket(0, (1, 0, 1), "x"),  # claims a broadcast of P2's it never made
        CBCASTPacket(0, (1, 0), "x"),
        CBCASTPacket(True, (1, 0, 0), "x"),
        CBCASTPacket(3, (1, 0, 0), "x"),
    ],
)
def test_cbcast_refuses_a_malformed_next_packet(packet):
    ep = CBCAST(2, 3)
    before = ep.snapshot()
    with pytest.raises(RemoteError):
        ep.receive(packet)
    assert ep.snapshot() == before
    assert [a.message.payload for a in ep.receive(CBCASTPacket(0, (1, 0, 0), "y"))] == ["y"]


@pytest.mark.parametrize(
    "packet",
    [
        FifoPacket(0, True, 1, 1, "x"),  # a bool is not a pid
        FifoPacket(0, 2, 1, 1, "x"),  # for P2
        FifoPacket(0, 1, 1.0, 1, "x"),
        FifoPacket(0, 1, 0, 1, "x"),
        FifoPacket(0, 1, 1, True, "x"),
        FifoPacket(-1, 1, 1, 1, "x"),
        FifoPacket(0, 1, 2**64, 1, "x"),
    ],
)
def test_fifo_refuses_a_malformed_next_packet(packet):
    ep = Fifo(1, 3)
    before = ep.snapshot()
    with pytest.raises(RemoteError):
        ep.receive(packet)
    assert ep.snapshot() == before
    assert [a.message.payload for a in ep.receive(FifoPacket(0, 1, 1, 1, "y"))] == ["y"]


@pytest.mark.parametrize(
    "packet",
    [
        FifoBatch(0, 1, 3, 2, ("a", 1, None, {"k": [1.5]})),
        LamportBatch(2, 1, 7, ("a", "b")),
        SkeenBatch(0, 4, 9, (0, 1, 2), ("x", 300), 2),
        SkeenProposalBatch(1, 0, 4, (10, 11, 200)),
        SkeenFinalBatch(0, 4, 2, (10, 12)),
        TaggedBatch(1, (0, 3, 0, 5), ("a", {"b": [2]})),
        RSTBatch(2, 0, 4, ((0, 1, 0), (0, 0, 0), (3, 0, 2)), ("x", "y", 7)),
        KSBatch(1, 0, 5, (0, 3, 11), ("x", None)),
    ],
)
def test_batch_packets_encode_as_the_wire_format_says(packet):
    data = codec.encode(packet)
    assert data == wire_format.encode_reference(packet)
    assert codec.decode(data) == packet == wire_format.decode_reference(data)
    assert carried_message_ids(packet) == (
        ()
        if type(packet) in (SkeenProposalBatch, SkeenFinalBatch)
        else tuple(
            MessageId(packet.sender, first_seq(packet) + i) for i in range(len(packet.payloads))
        )
    )


def first_seq(packet: Any) -> int:
    """The seq of a batch's first message: named, or its sender's entry of its stamp."""
    if hasattr(packet, "first_seq"):
        return int(packet.first_seq)
    return int(packet.tag[packet.sender])
