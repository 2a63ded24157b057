"""Explanations of what a buffered message waits for, in words and as data."""

from __future__ import annotations

import attrs

from mailroom.core.messages import Message


def ordinal(k: int) -> str:
    suffix = "th" if 10 <= k % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(k % 10, "th")
    return f"{k}{suffix}"


@attrs.frozen
class Wait:
    """Waiting for messages number ``have + 1 .. need`` from ``sender``.

    ``unit`` says what the numbers count: "seq" when they are message ids'
    sequence numbers, or a phrase such as "to P2" for per-channel counts.
    """

    sender: int
    have: int
    need: int
    unit: str = "seq"

    @property
    def count(self) -> int:
        return self.need - self.have

    def describe(self) -> str:
        first, last = self.have + 1, self.need
        noun = "message" if self.count == 1 else "messages"
        if self.unit == "seq":
            span = f"seq {first}" if first == last else f"seq {first}..{last}"
        else:
            span = (
                f"its {ordinal(first)} {self.unit}"
                if first == last
                else f"its {ordinal(first)}..{ordinal(last)} {self.unit}"
            )
        return f"{self.count} {noun} from P{self.sender} ({span})"


@attrs.frozen
class Pending:
    """A message held in the mail room and what it waits for."""

    message: Message
    waits: tuple[Wait, ...]
    reason: str = ""

    def explain(self) -> str:
        if self.reason:
            return f"{self.message.id} waits for {self.reason}"
        return f"{self.message.id} waits for " + " and ".join(w.describe() for w in self.waits)
