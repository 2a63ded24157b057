"""The textbook Skeen delivery rule (every held message final), kept to show why it was replaced.

``SkeenAllFinal`` delivers only when *every* held message is final, then all of
them in number order. It is safe (total order holds) but under steady traffic
some message is always waiting for its final number, so nothing is delivered
until the senders pause: ``mailroom.testing.open_ended`` finds the unbounded
latency, and ``starvation`` measures it.
"""

from __future__ import annotations

from mailroom.protocols.total.skeen import Skeen


class SkeenAllFinal(Skeen):
    """Skeen with the textbook rule: deliver only when every held message is final."""

    protocol = "SkeenAllFinal"

    def next_delivery(self) -> tuple[int, int, int] | None:
        """The lowest final message, once no held message is waiting for its number."""
        return self.lowest_final() if self.lowest_open() is None else None


__all__ = ["SkeenAllFinal"]
