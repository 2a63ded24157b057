"""Total order: exact worked examples, bad input, local errors, snapshots."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

import mailroom
from mailroom import Deliver, LamportTotalOrder, LocalError, RemoteError, Sequencer, Skeen, Transmit
from mailroom import MessageId as Id
from mailroom.core.registry import restore_endpoint
from mailroom.protocols.total import (
    LamportAck,
    LamportMessage,
    SequencerOrder,
    SequencerRequest,
    SkeenFinal,
    SkeenMessage,
    SkeenProposal,
)
from mailroom.testing import SkeenNoClockRaise

ALL3 = (0, 1, 2)


def delivered(actions: list) -> list[str]:
    return [a.message.payload for a in actions if isinstance(a, Deliver)]


def packets(actions: list) -> list[tuple[int, object]]:
    return [(a.to, a.packet) for a in actions if isinstance(a, Transmit)]


def rejects(ep: object, packet: object, words: str) -> None:
    """The packet raises RemoteError naming the problem and changes nothing."""
    before = ep.snapshot()  # type: ignore[attr-defined]
    with pytest.raises(RemoteError, match=words):
        ep.receive(packet)  # type: ignore[attr-defined]
    assert ep.snapshot() == before  # type: ignore[attr-defined]


def test_public_names():
    for name in ("Sequencer", "Skeen", "LamportTotalOrder"):
        assert name in mailroom.__all__ and name in mailroom.protocols.__all__
        assert getattr(mailroom, name) is getattr(mailroom.protocols, name)


# -- Sequencer -------------------------------------------------------------------------------


def test_sequencer_worked_example():
    """Send to the coordinator, which numbers and forwards."""
    p0, p1, p2 = (Sequencer(i, 3) for i in ALL3)
    req_a = p1.broadcast("a")
    assert req_a == [Transmit(0, SequencerRequest(1, 1, "a"), Id(1, 1))]
    req_b = p2.broadcast("b")
    # b reaches the sequencer first: it is number 1
    out = p0.receive(req_b[0].packet)
    b1 = SequencerOrder(1, 2, 1, "b")
    assert packets(out) == [(1, b1), (2, b1)] and delivered(out) == ["b"]
    out = p0.receive(req_a[0].packet)
    a2 = SequencerOrder(2, 1, 1, "a")
    assert packets(out) == [(1, a2), (2, a2)] and delivered(out) == ["a"]
    # P1 gets number 2 (its own message) first: it waits for number 1
    assert p1.receive(a2) == []
    [pending] = p1.pending()
    assert pending.explain() == "P1#1 waits for number 1 from the sequencer P0"
    assert delivered(p1.receive(b1)) == ["b", "a"]
    assert delivered(p2.receive(b1) + p2.receive(a2)) == ["b", "a"]
    # the sequencer's own broadcast is numbered at once
    out = p0.broadcast("c")
    assert packets(out) == [(1, SequencerOrder(3, 0, 1, "c")), (2, SequencerOrder(3, 0, 1, "c"))]
    assert delivered(out) == ["c"]
    # duplicates are dropped quietly
    assert p0.receive(req_a[0].packet) == [] and p0.duplicates == 1
    assert p1.receive(b1) == [] and p1.duplicates == 1
    assert p0.buffered() == p1.buffered() == p2.buffered() == 0


def test_sequencer_bad_input():
    p0, p1 = Sequencer(0, 3), Sequencer(1, 3)
    rejects(p1, SequencerRequest(2, 1, "x"), "sequencer is P0")
    rejects(p0, SequencerOrder(1, 1, 1, "x"), "is the sequencer")
    rejects(p0, SequencerRequest(0, 1, "x"), "own messages")
    rejects(p0, SequencerRequest(3, 1, "x"), "not a process")
    rejects(p1, SequencerOrder(1, 1, 1, "x"), "never sent")
    rejects(p1, SequencerOrder(0, 2, 1, "x"), "at least 1")
    rejects(p1, "junk", "expected a request or an order")
    p1.receive(SequencerOrder(2, 2, 1, "x"))
    rejects(p1, SequencerOrder(2, 2, 2, "y"), "already")
    with pytest.raises(LocalError):
        Sequencer(0, 3, sequencer=3)


# -- Skeen -----------------------------------------------------------------------------------------


def test_skeen_worked_example():
    """Two concurrent broadcasts, received in different orders, delivered in one order."""
    p0, p1, p2 = (Skeen(i, 3) for i in ALL3)
    out_a = p0.broadcast("a")
    a = SkeenMessage(0, 1, 1, ALL3, "a", 1)
    assert packets(out_a) == [(1, a), (2, a)] and p0.clock == 1
    out_b = p2.broadcast("b")
    b = SkeenMessage(2, 1, 1, ALL3, "b", 1)
    assert packets(out_b) == [(0, b), (1, b)]
    # P1 gets a then b; P0 and P2 get the other's message
    assert packets(p1.receive(a)) == [(0, SkeenProposal(1, 0, 1, 2))]
    assert packets(p1.receive(b)) == [(2, SkeenProposal(1, 2, 1, 3))]
    assert packets(p0.receive(b)) == [(2, SkeenProposal(0, 2, 1, 2))]
    assert packets(p2.receive(a)) == [(0, SkeenProposal(2, 0, 1, 2))]
    # a's final number is max(1, 2, 2) = 2; b's is max(1, 3, 2) = 3
    assert p0.receive(SkeenProposal(1, 0, 1, 2)) == []
    out = p0.receive(SkeenProposal(2, 0, 1, 2))
    fa = SkeenFinal(0, 1, 2, 1)
    # a is final at 2, key (2, P0, 1); b's open proposal here is 2 from P2, key (2, P2, 1):
    # b can only end at (2, P2, 1) or above, so a goes first, now (the standard rule)
    assert packets(out) == [(1, fa), (2, fa)] and delivered(out) == ["a"]
    assert [p.explain() for p in p0.pending()] == [
        "P2#1 waits for its final number from P2 (proposed 2)",
    ]
    p2.receive(SkeenProposal(1, 2, 1, 3))
    out = p2.receive(SkeenProposal(0, 2, 1, 2))
    fb = SkeenFinal(2, 1, 3, 1)
    assert packets(out) == [(0, fb), (1, fb)] and delivered(out) == []  # a's proposal 2 < 3
    assert [p.explain() for p in p2.pending()] == [
        "P0#1 waits for its final number from P0 (proposed 2)",
        "P2#1 waits for the final numbers of P0#1",
    ]
    assert delivered(p0.receive(fb)) == ["b"]
    assert delivered(p1.receive(fb)) == []  # a is not final at P1 yet
    assert delivered(p1.receive(fa)) == ["a", "b"]
    assert delivered(p2.receive(fa)) == ["a", "b"]
    assert p0.clock == 3 and p1.clock == 3 and p2.clock == 3
    assert p0.finals == p1.finals == p2.finals == {Id(0, 1): 2, Id(2, 1): 3}


def test_skeen_receivers_raise_their_clock_to_final_numbers():
    """Skeen's correctness argument: after delivering B, a process proposes above B's number."""
    for cls, raised in ((Skeen, True), (SkeenNoClockRaise, False)):
        p1 = cls(1, 3)
        p1.receive(SkeenMessage(0, 1, 1, ALL3, "B", 1))  # proposes 2
        assert delivered(p1.receive(SkeenFinal(0, 1, 7, 1))) == ["B"]
        [(_, proposal)] = packets(p1.receive(SkeenMessage(2, 1, 1, ALL3, "A", 1)))
        assert isinstance(proposal, SkeenProposal)
        assert (proposal.number > 7) is raised


def test_skeen_multicast_to_a_subset():
    p0, p1, p2 = (Skeen(i, 3) for i in ALL3)
    out = p0.multicast("x", to={1, 2})  # the sender is not a destination
    m = SkeenMessage(0, 1, 1, (1, 2), "x", 1)
    assert packets(out) == [(1, m), (2, m)] and p0.buffered() == 0
    p0.receive(p1.receive(m)[0].packet)
    out = p0.receive(p2.receive(m)[0].packet)
    f = SkeenFinal(0, 1, 2, 1)
    assert packets(out) == [(1, f), (2, f)] and delivered(out) == []
    assert delivered(p1.receive(f)) == ["x"] and delivered(p2.receive(f)) == ["x"]
    # to itself alone: final at once
    assert delivered(p1.multicast("y", to={1})) == ["y"]
    with pytest.raises(LocalError, match="at least one"):
        p0.multicast("z", to=set())
    with pytest.raises(LocalError, match="not a process"):
        p0.multicast("z", to={3})
    with pytest.raises(LocalError, match="cannot be encoded"):
        p0.multicast(object(), to={1})
    assert p0.sent_count == 1


def test_skeen_bad_input():
    p0, p1 = Skeen(0, 3), Skeen(1, 3)
    p0.multicast("x", to={0, 1})  # P0#1, stamped 1, only to P0 and P1
    p1.receive(SkeenMessage(0, 1, 1, (0, 1), "x", 1))  # P1 proposes 2
    rejects(p0, SkeenProposal(1, 0, 2, 5), "unknown message")
    rejects(p0, SkeenProposal(1, 2, 1, 5), "arrived at P0")
    rejects(p0, SkeenProposal(2, 0, 1, 5), "sent only to")
    rejects(p0, SkeenProposal(1, 0, 1, 1), "not above its stamp")
    rejects(p0, SkeenProposal(5, 0, 1, 2), "not a process")
    rejects(p1, SkeenFinal(0, 2, 5, 1), "unknown message")
    rejects(p1, SkeenFinal(2, 1, 5, 1), "unknown message")
    rejects(p1, SkeenFinal(0, 1, 1, 1), "lower than the proposal 2")
    rejects(p1, SkeenMessage(0, 2, 1, (0, 2), "y", 1), "arrived at P1")
    rejects(p1, SkeenMessage(0, 2, 1, (2, 1), "y", 1), "not sorted")
    rejects(p1, SkeenMessage(0, 2, 0, (1,), "y", 1), "timestamp must be at least 1")
    rejects(p1, SkeenMessage(1, 2, 1, (1,), "y", 1), "own messages")
    rejects(p1, 42, "expected a message, proposal or final")
    # the real final: delivered; a copy is a duplicate; a different one is an error
    out = p0.receive(SkeenProposal(1, 0, 1, 2))
    assert delivered(out) == ["x"]
    final = SkeenFinal(0, 1, 2, 1)
    assert delivered(p1.receive(final)) == ["x"]
    assert p1.receive(final) == [] and p1.duplicates == 1
    rejects(p1, SkeenFinal(0, 1, 3, 1), "second final number 3")
    assert p0.receive(SkeenProposal(1, 0, 1, 2)) == [] and p0.duplicates == 1
    assert p1.receive(SkeenMessage(0, 1, 1, (0, 1), "x", 1)) == [] and p1.duplicates == 2


def test_skeen_changed_proposal_is_an_error():
    p0 = Skeen(0, 3)
    p0.broadcast("x")
    p0.receive(SkeenProposal(1, 0, 1, 4))
    rejects(p0, SkeenProposal(1, 0, 1, 5), "after proposing 4")
    assert p0.receive(SkeenProposal(1, 0, 1, 4)) == [] and p0.duplicates == 1


def test_skeen_second_final_before_delivery_is_an_error():
    p1 = Skeen(1, 3)
    p1.receive(SkeenMessage(0, 1, 1, ALL3, "x", 1))
    p1.receive(SkeenMessage(2, 1, 1, ALL3, "y", 1))
    assert p1.receive(SkeenFinal(0, 1, 4, 1)) == []  # y is not final: x waits
    rejects(p1, SkeenFinal(0, 1, 5, 1), "second final number 5 for P0#1, which has 4")


# -- Lamport ---------------------------------------------------------------------------------------


def test_lamport_worked_example():
    """Lamport's acknowledgements: acknowledge to all, deliver once everyone is past the stamp."""
    p0, p1, p2 = (LamportTotalOrder(i, 3) for i in ALL3)
    out = p0.broadcast("x")
    x = LamportMessage(0, 1, 1, "x")
    ack0 = LamportAck(0, 2, 0, 1)
    assert packets(out) == [(1, x), (2, x), (1, ack0), (2, ack0)] and delivered(out) == []
    assert p0.clock == 2
    out = p1.receive(x)
    ack1 = LamportAck(1, 2, 0, 1)
    assert packets(out) == [(0, ack1), (2, ack1)] and delivered(out) == []
    assert p1.receive(ack0) == []  # still nothing stamped above 1 from P2
    [pending] = p1.pending()
    assert pending.explain() == (
        "P0#1 waits for a message or acknowledgement stamped above 1 from P2"
    )
    # P2: P1's acknowledgement arrives before the message it acknowledges
    assert p2.receive(ack1) == []
    out = p2.receive(x)
    ack2 = LamportAck(2, 3, 0, 1)
    assert packets(out) == [(0, ack2), (1, ack2)] and delivered(out) == []
    assert delivered(p2.receive(ack0)) == ["x"]
    assert delivered(p1.receive(ack2)) == ["x"]
    assert delivered(p0.receive(ack1)) == []
    assert delivered(p0.receive(ack2)) == ["x"]


def test_lamport_one_acknowledgement_releases_several_messages():
    p0, p1, p2 = (LamportTotalOrder(i, 3) for i in ALL3)
    out0, out1 = p0.broadcast("x"), p1.broadcast("y")  # both stamped 1
    (x, y) = (out0[0].packet, out1[0].packet)
    p2.receive(y)
    p2.receive(x)
    p2.receive(out0[-1].packet)  # P0's acknowledgement, stamped 2
    assert p2.buffered() == 2
    # P1's acknowledgement of y (stamped 2) passes both stamps: x then y (ties by pid)
    assert delivered(p2.receive(out1[-1].packet)) == ["x", "y"]


def test_lamport_bad_input():
    p1 = LamportTotalOrder(1, 3)
    rejects(p1, LamportAck(3, 5, 0, 1), "not a process")
    rejects(p1, LamportAck(-1, 5, 0, 1), "not a process")
    rejects(p1, LamportAck(1, 5, 0, 1), "own acknowledgements")
    rejects(p1, LamportAck(0, 5, 1, 1), "unknown message P1#1")
    rejects(p1, LamportAck(0, 0, 2, 1), "timestamp must be at least 1")
    rejects(p1, LamportMessage(1, 1, 1, "x"), "own messages")
    rejects(p1, LamportMessage(0, 0, 1, "x"), "seq must be at least 1")
    rejects(p1, "junk", "expected a message or acknowledgement")
    m = LamportMessage(0, 1, 1, "x")
    p1.receive(m)
    assert p1.receive(m) == [] and p1.duplicates == 1


def test_lamport_snapshot_keeps_a_sender_whose_stamps_went_backwards():
    """A sender whose second message is stamped below its first (a buggy or a hostile
    one) has the second delivered first; the first, queued below the sender's last
    delivered seq, survives a snapshot (the thorough hostile-input profile found a
    snapshot that refused to restore this state)."""
    p1 = LamportTotalOrder(1, 3)
    assert delivered(p1.receive(LamportMessage(0, 1, 5, "first"))) == []
    assert delivered(p1.receive(LamportMessage(0, 2, 3, "second"))) == []
    assert delivered(p1.receive(LamportAck(2, 4, 0, 2))) == ["second"]
    assert p1.delivered == [2, 0, 0] and p1.buffered() == 1
    copy = restore_endpoint(json.loads(json.dumps(p1.snapshot())))
    assert copy.snapshot() == p1.snapshot()
    assert delivered(copy.receive(LamportAck(2, 6, 0, 2))) == []  # P0's stamp 5 bounds it
    assert delivered(copy.receive(LamportAck(0, 7, 0, 2))) == ["first"]
    bad = p1.snapshot()
    bad["queue"] = bad["queue"] * 2
    with pytest.raises(LocalError, match="twice"):
        restore_endpoint(bad)


def test_lamport_stack_is_over_fifo():
    stack = LamportTotalOrder.stack(0, 3)
    assert [type(x).__name__ for x in stack.layers] == ["Fifo", "LamportTotalOrder"]


# -- snapshots -------------------------------------------------------------------------------------

MAKERS: list[Callable[[int, int], object]] = [Sequencer, Skeen, LamportTotalOrder]


@pytest.mark.parametrize("make", MAKERS, ids=lambda c: c.__name__)
def test_snapshot_of_wrong_shape_is_a_local_error(make):
    ep = make(0, 3)
    data = ep.snapshot()  # type: ignore[attr-defined]
    assert type(ep).restore(data).snapshot() == data  # type: ignore[attr-defined]
    broken = dict(data)
    broken["clock" if "clock" in data else "delivered"] = -1
    with pytest.raises(LocalError):
        type(ep).restore(broken)  # type: ignore[attr-defined]


def test_sequencer_snapshot_keeps_the_sequencer():
    ep = Sequencer(1, 4, sequencer=2)
    again = Sequencer.restore(ep.snapshot())
    assert again.sequencer == 2 and again.snapshot() == ep.snapshot()
