"""The codec's shortcuts checked against the wire format's reference, at import.

``mailroom.core.codec`` writes and reads the common values without the reference
functions of ``mailroom.core.wire_format``. ``check_shortcuts`` runs when the codec
is imported: for the boundary values of every shortcut (and values next to them that
the shortcuts must leave to the reference), as a field, as a payload and inside a
carried packet, the codec must write the reference's bytes (or refuse what it
refuses), and its reader must read from them what the reference reads, or give up;
malformed bytes next to those boundaries must never be read into a packet. A
shortcut that drifts from the format is an AssertionError at import, not a wrong
byte on the wire. The property tests then check the same over random packets.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import Any

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.packets import PACKETS, packet_tag
from mailroom.core.wire_format import decode_reference, encode_reference

#: Values at and next to every shortcut's boundaries (one- and two-byte varints, the
#: 65-bit range, short and long, ASCII and other strings, dense and sparse vectors,
#: a batch's scalar payloads), and values of every kind the shortcuts leave alone.
SAMPLES: tuple[Any, ...] = (
    *(0, 1, 127, 128, 129, 8191, 8192, 16383, 16384, 2**21, 2**63, 2**64 - 1, 2**64),
    *(-1, -63, -64, -65, -8192, -8193, -(2**64), -(2**64) - 1, True, False, None),
    *(0.0, -2.5e300, float("inf"), "", "a", "é", "x" * 127, "x" * 128, "é" * 70, "\ud800"),
    *((), (0,), (5,), (1, 2, 3), (0, 0, 0, 5), (127, 128, 16383, 16384, 2**40), (2**64,)),
    *((0,) * 40 + (3,), (1,) * 130, (0,) * 200 + (2**30,), (-1, 2), (True, 1)),
    *(((1, 2), (3, 4)), ((0, 0), (0, 5)), ("a", 1, None), ("é", "x" * 130), (1.5,)),
    *(("a", (1,)), [], [1, "a", None], ["x" * 200], {"a": 1}, {1: 2}, {"": None}),
    *({"abcde": "x"}, VectorClock((1, 0))),
    *(MessageId(1, 200), b"bytes"),
)

#: Malformed bodies next to the shortcuts' boundaries: non-minimal and over-long
#: varints, small ints written long, lengths past the end, invalid UTF-8.
MALFORMED: tuple[bytes, ...] = (
    b"\x03\x02",
    b"\x03\x80\x00",
    b"\x03\xff\x00",
    b"\x03" + b"\xff" * 10 + b"\x01",
    b"\x05\x02a",
    b"\x05\x81\x00",
    b"\x05\x01\xff",
    b"\x05\x02\xc3\x28",
    b"\x09\x02\x01",
    b"\x09\x01\x80\x00",
    b"\x09\x81\x00",
    b"\x09\x01" + b"\xff" * 10 + b"\x01",
    b"\x07\x02\x05\x01a\x05\x01",
    b"\x07\x01\x05\x01\xff",
    b"\x06\x03\x80\x80",
    b"\x07\x01\x05\x81\x00",
    b"\x0d\xff\xff",
    b"\x09\xff\xff\xff\x7f",
    b"\x03\x81\x80\x00",
    b"\x05\x81\x80\x00",
    b"\x09\x01\x81\x80\x00",
    b"\x07\x01\x7f",
    b"\x07\x01\x05\x02a",
    b"\x06\x01\x05\x03ab",
)


def _picture(value: Any) -> Any:
    """A type-strict picture of a value: 1, 1.0 and True differ; tuples and lists differ."""
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        return (type(value).__name__, tuple(_picture(getattr(value, f.name)) for f in fields))
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(_picture(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, _picture(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


def _free_name(stem: str) -> str:
    """A class name neither registered nor sharing a registered tag."""
    for k in range(1000):
        name = f"{stem}{k}"
        tag = packet_tag(type(name, (), {}))
        if name not in PACKETS.by_name and tag not in PACKETS.by_tag:
            return name
    raise AssertionError("no free packet name for the codec check")


def _outcome(run: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", run())
    except LocalError:
        return ("refused", None)


def _probes(field: type, carrier: type) -> Iterator[object]:
    """Each sample as a field, as the last field, as a payload, and in a carried packet."""
    for value in SAMPLES:
        yield field(value, None)
        yield field(None, 0, value)
        yield field(0, value)
        yield carrier(1, field(value, None))


def _check_writer(encode: Callable[[object], bytes], packet: object) -> bytes | None:
    fast, reference = _outcome(lambda: encode(packet)), _outcome(lambda: encode_reference(packet))
    if fast != reference:
        raise AssertionError(f"codec shortcut writes {fast}, the reference {reference}: {packet!r}")
    result: bytes | None = reference[1]
    return result


def _check_reader(read: Callable[..., tuple[object, int]], give_up: Any, data: bytes) -> None:
    """The shortcut reader reads ``data`` as the reference does, or gives up."""
    try:
        packet, pos = read(data, 1, 0)
    except give_up:
        return
    try:
        reference = _picture(decode_reference(data))
    except RemoteError as exc:
        if pos == len(data):
            raise AssertionError(
                f"codec shortcut reads {data!r}, which is refused: {exc}"
            ) from None
        return  # trailing bytes: decode itself refuses the shortcut's result
    if pos == len(data) and _picture(packet) != reference:
        raise AssertionError(f"codec shortcut reads {data!r} as {packet!r}, not {reference!r}")


def check_shortcuts(
    encode: Callable[[object], bytes],
    read: Callable[..., tuple[object, int]],
    give_up: tuple[type[BaseException], ...],
) -> None:
    """AssertionError unless ``encode`` and ``read`` (the codec's shortcuts) agree with
    the reference on every sample, malformed ones included."""
    field = attrs.make_class(
        _free_name("_CodecProbe"),
        {"value": attrs.field(), "payload": attrs.field(), "last": attrs.field(default=None)},
        frozen=True,
    )
    carrier = attrs.make_class(_free_name("_CodecCarrier"), ["seq", "payload"], frozen=True)
    with PACKETS.registered(field, carrier):
        head = encode(field(0, None))[:3]
        for packet in _probes(field, carrier):
            data = _check_writer(encode, packet)
            if data is not None:
                for cut in range(3, len(data)) if len(data) < 40 else (3, len(data) - 1):
                    _check_reader(read, give_up, data[:cut])
                _check_reader(read, give_up, data)
        inner = head[1:] + b"\x80\x00\x00"  # a probe's tag and fields, for a packet's place
        for body in (*MALFORMED, *(bytes((kind,)) + inner for kind in range(16))):
            for data in (body + b"\x00\x00", b"\x80" + body + b"\x00", b"\x80\x00" + body):
                _check_reader(read, give_up, head + data)
