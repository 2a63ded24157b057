"""Received packets dispatched by their exact class: the one convention of every endpoint.

Each endpoint class states, once and at class level, which packet classes it receives
and which of its methods handles each::

    RECEIVES = Receivers(
        "Sequencer",
        "a request or an order",
        {SequencerRequest: _on_request, SequencerOrder: _on_order},
    )

    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES(self, packet)

An endpoint whose commonest packet has a fast path (FIFO's and CBCAST's next packet
while nothing is held) checks that case first and hands everything else to its table.

A packet of any other class (a subclass included: the wire format decodes exact
classes, and a look-alike must not pass for one) is a :class:`RemoteError` naming the
endpoint, what it expected and what came, and the endpoint's state is unchanged. A
variant that receives one more kind of packet states its own table with
:meth:`Receivers.extended`; it never edits its base's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from mailroom.core.actions import Action
from mailroom.core.errors import RemoteError

__all__ = ["Handler", "Receivers"]

E = TypeVar("E")

#: A method that handles one class of received packet (unbound: it is given the endpoint).
Handler = Callable[[E, Any], list[Action]]


class Receivers(Generic[E]):
    """An endpoint class's handlers of received packets, by the packet's exact class."""

    __slots__ = ("expected", "owner", "table")

    def __init__(self, owner: str, expected: str, table: Mapping[type, Handler[E]]) -> None:
        #: the endpoint's name and, in words, what it receives (for the error message)
        self.owner = owner
        self.expected = expected
        self.table: Mapping[type, Handler[E]] = MappingProxyType(dict(table))

    def __call__(self, endpoint: E, packet: object) -> list[Action]:
        """Hand ``packet`` to its handler; RemoteError if this endpoint never receives it."""
        handler = self.table.get(type(packet))
        if handler is None:
            raise RemoteError(f"{self.owner} expected {self.expected}, got {type(packet).__name__}")
        return handler(endpoint, packet)

    def kinds(self) -> frozenset[type]:
        """The packet classes received."""
        return frozenset(self.table)

    def extended(self, owner: str, expected: str, more: Mapping[type, Handler[E]]) -> Receivers[E]:
        """A new table: these handlers and ``more`` (which win where both name a class)."""
        return Receivers(owner, expected, {**self.table, **more})
