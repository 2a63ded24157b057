"""The worked examples of docs/story.md and the protocol docs, as exact-value tests."""

from __future__ import annotations

from mailroom import RST, Deliver, MessageId, Unordered, VectorClock
from mailroom.sim import Simulation
from mailroom.trace import check


def test_alice_bob_carol_sent_and_deliv() -> None:
    """m3 reaches Carol before m1 and waits; the final SENT matrices are the story's."""
    sim = Simulation([RST(pid, 3) for pid in range(3)], adversarial=True)
    alice, bob, carol = sim.endpoints
    m1 = sim.send(0, "Let's meet at 3pm to talk about the Foo project.", to=2)
    assert alice.sent.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    m2 = sim.send(0, "Can you join a meeting with Carol and me at 3pm?", to=1)
    assert alice.sent.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    (packet_m2,) = sim.packets(m2)
    assert packet_m2.packet.sent == ((0, 0, 1), (0, 0, 0), (0, 0, 0))  # attached before

    actions = sim.arrive_message(m2, 1)
    assert [a.message.id for a in actions if isinstance(a, Deliver)] == [m2]
    assert bob.deliv.tolist() == [1, 0, 0]
    assert bob.sent.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]

    m3 = sim.send(1, "What's the 3pm meeting with Alice about?", to=2)
    assert bob.sent.tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]

    assert sim.arrive_message(m3, 2) == []  # m3 waits in the mail room
    (waiting,) = carol.pending()
    assert waiting.message.id == m3
    assert [(w.sender, w.have, w.need) for w in waiting.waits] == [(0, 0, 1)]
    assert waiting.explain() == "P1#1 waits for 1 message from P0 (its 1st message to P2)"
    assert carol.deliv.tolist() == [0, 0, 0]

    actions = sim.arrive_message(m1, 2)
    assert [a.message.id for a in actions if isinstance(a, Deliver)] == [m1, m3]
    assert carol.pending() == []
    assert carol.deliv.tolist() == [1, 1, 0]
    # the story's P1..P3 are pids 0..2
    assert bob.sent.tolist() == carol.sent.tolist() == [[0, 1, 1], [0, 0, 1], [0, 0, 0]]
    assert alice.sent.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert check(sim.trace).ok


def test_textbook_matrix_example_run() -> None:
    """The textbook matrix run: Alice's matrix after each send, Bob delivers, Cary waits.

    The textbook protocol increments before piggybacking; RST attaches before
    incrementing, so its matrix after each send is RST's SENT after the send.
    """
    sim = Simulation([RST(pid, 3) for pid in range(3)], adversarial=True)
    alice, bob, cary = sim.endpoints
    to_cary = sim.send(0, "Introducing Bob to Cary", to=2)  # step 1
    assert alice.sent.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    to_bob = sim.send(0, "Hi Bob, I just introduced you to Cary", to=1)  # step 2
    assert alice.sent.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]
    assert len(sim.arrive_message(to_bob, 1)) == 1  # step 3: Bob can deliver
    assert bob.sent.tolist() == [[0, 1, 1], [0, 0, 0], [0, 0, 0]]  # pairwise max
    hi = sim.send(1, "Hi Cary, this is Bob", to=2)  # step 4
    assert sim.packets(hi)[0].packet.sent[0][2] == 1  # T[1,3] = 1 ...
    assert cary.sent[0, 2] == 0  # ... but M[1,3] = 0
    assert sim.arrive_message(hi, 2) == []  # cannot deliver
    assert [a.message.payload for a in sim.arrive_message(to_cary, 2)] == [
        "Introducing Bob to Cary",
        "Hi Cary, this is Bob",
    ]


def test_detector_flags_the_overtaken_message() -> None:
    """P0 gives Obj to P1 (M1) and tells P2 (M2); P2's request (M3) reaches P1 first."""
    sim = Simulation([Unordered(pid, 3) for pid in range(3)], adversarial=True)
    p1 = sim.endpoints[1]
    m1 = sim.send(0, "here is Obj", to=1)
    m2 = sim.send(0, "P1 has Obj", to=2)
    sim.arrive_message(m2, 2)
    m3 = sim.send(2, "invoke Obj", to=1)
    assert sim.packets(m1)[0].packet.vc == (1, 0, 0)
    assert sim.packets(m3)[0].packet.vc == (2, 0, 2)
    sim.arrive_message(m3, 1)
    assert p1.violations == []
    sim.arrive_message(m1, 1)
    (v,) = p1.violations
    assert v.message == MessageId(0, 1)
    assert v.timestamp == VectorClock([1, 0, 0])
    assert v.known == VectorClock([2, 0, 2])  # "(1,0,0) is less than (2,0,2)"
    assert "causality violation" in v.explain()
    # concurrent timestamps are not a problem
    sim2 = Simulation([Unordered(pid, 2) for pid in range(2)], adversarial=True)
    a = sim2.send(0, "a", to=1)
    sim2.send(1, "b", to=0)
    sim2.arrive_message(a, 1)
    assert sim2.endpoints[1].violations == []
