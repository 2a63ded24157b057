"""Received packets dispatched by their exact class: the one convention of every endpoint.

Each endpoint class states, once and at class level, which packet classes it receives
and which of its methods handles each::

    RECEIVES = Receivers(
        "Sequencer",
        "a request or an order",
        {SequencerRequest: _on_request, SequencerOrder: _on_order},
    )

    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

An endpoint whose commonest packet has a fast path (FIFO's and CBCAST's next packet
while nothing is held) checks that case first and hands everything else to its table.

A packet of any other class (a subclass included: the wire format decodes exact
classes, and a look-alike must not pass for one) is a :class:`RemoteError` naming the
endpoint, what it expected and what came, and the endpoint's state is unchanged. A
variant that receives one more kind of packet states its own table with
:meth:`Receivers.extended`; it never edits its base's.

The table is a read-only ``dict``: the lookup is the interpreter's own (a class that
is missing raises the RemoteError from ``__missing__``), so dispatching costs what
an ``if`` on the packet's class costs, on the path of every packet received.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Generic, NoReturn, TypeVar

from mailroom.core.actions import Action
from mailroom.core.errors import RemoteError

__all__ = ["Handler", "Receivers"]

E = TypeVar("E")

#: A method that handles one class of received packet (unbound: it is given the endpoint).
Handler = Callable[[E, Any], list[Action]]


class Receivers(dict[type, Handler[E]], Generic[E]):
    """An endpoint class's handlers of received packets, by the packet's exact class
    (read-only once made)."""

    __slots__ = ("expected", "owner")

    def __init__(self, owner: str, expected: str, table: Mapping[type, Handler[E]]) -> None:
        super().__init__(table)
        #: the endpoint's name and, in words, what it receives (for the error message)
        self.owner = owner
        self.expected = expected

    def __missing__(self, kind: type) -> NoReturn:
        raise RemoteError(f"{self.owner} expected {self.expected}, got {kind.__name__}")

    def __call__(self, endpoint: E, packet: object) -> list[Action]:
        """Hand ``packet`` to its handler; RemoteError if this endpoint never receives it."""
        return self[type(packet)](endpoint, packet)

    @property
    def table(self) -> Mapping[type, Handler[E]]:
        """The handlers, by packet class (a read-only view)."""
        return MappingProxyType(self)

    def kinds(self) -> frozenset[type]:
        """The packet classes received."""
        return frozenset(self)

    def extended(self, owner: str, expected: str, more: Mapping[type, Handler[E]]) -> Receivers[E]:
        """A new table: these handlers and ``more`` (which win where both name a class)."""
        return Receivers(owner, expected, {**self, **more})

    def _read_only(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(f"{self.owner}'s table of received packets is read-only")

    __setitem__ = __delitem__ = _read_only
    update = setdefault = pop = popitem = clear = __ior__ = _read_only
