"""Packets as plain data: the JSON-safe form used by snapshots and, later, the codec."""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from mailroom.core.errors import LocalError

P = TypeVar("P")

#: Packet classes by name: the packets that may travel as another layer's payload
#: and that snapshots (and the codec) know how to rebuild.
PACKET_TYPES: dict[str, type] = {}
PACKET_KEY = "$packet"


def packet(cls: type[P]) -> type[P]:
    """Class decorator: register an attrs packet class by its name."""
    PACKET_TYPES[cls.__name__] = cls
    return cls


def is_packet(value: object) -> bool:
    return PACKET_TYPES.get(type(value).__name__) is type(value)


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
    "is_packet",
    "packet",
    "packet_from_data",
    "packet_to_data",
    "plain",
    "unplain",
]
