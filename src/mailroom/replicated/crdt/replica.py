"""A single-threaded host: one endpoint and one data type, wired together.

For each ``Deliver`` the replica first tells the endpoint that the application
takes the message (``consume``), then applies the operation; ``Stable`` reports
go to the data type's ``on_stable``. Operations are stamped the moment the
replica issues them, so their tags are precise (see docs/tagged-causal.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from mailroom.core.actions import Action, Deliver, Stable, Transmit
from mailroom.core.messages import MessageId, Payload, TaggedMessage
from mailroom.protocols import TaggedCausalBroadcast


class DataType(Protocol):
    """An operation-based CRDT: ``effect`` of each delivered operation, ``on_stable``."""

    def effect(self, message: TaggedMessage) -> None: ...
    def on_stable(self, messages: Iterable[MessageId]) -> None: ...


class CausalReplica:
    """Process ``pid`` of ``n``: ``apply(op)`` and ``receive(packet)`` return Transmits."""

    def __init__(self, pid: int, n: int, data: Any, **options: Any) -> None:
        self.endpoint = TaggedCausalBroadcast(pid, n, **options)
        self.data: Any = data

    def apply(self, operation: Payload) -> list[Transmit]:
        """Broadcast ``operation`` (it takes effect here at once)."""
        return self._handle(self.endpoint.broadcast(operation))

    def receive(self, packet: object) -> list[Transmit]:
        return self._handle(self.endpoint.receive(packet))

    def _handle(self, actions: list[Action]) -> list[Transmit]:
        out: list[Transmit] = []
        for a in actions:
            if isinstance(a, Transmit):
                out.append(a)
            elif isinstance(a, Deliver):
                follow = self.endpoint.consume(a.message.id)
                self.data.effect(a.message)
                out += self._handle(follow)
            elif isinstance(a, Stable):
                self.data.on_stable(a.messages)
        return out

    @property
    def value(self) -> Any:
        return self.data.value


#: The name the examples gave it (``mailroom.replicated.Replica`` is the total-order one).
Replica = CausalReplica

__all__ = ["CausalReplica", "DataType"]
