"""Endpoints whose mail room is a ``DependencyBuffer``: FIFO, RST, CBCAST, tagged broadcast.

Each holds a received packet as the ``index``-th of its sender's stream with a
vector of needs (``_offer``), and delivers what the buffer releases. What they share
is said once here: counting deliveries, ``buffered``, ``pending``, and the mail room
as a persistent field (``mail_room``), kept in arrival order so that a restored
endpoint releases cascades in the same order, and read back by offering each packet
again as if it arrived.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any, ClassVar

from mailroom.core.actions import Action, Deliver
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.core.pending import Pending
from mailroom.core.persist import Field, snap_list
from mailroom.core.wire import packet_from_data, packet_to_data
from mailroom.protocols._buffer import DependencyBuffer


class BufferedEndpoint(EndpointBase):
    """An endpoint with a ``DependencyBuffer`` mail room over its delivered counts.

    A subclass sets ``_buffer`` and defines ``_validate`` (a packet from the network,
    or RemoteError), ``_offer`` (hold a valid packet: False if it was delivered or is
    held already) and ``_message`` (the message a packet delivers); ``_delivery``, the
    ``Deliver`` of that message, may be built faster (``mailroom.core.actions.delivery``).
    """

    #: what ``pending`` says a held message waits for (``{pid}``: this process): on a
    #: channel to this process, messages; a broadcast waits for its sender's seqs
    waits_for: ClassVar[str] = "message to P{pid}"
    _buffer: DependencyBuffer[Any]

    def _validate(self, packet: object) -> Any:
        raise NotImplementedError

    def _offer(self, packet: Any) -> bool:
        raise NotImplementedError

    def _message(self, packet: Any) -> Message:
        raise NotImplementedError

    def _delivery(self, packet: Any) -> Deliver:
        return Deliver(self._message(packet))

    def _take(self, packet: Any) -> list[Action]:
        """A valid packet: held and what it releases delivered, or counted as a duplicate."""
        if not self._offer(packet):
            self.duplicates += 1  # a duplicate (or, for a broadcast, our own echo)
            return []
        return self._drain()

    def _take_run(self, packets: Iterable[Any]) -> list[Action]:
        """The valid packets a batch stands for, as if they arrived one after another:
        each held and what it releases delivered; a batch that brings nothing new counts
        as one duplicate."""
        actions: list[Action] = []
        fresh = False
        for p in packets:
            if self._offer(p):
                fresh = True
                actions += self._drain()
        if not fresh:
            self.duplicates += 1  # a duplicate of a batch (or of all its messages)
        return actions

    def _drain(self) -> list[Action]:
        """Deliver what the mail room releases, oldest arrival first, counting each."""
        actions: list[Action] = []
        buffer = self._buffer
        counts = buffer.delivered
        while (p := buffer.pop_ready()) is not None:
            counts[p.sender] += 1
            actions.append(self._delivery(p))
            buffer.delivered_one(p.sender)
        return actions

    def buffered(self) -> int:
        return len(self._buffer)

    # -- the mail room's snapshot field (``mail_room``) ------------------------------
    @classmethod
    def mail_room_field(cls, packet_type: type, key: str = "buffer") -> Field:
        """The persistent field of the mail room: its packets (of ``packet_type``) in
        arrival order, each validated and offered again when read back."""
        load = functools.partial(cls._restore_mail_room, packet_type=packet_type, key=key)
        return Field.custom(key, cls._dump_mail_room, load)

    def _dump_mail_room(self) -> list[dict[str, Any]]:
        return [packet_to_data(p) for p in self._buffer.by_arrival()]

    def _restore_mail_room(self, data: object, *, packet_type: type, key: str) -> None:
        for item in snap_list(data, key):
            if not self._offer(self._validate(packet_from_data(packet_type, item))):
                raise LocalError(f"snapshot field {key} holds a packet delivered or held twice")
        if self._buffer.has_ready():
            raise LocalError(f"snapshot field {key} holds a packet that was deliverable")

    def pending(self) -> list[Pending]:
        unit = self.waits_for.format(pid=self.pid)
        return [
            Pending(self._message(p), self._buffer.waits(s, i, unit))
            for s, i, p in self._buffer.items()
        ]


def mail_room(cls: type, key: str = "buffer") -> Field:
    """The persistent field of a ``BufferedEndpoint``'s mail room: its packets (of
    ``cls``) in arrival order. Read back, each is validated and offered again; one
    the protocol refuses, one delivered or held twice, or one that was deliverable
    makes the snapshot a LocalError (``BufferedEndpoint.mail_room_field``)."""
    return BufferedEndpoint.mail_room_field(cls, key)


__all__ = ["BufferedEndpoint", "mail_room"]
