"""Counter, pure operation-based (Baquero, Almeida, Shoker 2014, section 4).

Increments and decrements commute, so a counter needs nothing from the middleware
but exactly-once delivery: each operation adds its amount once, in any order. No
log, nothing to prune: ``on_stable`` has nothing to do. (A state-based counter
needs one entry per replica, a PN-counter; over reliable causal broadcast the
operations alone are enough.)
"""

from __future__ import annotations

from collections.abc import Iterable

from mailroom.core.messages import MessageId, TaggedMessage


class Counter:
    """A replica of a counter: the sum of every delivered ``add``."""

    def __init__(self) -> None:
        self.total = 0

    @staticmethod
    def add(amount: int) -> dict[str, object]:
        """The operation to broadcast to add ``amount`` (negative: subtract)."""
        if type(amount) is not int:
            raise TypeError(f"a counter adds ints, not {type(amount).__name__}")
        return {"op": "add", "n": amount}

    def effect(self, message: TaggedMessage) -> None:
        payload = message.payload
        if payload.get("op") != "add" or type(payload.get("n")) is not int:
            raise ValueError(f"unknown Counter operation {payload!r}")
        self.total += payload["n"]

    def on_stable(self, messages: Iterable[MessageId]) -> None:
        return None

    @property
    def value(self) -> int:
        return self.total
