"""The docs' figures, drawn from real simulator runs (never by hand).

``conf.py`` calls ``write_all(target)`` before every build; each function
below runs a scenario and returns a ``Diagram``. Pages include the SVGs from
``docs/_generated/``. Run ``python docs/figures.py`` to write them by hand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from mailroom import CBCAST, RST, Fifo, Unordered
from mailroom.diagram import Diagram, draw
from mailroom.sim import Simulation

ABC = {0: "Alice (P0)", 1: "Bob (P1)", 2: "Carol (P2)"}


def _alice_bob_carol(make: Callable[[int, int], object]) -> Simulation:
    """The Alice/Bob/Carol bad schedule: m3 reaches Carol before m1."""
    sim = Simulation([make(pid, 3) for pid in range(3)], adversarial=True)  # type: ignore[misc]
    m1 = sim.send(0, "Let's meet at 3pm", to=2)
    m2 = sim.send(0, "Can you join us at 3pm?", to=1)
    sim.arrive_message(m2, 1)
    m3 = sim.send(1, "What's the 3pm meeting about?", to=2)
    sim.arrive_message(m3, 2)
    sim.arrive_message(m1, 2)
    return sim


def rst_alice_bob_carol() -> Diagram:
    sim = _alice_bob_carol(RST)
    return draw(sim.trace, labels=ABC, check=["causal"], title="RST: m3 waits for m1")


def unordered_alice_bob_carol() -> Diagram:
    sim = _alice_bob_carol(Unordered)
    return draw(sim.trace, labels=ABC, check=["causal"], title="Unordered: the violation")


def fifo_alice_bob_carol() -> Diagram:
    sim = _alice_bob_carol(Fifo)
    return draw(sim.trace, labels=ABC, check=["fifo", "causal"], title="Fifo is not enough")


def cbcast_chat_room() -> Diagram:
    sim = Simulation([CBCAST(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.broadcast(0, "Let's meet at 3pm")
    m2 = sim.broadcast(0, "Bob, join us?")
    sim.arrive_message(m1, 1)
    sim.arrive_message(m2, 1)
    m3 = sim.broadcast(1, "What's the meeting about?")
    sim.arrive_message(m3, 0)
    sim.arrive_message(m3, 2)
    sim.arrive_message(m2, 2)
    sim.arrive_message(m1, 2)
    return draw(sim.trace, labels=ABC, check=["fifo", "causal"], title="CBCAST in a chat room")


def rst_under_loss() -> Diagram:
    """m1 is lost: RST stays safe but m3 waits for it forever (liveness)."""
    sim = Simulation([RST(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.send(0, "Let's meet at 3pm", to=2)
    sim.drop(sim.packets(m1)[0].id)
    m2 = sim.send(0, "Can you join us at 3pm?", to=1)
    sim.arrive_message(m2, 1)
    m3 = sim.send(1, "What's the 3pm meeting about?", to=2)
    sim.arrive_message(m3, 2)
    return draw(sim.trace, labels=ABC, check=["causal", "liveness"], title="RST when m1 is lost")


def tagged_naive() -> Diagram:
    """The callback-model run under NaiveTagged: x is tagged after b, which P2's
    application had not seen; the tag checker's violation is highlighted."""
    from mailroom import TaggedMessage
    from mailroom.testing import NaiveTagged, tag_violations

    def reply(sim: Simulation, pid: int, m: object) -> None:
        if pid == 2 and isinstance(m, TaggedMessage) and m.payload == "a":
            sim.broadcast(2, "x")

    sim = Simulation([NaiveTagged(p, 3) for p in range(3)], adversarial=True, on_deliver=reply)
    a = sim.broadcast(0, "a")
    sim.arrive_message(a, 1)
    b = sim.broadcast(1, "b")
    sim.arrive_message(b, 2)
    sim.arrive_message(a, 2)
    while sim.in_flight:
        sim.arrive(min(sim.in_flight))
    names = {e.message: str(e.payload) for e in sim.trace if e.kind == "send"}
    return draw(
        sim.trace,
        names=names,
        violations=tag_violations(sim),
        title="NaiveTagged over-orders x after b",
    )


def membership_crash() -> Diagram:
    """The crash story of membership.md: Carol's m3 reaches only Bob before she
    crashes, the flush hands it to Alice before view 2, and Dave joins in view 3."""
    from mailroom import Group

    def settle(sim: Simulation) -> None:
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))

    first = (0, 1, 2)
    sim = Simulation(
        [Group(p, 4, "cbcast", members=first) for p in first] + [Group(3, 4, "cbcast")],
        adversarial=True,
    )
    sim.broadcast(0, "m1 from Alice")
    sim.broadcast(1, "m2 from Bob")
    settle(sim)
    m3 = sim.broadcast(2, "m3 from Carol")
    sim.drop(sim.packets(m3, to=0)[0].id)
    sim.crash(2)
    sim.arrive_message(m3, 1)
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    settle(sim)
    sim.join(3, Group(3, 4, "cbcast", contacts=[0, 1]))
    settle(sim)
    sim.broadcast(3, "m4 from Dave")
    settle(sim)
    labels = {**ABC, 3: "Dave (P3)"}
    return draw(sim.trace, labels=labels, title="Carol crashes; the flush hands m3 to Alice")


def membership_safe_crash() -> Diagram:
    """The crash story under safe delivery: Carol's m3 reaches only Bob; nobody
    delivers it (Alice does not hold it) until the flush after Carol's crash hands it
    to Alice and Bob, just before view 2."""
    from mailroom import Group

    def settle(sim: Simulation) -> None:
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))

    sim = Simulation(
        [Group(p, 3, "cbcast", members=range(3), safe=True) for p in range(3)], adversarial=True
    )
    m1 = sim.broadcast(0, "m1 from Alice")
    settle(sim)
    m3 = sim.broadcast(2, "m3 from Carol")
    sim.drop(sim.packets(m3, to=0)[0].id)
    sim.arrive_message(m3, 1)
    settle(sim)
    sim.crash(2)
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    settle(sim)
    names = {m1: "m1", m3: "m3"}
    return draw(sim.trace, labels=ABC, names=names, title="Safe delivery: m3 waits for the flush")


def lab_column_for_deliv() -> Diagram:
    from mailroom.lab import ColumnForDeliv, counterexample

    found = counterexample(ColumnForDeliv, ["fifo", "causal", "liveness"], mode="unicast", n=(1, 3))
    assert found is not None
    return found.diagram("ColumnForDeliv: messages to oneself overtake each other")


def lab_fifo_is_weaker() -> Diagram:
    from mailroom.lab import separate

    found = separate("FIFO", "C1", Fifo)
    assert found is not None
    return found.diagram("FIFO holds, C1 fails: the smallest run, found exhaustively")


FIGURES: dict[str, Callable[[], Diagram]] = {
    "rst-alice-bob-carol": rst_alice_bob_carol,
    "unordered-alice-bob-carol": unordered_alice_bob_carol,
    "fifo-alice-bob-carol": fifo_alice_bob_carol,
    "cbcast-chat-room": cbcast_chat_room,
    "rst-under-loss": rst_under_loss,
    "tagged-naive": tagged_naive,
    "membership-crash": membership_crash,
    "membership-safe-crash": membership_safe_crash,
    "lab-column-for-deliv": lab_column_for_deliv,
    "lab-fifo-is-weaker": lab_fifo_is_weaker,
}


def write_all(target: Path) -> list[Path]:
    target.mkdir(parents=True, exist_ok=True)
    return [make().save(target / f"{name}.svg") for name, make in FIGURES.items()]


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1] if len(sys.argv) > 1 else "docs/_generated")):
        print(path)
