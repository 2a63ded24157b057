"""Multi-value map, pure operation-based: one multi-value register per key, with an
observed remove (Baquero, Almeida, Shoker 2014; the register of ``mvregister``).

State: per key, the writes that no delivered operation on that key has overwritten,
each as (tag, message id, value); a stable write keeps no tag (None).

Effect of ``put k v`` delivered with tag t: drop every entry of k whose tag is < t
and every stable entry of k (it is in the causal past of everything delivered after
it became stable), then keep (t, id, v). ``rmv k`` drops the same entries and keeps
nothing: it removes what its sender had seen, so a put concurrent with it survives.

Stable(m): the entry of m forgets its tag.

Value: each key with entries, mapped to their values, sorted: one value after
sequential puts, several after concurrent ones, until a later put or remove.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId, TaggedMessage

Entry = tuple[VectorClock | None, MessageId | None, Any]


class MVMap:
    """A replica of a multi-value map from str keys to JSON values."""

    def __init__(self) -> None:
        self.entries: dict[str, list[Entry]] = {}

    @staticmethod
    def put(key: str, value: Any) -> dict[str, Any]:
        """The operation to broadcast to map ``key`` to ``value``."""
        return {"op": "put", "key": key, "value": value}

    @staticmethod
    def rmv(key: str) -> dict[str, Any]:
        """The operation to broadcast to remove ``key`` (the values its sender saw)."""
        return {"op": "rmv", "key": key}

    def effect(self, message: TaggedMessage) -> None:
        payload, tag = message.payload, message.tag
        op, key = payload.get("op"), payload.get("key")
        if op not in ("put", "rmv") or type(key) is not str:
            raise ValueError(f"unknown MVMap operation {payload!r}")
        old = self.entries.get(key, [])
        kept: list[Entry] = [(t, m, v) for t, m, v in old if t is not None and not t < tag]
        if op == "put":
            kept.append((tag, message.id, payload.get("value")))
        if kept:
            self.entries[key] = kept
        else:
            self.entries.pop(key, None)

    def on_stable(self, messages: Iterable[MessageId]) -> None:
        done = set(messages)
        for key, entries in self.entries.items():
            self.entries[key] = [(None, None, v) if m in done else (t, m, v) for t, m, v in entries]

    @property
    def tagged(self) -> int:
        """Entries that still carry a tag (not yet stable)."""
        return sum(1 for entries in self.entries.values() for t, _, _ in entries if t is not None)

    @property
    def value(self) -> dict[str, tuple[Any, ...]]:
        return {
            k: tuple(sorted({repr(v): v for _, _, v in es}.values(), key=repr))
            for k, es in sorted(self.entries.items())
        }
