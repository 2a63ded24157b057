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

    def _next_ready(self) -> tuple[int, int, int] | None:
        if self._unfinal or not self._ready:
            return None
        return self._ready[0]


__all__ = ["SkeenAllFinal"]
