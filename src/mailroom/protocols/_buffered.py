"""Endpoints whose mail room is a ``DependencyBuffer``: FIFO, RST, CBCAST, tagged broadcast.

Each holds a received packet as the ``index``-th of its sender's stream with a
vector of needs (its own ``_offer``), and delivers what the buffer releases. What they
share is said once here: counting deliveries and duplicates, ``buffered``, ``pending``,
and the mail room as a persistent field (``mail_room``), kept in arrival order so that
a restored endpoint releases cascades in the same order, and read back by offering
each packet again as if it arrived.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from mailroom.core.actions import Action
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.core.pending import Pending
from mailroom.core.persist import Field, snap_list
from mailroom.core.wire import packet_from_data, packet_to_data
from mailroom.protocols._buffer import DependencyBuffer


class BufferedEndpoint(EndpointBase):
    """An endpoint with a ``DependencyBuffer`` mail room (its ``_buffer``) over its
    delivered counts.

    What the four share are helpers each endpoint calls with what is its own; nothing
    here calls down into a subclass. ``_take`` takes one packet offered, ``_run``
    packets offered one after another (and what each releases), ``_drained`` hands
    out what the mail room releases as the endpoint builds its deliveries,
    ``_pending_of`` says what waits, and ``mail_room`` is the persistent field, given
    the endpoint's own check and offer.
    """

    #: what ``pending`` says a held message waits for (``{pid}``: this process): on a
    #: channel to this process, messages; a broadcast waits for its sender's seqs
    waits_for: ClassVar[str] = "message to P{pid}"
    _buffer: DependencyBuffer[Any]

    def _take(self, held: bool, deliver: Callable[[Any], Action]) -> list[Action]:
        """A valid packet offered (``held``: it was new): what the mail room now
        releases, each made by ``deliver``; if it was not new, one duplicate."""
        if held:
            return self._drained(deliver)
        self.duplicates += 1
        return []

    def _run(self, offered: Iterable[bool], drain: Callable[[], list[Action]]) -> list[Action]:
        """Valid packets arriving one after another (``offered`` holds each as it is
        walked: True if it was new): after each new one, what ``drain`` releases. If none
        was new, that is one duplicate (a copy, a copy of a batch, or our own echo)."""
        actions: list[Action] = []
        fresh = False
        for held in offered:
            if held:
                fresh = True
                actions += drain()
        if not fresh:
            self.duplicates += 1
        return actions

    def _drained(self, deliver: Callable[[Any], Action]) -> list[Action]:
        """Deliver what the mail room releases, oldest arrival first, each counted and
        made into its ``Deliver`` by ``deliver``."""
        actions: list[Action] = []
        buffer = self._buffer
        counts = buffer.delivered
        while (p := buffer.pop_ready()) is not None:
            counts[p.sender] += 1
            actions.append(deliver(p))
            buffer.delivered_one(p.sender)
        return actions

    def buffered(self) -> int:
        return len(self._buffer)

    def _pending_of(self, message: Callable[[Any], Message]) -> list[Pending]:
        """What waits in the mail room (each held packet's ``message``), and for what."""
        unit = self.waits_for.format(pid=self.pid)
        return [
            Pending(message(p), self._buffer.waits(s, i, unit)) for s, i, p in self._buffer.items()
        ]

    # -- the mail room's snapshot field (``mail_room``) ------------------------------
    def dump_mail_room(self) -> list[dict[str, Any]]:
        """The mail room's packets in arrival order, as data."""
        return [packet_to_data(p) for p in self._buffer.by_arrival()]

    def restore_mail_room(
        self, data: object, *, packet_type: type, key: str, check: Check, offer: Offer
    ) -> None:
        """Offer each packet of ``data`` again, checked as if it arrived; LocalError if
        one is refused, delivered or held twice, or was deliverable."""
        for item in snap_list(data, key):
            if not offer(self, check(self, packet_from_data(packet_type, item))):
                raise LocalError(f"snapshot field {key} holds a packet delivered or held twice")
        if self._buffer.has_ready():
            raise LocalError(f"snapshot field {key} holds a packet that was deliverable")


#: An endpoint's check of a packet from the network (the packet, or RemoteError).
Check = Callable[[Any, object], Any]
#: An endpoint's offer of a checked packet to its mail room (False: delivered or held).
Offer = Callable[[Any, Any], bool]


def mail_room(cls: type, check: Check, offer: Offer, key: str = "buffer") -> Field:
    """The persistent field of a ``BufferedEndpoint``'s mail room: its packets (of
    ``cls``) in arrival order. Read back, each is checked (``check``, the endpoint's
    own) and offered again (``offer``); one the protocol refuses, one delivered or
    held twice, or one that was deliverable makes the snapshot a LocalError."""
    load = functools.partial(
        BufferedEndpoint.restore_mail_room, packet_type=cls, key=key, check=check, offer=offer
    )
    return Field.custom(key, BufferedEndpoint.dump_mail_room, load)


__all__ = ["BufferedEndpoint", "mail_room"]
