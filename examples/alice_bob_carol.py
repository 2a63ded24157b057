"""The story of docs/story.md with RST endpoints and a hand-made network: a list of packets.

Run: python examples/alice_bob_carol.py
"""

from __future__ import annotations

from mailroom import RST, Deliver, Transmit

NAMES = ["Alice", "Bob", "Carol"]


def main() -> list[str]:
    clerks = [RST(pid, 3) for pid in range(3)]
    wire: list[Transmit] = []
    log: list[str] = []

    def act(pid: int, actions: list) -> None:  # type: ignore[type-arg]
        for a in actions:
            if isinstance(a, Transmit):
                wire.append(a)
            elif isinstance(a, Deliver):
                log.append(f"{NAMES[pid]} reads: {a.message.payload}")

    def arrive(index: int) -> None:
        t = wire.pop(index)
        act(t.to, clerks[t.to].receive(t.packet))

    act(0, clerks[0].send("Let's meet at 3pm to talk about the Foo project.", to=2))
    act(0, clerks[0].send("Can you join a meeting with Carol and me at 3pm?", to=1))
    arrive(1)  # Alice -> Bob
    act(1, clerks[1].send("What's the 3pm meeting with Alice about?", to=2))
    arrive(1)  # Bob -> Carol overtakes Alice -> Carol ...
    for p in clerks[2].pending():
        log.append(f"Carol's mail room: {p.explain()}")
    arrive(0)  # ... which arrives last
    return log


if __name__ == "__main__":
    print("\n".join(main()))
