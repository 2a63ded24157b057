"""Multi-value register, pure operation-based (Baquero, Almeida, Shoker 2014).

State: the writes that no delivered write has overwritten, each as
(tag, message id, value); a stable write keeps no tag (None).

Effect of ``write v`` delivered with tag t: drop every entry whose tag is < t
and every stable entry (a stable write is in the causal past of everything
delivered after it became stable), then keep (t, id, v).

Stable(m): the entry of m forgets its tag.

Value: the values of the entries, sorted: one value after sequential writes,
several after concurrent ones, until a later write overwrites them all.
"""

from __future__ import annotations

from collections.abc import Iterable

from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId, TaggedMessage


class MVRegister:
    """A replica of a multi-value register."""

    def __init__(self) -> None:
        self.entries: list[tuple[VectorClock | None, MessageId | None, str]] = []

    @staticmethod
    def write(value: str) -> dict[str, str]:
        """The operation to broadcast to write ``value``."""
        return {"op": "write", "value": value}

    def effect(self, message: TaggedMessage) -> None:
        if message.payload.get("op") != "write":
            raise ValueError(f"unknown MVRegister operation {message.payload!r}")
        tag = message.tag
        self.entries = [(t, mid, v) for t, mid, v in self.entries if t is not None and not t < tag]
        self.entries.append((tag, message.id, message.payload["value"]))

    def on_stable(self, messages: Iterable[MessageId]) -> None:
        done = set(messages)
        self.entries = [
            (None, None, v) if mid in done else (t, mid, v) for t, mid, v in self.entries
        ]

    @property
    def tagged(self) -> int:
        """Entries that still carry a tag (not yet stable)."""
        return sum(1 for t, _, _ in self.entries if t is not None)

    @property
    def value(self) -> tuple[str, ...]:
        return tuple(sorted({v for _, _, v in self.entries}))
