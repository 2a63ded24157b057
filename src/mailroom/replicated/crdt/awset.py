"""Add-Wins Set, pure operation-based (Baquero, Almeida, Shoker 2014, section 5).

State: ``stable``, a plain set of the elements whose adds are causally stable,
and ``log``, the partially ordered log of adds that are not stable yet, by
message id: (tag, element). Removes are never stored.

Effect of an operation on element e, delivered with tag t:

- it makes every logged add of e with a tag < t redundant (a later operation on
  e decides): those entries are dropped;
- ``rmv e`` also drops e from ``stable``: a stable add is in the causal past of
  every operation delivered after it became stable;
- ``add e`` is logged under its tag.

Stable(m): a logged add leaves the log for ``stable``; its tag is no longer
needed, since every later operation is in its causal future.

Value: ``stable`` together with every element of the log. An add concurrent
with a remove survives it (add wins); once everything is stable the log is empty.
"""

from __future__ import annotations

from collections.abc import Iterable

from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId, TaggedMessage


class AWSet:
    """A replica of an add-wins set; feed it deliveries and stability reports."""

    def __init__(self) -> None:
        self.stable: set[str] = set()
        self.log: dict[MessageId, tuple[VectorClock, str]] = {}

    @staticmethod
    def add(element: str) -> dict[str, str]:
        """The operation to broadcast to add ``element``."""
        return {"op": "add", "elem": element}

    @staticmethod
    def rmv(element: str) -> dict[str, str]:
        """The operation to broadcast to remove ``element``."""
        return {"op": "rmv", "elem": element}

    def effect(self, message: TaggedMessage) -> None:
        op, element, tag = message.payload["op"], message.payload["elem"], message.tag
        for mid in [m for m, (t, e) in self.log.items() if e == element and t < tag]:
            del self.log[mid]
        if op == "rmv":
            self.stable.discard(element)
        elif op == "add":
            self.log[message.id] = (tag, element)
        else:
            raise ValueError(f"unknown AWSet operation {op!r}")

    def on_stable(self, messages: Iterable[MessageId]) -> None:
        for mid in messages:
            entry = self.log.pop(mid, None)
            if entry is not None:
                self.stable.add(entry[1])

    @property
    def value(self) -> frozenset[str]:
        return frozenset(self.stable) | {e for _, e in self.log.values()}
