"""Packets as plain data: the JSON-safe form used by snapshots and traces.

The registry (``packet``, ``is_packet``, ``PACKET_TYPES``) lives in
``mailroom.core.packets`` and is re-exported here, where it always was.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.packets import PACKET_TYPES, PACKETS, is_packet, packet

if TYPE_CHECKING:
    from mailroom.core.messages import MessageId

P = TypeVar("P")

PACKET_KEY = "$packet"


#: Deeper plain data than this is refused (the codec's nesting limit).
MAX_PLAIN_DEPTH = 64


def is_plain(value: object, depth: int = 0) -> bool:
    """JSON data or tuples of it (finite floats, str keys): what ``plain`` turns into
    JSON, so a trace row or a checkpoint can hold it."""
    if depth > MAX_PLAIN_DEPTH:
        return False
    kind = type(value)
    if kind is int or kind is str or value is None or kind is bool:
        return True
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is tuple or kind is list:
        return all(is_plain(v, depth + 1) for v in value)  # type: ignore[attr-defined]
    if kind is dict:
        items = value.items()  # type: ignore[attr-defined]
        return all(type(k) is str and is_plain(v, depth + 1) for k, v in items)
    return False


#: Scalar types that are plain data whatever their value (a float may be infinite).
_PLAIN_SCALARS = frozenset((int, str, bool, type(None)))


def carried_problem(packet: object) -> str | None:
    """Why ``packet`` cannot be carried as another packet's payload, or None: its fields
    other than ``payload`` must be plain data, or it could be neither traced nor
    checkpointed when it reaches an application."""
    layout = PACKETS.layout(type(packet))
    if layout is None:
        return f"a {type(packet).__name__} is not a registered @packet class"
    values = layout.other_values(packet)
    for value in values:
        kind = type(value)
        if kind is int or kind is str or value is None:
            continue
        if kind is tuple and _PLAIN_SCALARS.issuperset(map(type, value)):
            continue  # a vector, or a batch's payloads of text and numbers
        if not is_plain(value):
            name = layout.others[[v is value for v in values].index(True)]
            return (
                f"carried {type(packet).__name__} field {name} holds a {kind.__name__}, "
                "not plain data"
            )
    return None


def naming_packet(packet: object) -> object:
    """The packet whose class names the messages ``packet`` carries: the innermost packet
    of a ``Stack``'s layers (each ``payload`` that is a packet), stopping at a class that
    renames its payload's message (``names_its_message``)."""
    while True:
        inner = getattr(packet, "payload", None)
        if not is_packet(inner) or getattr(type(packet), "names_its_message", False):
            return packet
        packet = inner


def carried_message_id(packet: object) -> MessageId | None:
    """The id of the application message ``packet`` carries, or None for a control packet.

    A packet whose ``payload`` is itself a packet (a lower layer of a ``Stack``, e.g.
    Reliable under CBCAST) carries what that packet carries; otherwise its class says
    with a ``carries()`` method, and a class without one carries no message. It agrees
    with the ``message_id`` of every ``Transmit`` an endpoint emits, so a receiver can
    check a frame's header against the packet instead of trusting it. RemoteError if
    the packet's fields are too malformed to name a message. A class that renames
    its payload's message (group membership maps view ranks to identities) sets
    ``names_its_message = True`` and answers with its own ``carries()``.
    """
    return _own_id(naming_packet(packet))


def _own_id(packet: object) -> MessageId | None:
    """What ``packet``'s class says it carries (its ``carries()``), None without one."""
    method = getattr(type(packet), "carries", None)
    if method is None:
        return None
    try:
        mid: MessageId | None = method(packet)
    except (TypeError, IndexError) as exc:
        name = type(packet).__name__
        raise RemoteError(f"{name} names no well-formed message id: {exc}") from None
    return mid


def layer_message_id(packet: object, depth: int) -> MessageId | None:
    """The id of the application message ``packet`` carries, when ``depth`` layers of a
    ``Stack`` lie above the layer that sent it: the packet ``depth`` payloads down (or
    the first whose class renames its payload's message, ``names_its_message``) names
    it with its own ``carries()``. Unlike ``carried_message_id`` it never descends into
    the application's payload, which may itself be a packet naming another id: a lower
    layer's retransmission is labelled as its first transmission was. RemoteError if
    the fields are too malformed to name a message."""
    for _ in range(depth):
        inner = getattr(packet, "payload", None)
        if not is_packet(inner) or getattr(type(packet), "names_its_message", False):
            break
        packet = inner
    return _own_id(packet)


def latest_key(packet: object) -> Hashable | None:
    """Which later control packets supersede ``packet``: of two packets with equal keys
    waiting unsent for the same peer, the later makes the earlier useless (its receiver
    ends in the same state without it), so a host may write the later alone. None (a
    class without a ``latest_key()`` method): nothing supersedes it. A packet carried
    as another's payload is keyed only through its carrier's method, which adds the
    fields of its own that matter (a view)."""
    method = getattr(type(packet), "latest_key", None)
    return None if method is None else method(packet)


def carried_message_ids(packet: object) -> tuple[MessageId, ...]:
    """Every application message ``packet`` carries, in order: none for a control packet,
    one for most, several for a batch (a class with ``carries_all()``, whose first id is
    its ``carries()``). RemoteError if the fields are too malformed to name them."""
    packet = naming_packet(packet)
    method = getattr(type(packet), "carries_all", None)
    if method is None:
        mid = carried_message_id(packet)
        return () if mid is None else (mid,)
    return tuple(_asked(packet, method))


def carried_high_ids(packet: object) -> tuple[MessageId, ...]:
    """The ids that bound what ``packet`` carries: a batch class with ``carries_last()``
    (consecutive ids from one origin) gives its last alone, without building the others;
    any other packet every id, as ``carried_message_ids``. RemoteError if malformed."""
    packet = naming_packet(packet)
    method = getattr(type(packet), "carries_last", None)
    if method is None:
        return carried_message_ids(packet)
    last: MessageId | None = _asked(packet, method)
    return () if last is None else (last,)


def _asked(packet: object, method: Any) -> Any:
    """``method(packet)`` of a batch; RemoteError if its fields are too malformed."""
    try:
        return method(packet)
    except (TypeError, IndexError, ValueError) as exc:
        name = type(packet).__name__
        raise RemoteError(f"{name} names no well-formed message ids: {exc}") from None


def plain(value: Any) -> Any:
    """Tuples (vectors, matrices) become lists; everything else is already JSON data."""
    if isinstance(value, tuple):
        return [plain(v) for v in value]
    if is_packet(value):  # a packet carried as another layer's payload
        return {PACKET_KEY: type(value).__name__, **packet_to_data(value)}
    return value


def unplain(value: Any) -> Any:
    """Inverse of ``plain`` for payloads: rebuild nested packets."""
    if isinstance(value, dict) and PACKET_KEY in value:
        fields = dict(value)
        name = fields.pop(PACKET_KEY)
        if name not in PACKET_TYPES:
            raise LocalError(f"unknown packet type {name!r}")
        return packet_from_data(PACKET_TYPES[name], fields)
    return value


def packet_to_data(packet: object) -> dict[str, Any]:
    """A packet's fields as a JSON-safe dict."""
    cls: Any = type(packet)
    return {f.name: plain(getattr(packet, f.name)) for f in attrs.fields(cls)}


def packet_from_data(cls: type[P], data: object) -> P:
    """Rebuild a packet; fields with converters turn lists back into tuples."""
    if not isinstance(data, dict):
        raise LocalError(f"{cls.__name__} data must be a dict, got {type(data).__name__}")
    fields = dict(data)
    if "payload" in fields:
        fields["payload"] = unplain(fields["payload"])
    try:
        return cls(**fields)
    except TypeError as exc:
        raise LocalError(f"bad {cls.__name__} data: {exc}") from None


def as_row(value: Any) -> Any:
    """attrs converter: a vector as a tuple (left alone if it is not a sequence)."""
    if type(value) is tuple or not isinstance(value, list):
        return value
    return tuple(value)


def as_matrix(value: Any) -> Any:
    """attrs converter: a matrix as a tuple of tuples (left alone if not a sequence)."""
    if not isinstance(value, tuple | list):
        return value
    if type(value) is tuple and all(type(r) is tuple for r in value):
        return value
    return tuple(as_row(r) for r in value)


__all__ = [
    "PACKET_TYPES",
    "as_matrix",
    "as_row",
    "carried_high_ids",
    "carried_message_id",
    "carried_message_ids",
    "carried_problem",
    "is_packet",
    "is_plain",
    "latest_key",
    "layer_message_id",
    "naming_packet",
    "packet",
    "packet_from_data",
    "packet_to_data",
    "plain",
    "unplain",
]
