"""``python -m examples.crdt``: two replicas of an add-wins set and a multi-value
register, concurrent operations, and the same value everywhere in the end."""

from __future__ import annotations

from typing import Any

from . import AWSet, MVRegister, Replica


def _wire(replicas: list[Replica], transmits: list[Any]) -> None:
    """Deliver every packet, in order, until nothing is in flight."""
    while transmits:
        t = transmits.pop(0)
        transmits += replicas[t.to].receive(t.packet)


def main() -> list[str]:
    """Run the demo; return the lines it prints."""
    lines = []
    shop = [Replica(p, 2, AWSet()) for p in range(2)]
    _wire(shop, shop[0].apply(AWSet.add("milk")))
    lines.append(f"both replicas have {sorted(shop[1].value)} after P0 adds milk")
    # P0 removes milk while P1, concurrently, adds it again: the add wins
    _wire(shop, shop[0].apply(AWSet.rmv("milk")) + shop[1].apply(AWSet.add("milk")))
    lines.append(
        f"concurrent remove (P0) and add (P1) of milk: P0 {sorted(shop[0].value)}, "
        f"P1 {sorted(shop[1].value)} (add wins)"
    )
    lines.append(f"log entries kept after stability: {len(shop[0].data.log)}")
    note = [Replica(p, 2, MVRegister()) for p in range(2)]
    _wire(note, note[0].apply(MVRegister.write("3pm")) + note[1].apply(MVRegister.write("4pm")))
    lines.append(f"concurrent writes of 3pm (P0) and 4pm (P1): both keep {sorted(note[0].value)}")
    _wire(note, note[1].apply(MVRegister.write("5pm")))
    lines.append(f"a later write of 5pm replaces both: {sorted(note[0].value)}")
    return lines


if __name__ == "__main__":
    print("\n".join(main()))
