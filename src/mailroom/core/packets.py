"""The packet registry: which classes are packets, and each one's layout on the wire.

``@packet`` registers an attrs class. Its layout (type tag, field names, where the
``payload`` field is, a getter of every field value at once) is computed here, once,
and both directions of the codec and the snapshot helpers read it from here.

Classes are keyed by the class object, not by its name. Registering a class whose
name is already registered (a notebook cell defining a packet run a second time)
replaces the old class: the new one is the class of that name (``PACKET_TYPES``) and
the one that decoding builds for that tag. The old class is *retired*: its packets,
which endpoints made before the cell ran again may still hold, encode (to the same
bytes, with the same tag) and count as packets until the class is garbage collected;
the registry keeps no strong reference to it.
"""

from __future__ import annotations

import operator
import weakref
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs

from mailroom.core.errors import LocalError

P = TypeVar("P")

#: The first byte of every encoded packet (the codec's format version).
VERSION = 1


def packet_tag(cls: type) -> int:
    """The 16-bit type tag of a packet class: derived from its name, stable across runs."""
    return zlib.crc32(cls.__name__.encode()) & 0xFFFF


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple[Any, ...]]:
    """A function returning the attributes ``names`` of an object as one tuple."""
    if not names:
        return lambda p: ()
    if len(names) == 1:
        one = operator.attrgetter(names[0])
        return lambda p: (one(p),)
    return operator.attrgetter(*names)


@attrs.frozen(eq=False)
class Layout:
    """One packet class's wire layout: its tag, then its fields in declaration order.

    It holds no reference to the class, so a retired class can be collected.
    """

    name: str
    tag: int
    #: the tag as the two bytes on the wire
    tag_bytes: bytes
    #: field names, in declaration order (the order on the wire)
    names: tuple[str, ...]
    #: packet -> every field value, as a tuple in declaration order
    values: Callable[[Any], tuple[Any, ...]]
    #: index of the ``payload`` field, or -1
    payload_at: int
    #: packet -> the values of the fields other than ``payload`` (``others``, by name)
    other_values: Callable[[Any], tuple[Any, ...]]
    others: tuple[str, ...]

    @classmethod
    def of(cls, packet_class: type) -> Layout:
        """The layout of an attrs class (``attrs.fields`` in order)."""
        names = tuple(f.name for f in attrs.fields(packet_class))
        others = tuple(n for n in names if n != "payload")
        tag = packet_tag(packet_class)
        return cls(
            packet_class.__name__,
            tag,
            tag.to_bytes(2, "big"),
            names,
            _getter(names),
            names.index("payload") if "payload" in names else -1,
            _getter(others),
            others,
        )


class PacketRegistry:
    """Packet classes by class, by name and by tag; retired classes while they live."""

    def __init__(self) -> None:
        #: the current class of each name
        self.by_name: dict[str, type] = {}
        #: the layout of each current class
        self.by_class: dict[type, Layout] = {}
        #: the current class of each tag (what decoding builds)
        self.by_tag: dict[int, type] = {}
        #: classes replaced by a newer class of the same name, by weak reference: an
        #: entry goes when its class is collected
        self.retired: dict[weakref.ref[type], Layout] = {}

    def register(self, cls: type) -> Layout:
        """Add ``cls`` (replacing a class of the same name); LocalError if it cannot be one."""
        if not isinstance(cls, type) or not attrs.has(cls):
            what = cls.__name__ if isinstance(cls, type) else repr(cls)
            raise LocalError(
                f"@packet class {what} is not an attrs class: decorate it with "
                "@attrs.frozen below @packet (a dataclass or plain class cannot be one)"
            )
        layout = Layout.of(cls)
        holder = self.by_tag.get(layout.tag)
        if holder is not None and holder.__name__ != cls.__name__:
            raise LocalError(
                f"packet classes {holder.__name__} and {cls.__name__} share codec tag "
                f"{layout.tag}; rename one"
            )
        old = self.by_name.get(layout.name)
        if old is not None and old is not cls:
            self.retired[weakref.ref(old, self._collected)] = self.by_class.pop(old)
        self.retired.pop(weakref.ref(cls), None)
        self.by_name[layout.name] = cls
        self.by_class[cls] = layout
        self.by_tag[layout.tag] = cls
        return layout

    def unregister(self, cls: type) -> None:
        """Forget ``cls`` (current or retired); a class of its name it had replaced
        does not come back."""
        self.retired.pop(weakref.ref(cls), None)
        if self.by_class.pop(cls, None) is not None:
            del self.by_name[cls.__name__]
            del self.by_tag[packet_tag(cls)]

    @contextmanager
    def registered(self, *classes: type) -> Iterator[None]:
        """Register ``classes`` for the duration of a ``with`` block (for checks and
        tests that define packet classes of their own)."""
        try:
            for cls in classes:
                self.register(cls)
            yield
        finally:
            for cls in classes:
                self.unregister(cls)

    def _collected(self, ref: weakref.ref[type]) -> None:
        self.retired.pop(ref, None)

    def layout(self, cls: type) -> Layout | None:
        """The layout of a current or retired packet class; None for any other type."""
        layout = self.by_class.get(cls)
        if layout is None and self.retired:
            layout = self.retired.get(weakref.ref(cls))
        return layout


#: The registry of every ``@packet`` class (the codec and snapshots read it).
PACKETS = PacketRegistry()
#: Packet classes by name: the packets that may travel as another layer's payload
#: and that snapshots (and the codec) know how to rebuild. Kept by ``@packet``.
PACKET_TYPES: dict[str, type] = PACKETS.by_name
_BY_CLASS = PACKETS.by_class


def packet(cls: type[P]) -> type[P]:
    """Class decorator: register an attrs class as a packet (above ``@attrs.frozen``).

    A packet's fields travel in declaration order, each JSON data, a vector (tuple of
    counters), a matrix, a ``VectorClock``, a ``MessageId`` or another packet; a field
    named ``payload`` carries the application's message. LocalError if ``cls`` is not
    an attrs class, or if its tag (from its name) collides with another packet's.
    """
    PACKETS.register(cls)
    return cls


def is_packet(value: object) -> bool:
    """Whether ``value`` is an instance of a registered packet class (not a subclass)."""
    cls = type(value)
    return cls in _BY_CLASS or (bool(PACKETS.retired) and PACKETS.layout(cls) is not None)


__all__ = [
    "PACKETS",
    "PACKET_TYPES",
    "VERSION",
    "Layout",
    "PacketRegistry",
    "is_packet",
    "packet",
    "packet_tag",
]
