"""What the protocols' packet classes share: which application messages a packet carries.

``carried_message_id`` (mailroom.core.wire) asks a packet's ``carries()``, and
``carried_message_ids`` a batch's ``carries_all()``. A packet class says which fields
name its message with one line: ``carries = carries_message("origin", "seq")``,
``carries = carries_seq`` (the common (``sender``, ``seq``)), ``carries =
carries_stamped("vc")`` (a broadcast whose seq is its stamp's entry for the sender) or
``carries = carries_none`` (a control packet); a batch adds ``carries_all`` and
``carries_last`` (its highest id alone, for a receiver that needs no more, without
building the others): ``carries_batch`` and ``carries_stamped_batch`` give all three.
These are methods, not a base class: a packet class with one more base costs every
packet a little more to create and free, on the per-packet path.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import attrs

from mailroom.core.messages import MessageId

#: A batch packet's ``payloads`` field: its messages' payloads, in order.
Payloads = tuple[Any, ...]

#: A packet class's ``carries`` method.
Carries = Callable[[Any], MessageId | None]

#: A batch packet class's ``carries_all`` method.
CarriesAll = Callable[[Any], tuple[MessageId, ...]]


def carries_message(origin: str, seq: str) -> Carries:
    """``carries()`` of a packet whose fields ``origin`` and ``seq`` name its message."""
    fields = operator.attrgetter(origin, seq)

    def carries(packet: Any) -> MessageId | None:
        return MessageId(*fields(packet))

    carries.__doc__ = f"The application message this packet carries: ({origin}, {seq})."
    return carries


def carries_stamped(stamp: str) -> Carries:
    """``carries()`` of a broadcast whose message's seq is its vector ``stamp``'s entry
    for its ``sender`` (a batch: its first message's)."""
    vector = operator.attrgetter(stamp)

    def carries(packet: Any) -> MessageId | None:
        return MessageId(packet.sender, vector(packet)[packet.sender])

    carries.__doc__ = f"The application message this packet carries: (sender, {stamp}[sender])."
    return carries


def carries_stamped_batch(stamp: str) -> tuple[Carries, CarriesAll, Carries]:
    """``carries``, ``carries_all`` and ``carries_last`` of a batch of broadcasts whose
    vector ``stamp`` is its first message's (message i's seq is ``stamp[sender] + i``),
    one per payload."""
    vector = operator.attrgetter(stamp)

    def carries_all(packet: Any) -> tuple[MessageId, ...]:
        return batch_ids(packet.sender, vector(packet)[packet.sender], packet.payloads)

    def carries_last(packet: Any) -> MessageId | None:
        return last_id(packet.sender, vector(packet)[packet.sender], packet.payloads)

    carries_all.__doc__ = "Every application message this packet carries, in order."
    carries_last.__doc__ = "The last application message this packet carries (None: none)."
    return carries_stamped(stamp), carries_all, carries_last


#: ``carries()`` of a packet that carries message (``sender``, ``seq``).
carries_seq = carries_message("sender", "seq")


def carries_none(packet: Any) -> MessageId | None:
    """The application message this packet carries: none, it is a control packet."""
    return None


def batch_ids(origin: int, first_seq: object, payloads: object) -> tuple[MessageId, ...]:
    """The ids of a batch's messages, (origin, first_seq), (origin, first_seq + 1)...,
    one per payload: bounded by the packet's own length (TypeError if malformed)."""
    first, count = _range(first_seq, payloads)
    return tuple(MessageId(origin, first + i) for i in range(count))


def last_id(origin: int, first_seq: object, payloads: object) -> MessageId | None:
    """The id of a batch's last message, (origin, first_seq + len(payloads) - 1), without
    building the others (None if it carries none); TypeError if malformed."""
    first, count = _range(first_seq, payloads)
    return MessageId(origin, first + count - 1) if count else None


def _range(first_seq: object, payloads: object) -> tuple[int, int]:
    """A batch's first seq and its number of messages; TypeError if they are not."""
    if not isinstance(payloads, tuple | list):
        raise TypeError(f"payloads is a {type(payloads).__name__}, not a sequence")
    if type(first_seq) is not int:
        raise TypeError(f"first_seq is a {type(first_seq).__name__}, not an int")
    return first_seq, len(payloads)


def carries_range(origin: str, first_seq: str) -> Callable[[Any], tuple[MessageId, ...]]:
    """``carries_all()`` of a batch whose fields ``origin`` and ``first_seq`` name its
    first message, one message per payload (its ``carries()`` is ``carries_message``
    of the same fields)."""
    fields = operator.attrgetter(origin, first_seq, "payloads")

    def carries_all(packet: Any) -> tuple[MessageId, ...]:
        return batch_ids(*fields(packet))

    carries_all.__doc__ = "Every application message this packet carries, in order."
    return carries_all


def carries_range_last(origin: str, first_seq: str) -> Carries:
    """``carries_last()`` of a batch whose fields ``origin`` and ``first_seq`` name its
    first message, one message per payload."""
    fields = operator.attrgetter(origin, first_seq, "payloads")

    def carries_last(packet: Any) -> MessageId | None:
        return last_id(*fields(packet))

    carries_last.__doc__ = "The last application message this packet carries (None: none)."
    return carries_last


def carries_batch(origin: str, first_seq: str) -> tuple[Carries, CarriesAll, Carries]:
    """``carries``, ``carries_all`` and ``carries_last`` of a batch whose fields ``origin``
    and ``first_seq`` name its first message, one message per payload: ``carries,
    carries_all, carries_last = carries_batch("sender", "first_seq")``."""
    return (
        carries_message(origin, first_seq),
        carries_range(origin, first_seq),
        carries_range_last(origin, first_seq),
    )


@attrs.frozen
class UnicastBatch:
    """The first fields of a batch of consecutive messages from ``sender`` to ``dest``
    alone: message i is (sender, first_seq + i), one per payload. A protocol's batch
    packet adds its metadata and ``payloads`` (in that order, on the wire too)."""

    sender: int
    dest: int
    first_seq: int

    carries, carries_all, carries_last = carries_batch("sender", "first_seq")


__all__ = [
    "Carries",
    "CarriesAll",
    "Payloads",
    "UnicastBatch",
    "batch_ids",
    "carries_batch",
    "carries_message",
    "carries_none",
    "carries_range",
    "carries_range_last",
    "carries_seq",
    "carries_stamped",
    "carries_stamped_batch",
    "last_id",
]
