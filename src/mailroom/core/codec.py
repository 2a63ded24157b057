"""The wire codec: every registered packet to and from bytes, compact and strictly checked.

The format, and the reference writer and reader that define it, are in
``mailroom.core.wire_format`` (its docstring is the specification: kinds, limits,
what is refused, the decode budget). This module is what runs once per packet on
the wire: ``encode`` and ``decode`` take the common shapes (small and large ints,
short strings, counter tuples, a batch's scalar payloads, None, a packet carried as
the payload) without per-value dispatch, reading each class's layout from the
registry (``mailroom.core.packets``), and hand every other value to the reference.

The shortcuts must write exactly the reference's bytes and read exactly what it
reads. The decoder's shortcuts give up on anything unusual (malformed bytes
included) and the reference then decodes the whole packet, accepting it or raising
its precise error. Both are checked against the reference when this module is
imported (``mailroom.core.codec_check``: boundary values of every shortcut, and
malformed bytes), so a shortcut that drifts from the format fails at import, and
exhaustively by the property tests (tests/test_codec.py, tests/test_codec_fuzz.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mailroom.core.codec_check import check_shortcuts
from mailroom.core.errors import LocalError, MailroomError, RemoteError
from mailroom.core.packets import PACKETS, VERSION, Layout, packet_tag
from mailroom.core.wire import carried_problem, is_plain
from mailroom.core.wire_format import (
    COUNTERS,
    DECODE_BASE_BYTES,
    DECODE_BASE_CELLS,
    DECODE_BYTES_PER_BYTE,
    DECODE_CELLS_PER_BYTE,
    FIXINT,
    HEAD,
    INT,
    LIST,
    MAX_DEPTH,
    MAX_ELEMENTS,
    MAX_INT,
    NONE,
    PACKET,
    STR,
    TUPLE,
    decode_budget,
    decode_reference,
    paid,
    payload_problem,
    write_counters,
    write_value,
    write_varint,
)

_BY_CLASS = PACKETS.by_class
_BY_TAG = PACKETS.by_tag


# -- encoding -----------------------------------------------------------------------


def _layout(packet: object) -> Layout:
    """The layout of ``packet``'s class; LocalError if it is not a registered packet."""
    layout = PACKETS.layout(type(packet))
    if layout is None:
        raise LocalError(f"{type(packet).__name__} is not a registered @packet class")
    return layout


#: Carried packets written so far in one ``encode_all`` call: id -> (packet, depth,
#: its bytes, the cells they charge). The packet is kept, so its id stays its own.
Memo = dict[int, tuple[object, int, bytes, int]]


def _write_fields(
    out: bytearray,
    packet: Any,
    layout: Layout,
    depth: int,
    spent: list[int],
    carrier: str,
    memo: Memo | None = None,
) -> None:
    """A packet's tag and fields: the bytes and refusals of ``wire_format.write_packet``.

    ``carrier``: the name of the packet class carrying this one as its payload ("" at
    the top), whose other fields must then be plain data. ``memo``: see ``encode_all``.
    """
    out += layout.tag_bytes
    payload_at = layout.payload_at
    at = -1
    for value in layout.values(packet):
        at += 1
        kind = type(value)
        if kind is int:
            if 0 <= value < 0x80:
                out.append(FIXINT | value)
                continue
            if -MAX_INT <= value < MAX_INT:
                z = value * 2 if value >= 0 else -value * 2 - 1
                if 0x80 <= z < 0x4000:  # two bytes: low 7 bits with the high bit, the rest
                    out += bytes((INT, (z & 0x7F) | 0x80, z >> 7))
                else:
                    out.append(INT)
                    write_varint(out, z)
                continue
        elif kind is str:
            if len(value) < 0x80 and value.isascii():
                out.append(STR)
                out.append(len(value))
                out += value.encode("ascii")
                continue
        elif value is None:
            out.append(NONE)
            continue
        elif at == payload_at:
            inner = _BY_CLASS.get(kind)
            if inner is not None and depth < MAX_DEPTH:
                if memo is None or not _replay(out, value, depth, spent, memo):
                    start, before = len(out), spent[0]
                    out.append(PACKET)
                    _write_fields(out, value, inner, depth + 1, spent, layout.name, memo)
                    if memo is not None:
                        memo[id(value)] = (value, depth, bytes(out[start:]), spent[0] - before)
                continue
            if (problem := payload_problem(value)) is not None:
                raise LocalError(f"{layout.name} payload: {problem}")
        elif kind is tuple and value and all(type(v) is int and 0 <= v < MAX_INT for v in value):
            _write_vector(out, value, spent)
            continue
        if carrier and at != payload_at and not is_plain(value):
            raise LocalError(f"{carrier} payload: {carried_problem(packet)}")
        write_value(out, value, depth, spent)


def _replay(out: bytearray, packet: object, depth: int, spent: list[int], memo: Memo) -> bool:
    """Write a carried packet's bytes again if ``memo`` has them for this depth."""
    hit = memo.get(id(packet))
    if hit is None or hit[0] is not packet or hit[1] != depth:
        return False
    out += hit[2]
    spent[0] += hit[3]
    return True


def _write_vector(out: bytearray, value: tuple[int, ...], spent: list[int]) -> None:
    """A non-empty tuple of counters: dense with one- and two-byte entries inline."""
    if 0 in value or len(value) > MAX_ELEMENTS:
        write_counters(out, value, spent)  # the sparse form may be the smaller one
        return
    out.append(COUNTERS)  # no zero entry: the dense form is the smaller one
    write_varint(out, len(value))
    for v in value:
        if v < 0x80:
            out.append(v)
        elif v < 0x4000:
            out += bytes(((v & 0x7F) | 0x80, v >> 7))
        else:
            write_varint(out, v)


def encode(packet: object) -> bytes:
    """The bytes of a registered packet; LocalError if ``decode`` would refuse them."""
    layout = _BY_CLASS.get(type(packet)) or _layout(packet)
    out, spent = bytearray(HEAD), [0]
    _write_fields(out, packet, layout, 0, spent, "")
    if spent[0]:
        return paid(out, spent[0])
    return bytes(out)


def encode_all(packets: Iterable[object]) -> list[bytes]:
    """``encode`` of each packet, in order; LocalError for the first one it refuses.

    A layer that sends one packet to several peers (a broadcast over ``Reliable``)
    wraps the same upper packet once per peer: here its bytes are written once.
    """
    memo: Memo = {}
    result = []
    for packet in packets:
        layout = _BY_CLASS.get(type(packet)) or _layout(packet)
        out, spent = bytearray(HEAD), [0]
        _write_fields(out, packet, layout, 0, spent, "", memo)
        result.append(paid(out, spent[0]) if spent[0] else bytes(out))
    return result


def value_size(value: object) -> int:
    """Bytes that ``value`` takes as one field of a packet."""
    out = bytearray()
    write_value(out, value, 0, [0])
    return len(out)


def metadata_bytes(packet: object) -> int:
    """Encoded bytes of ``packet`` that are not its payload: the price of ordering."""
    size = len(encode(packet))
    if hasattr(packet, "payload"):
        size -= value_size(packet.payload)
    return size


# -- decoding -----------------------------------------------------------------------


class _GiveUp(MailroomError):
    """The shortcuts met something they leave to the reference reader (caught inside
    this module: it never reaches a caller)."""

    def __init__(self) -> None:
        super().__init__("left to the reference reader")


#: What the shortcuts raise on bytes they leave to the reference (truncation is an
#: IndexError; a class's own checks raise TypeError or ValueError).
GIVE_UP = (_GiveUp, IndexError, UnicodeDecodeError, LocalError, TypeError, ValueError)


def _read_varint(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A varint of more than one byte at ``pos``: (value, position after it)."""
    b = data[pos + 1]
    if b < 0x80:  # the common two-byte case (up to 16383)
        if b == 0:
            raise _GiveUp  # non-minimal
        return (data[pos] & 0x7F) | (b << 7), pos + 2  # below every limit used here
    value = shift = 0
    for _ in range(10):
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if b == 0 or value >= limit:
                raise _GiveUp
            return value, pos
        shift += 7
    raise _GiveUp


def _read_size(data: bytes, pos: int, limit: int) -> tuple[int, int]:
    """A length or count at ``pos`` that the bytes left can hold."""
    size = data[pos]
    if size < 0x80:
        pos += 1
    else:
        size, pos = _read_varint(data, pos, limit)
    if size > len(data) - pos:
        raise _GiveUp
    return size, pos


def _read_vector(data: bytes, pos: int) -> tuple[tuple[int, ...], int]:
    """The body of kind 9 (dense counters) at ``pos``."""
    size = data[pos]
    if size < 0x80 and size < len(data) - pos:  # a short count, inline
        pos += 1
    else:
        size, pos = _read_size(data, pos, MAX_ELEMENTS + 1)
    entries = []
    for _ in range(size):
        v = data[pos]
        if v < 0x80:
            pos += 1
        elif 0 < data[pos + 1] < 0x80:  # two bytes, minimal: inline
            v = (v & 0x7F) | (data[pos + 1] << 7)
            pos += 2
        else:
            v, pos = _read_varint(data, pos, MAX_INT)
        entries.append(v)
    return tuple(entries), pos


def _read_scalars(data: bytes, pos: int, kind: int) -> tuple[Any, int]:
    """The body of a tuple or list of short strings, small ints and None (a batch's
    payloads) at ``pos``; _GiveUp on any other item."""
    size = data[pos]
    if size < 0x80 and size < len(data) - pos:  # a short count, inline
        pos += 1
    else:
        size, pos = _read_size(data, pos, MAX_INT)
    items: list[Any] = []
    for _ in range(size):
        item = data[pos]
        if item == STR and data[pos + 1] < 0x80:
            stop = pos + 2 + data[pos + 1]
            if stop > len(data):
                raise _GiveUp
            items.append(data[pos + 2 : stop].decode("utf-8"))
            pos = stop
        elif item >= FIXINT:
            items.append(item - FIXINT)
            pos += 1
        elif item == NONE:
            items.append(None)
            pos += 1
        else:
            raise _GiveUp
    return (tuple(items) if kind == TUPLE else items), pos


def _read_packet(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    """The packet whose tag is at ``pos``, its fields at ``depth``: (packet, position
    after it); GIVE_UP on anything the reference should judge.

    It reads only dense values (ints, strings, counters, scalar tuples, None) and a
    packet in the payload field, so what it builds is paid for in bytes and a carried
    packet's other fields are plain data.
    """
    cls = _BY_TAG.get((data[pos] << 8) | data[pos + 1])
    if cls is None:
        raise _GiveUp
    layout = _BY_CLASS[cls]
    pos += 2
    values: list[Any] = []
    append = values.append
    payload_at = layout.payload_at
    value: Any
    for at in range(len(layout.names)):
        kind = data[pos]
        pos += 1
        if kind >= FIXINT:
            append(kind - FIXINT)
            continue
        if kind == STR:
            size = data[pos]
            if size < 0x80 and size < len(data) - pos:  # a short string, inline
                pos += 1
            else:
                size, pos = _read_size(data, pos, MAX_INT)
            append(data[pos : pos + size].decode("utf-8"))
            pos += size
            continue
        if kind == NONE:
            append(None)
            continue
        if kind == INT:  # a zigzag varint, not a small int; two bytes inline
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif 0 < data[pos + 1] < 0x80:
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _read_varint(data, pos, 2 * MAX_INT)
            value = z >> 1 if not z & 1 else -(z >> 1) - 1
            if 0 <= value < 0x80:
                raise _GiveUp
        elif at == payload_at:  # a vector or tuple is no payload: the reference says so
            if kind != PACKET or depth >= MAX_DEPTH:
                raise _GiveUp
            value, pos = _read_packet(data, pos, depth + 1)
        elif kind == COUNTERS:
            value, pos = _read_vector(data, pos)
        elif kind in (TUPLE, LIST) and depth < MAX_DEPTH:
            value, pos = _read_scalars(data, pos, kind)
        else:
            raise _GiveUp
        append(value)
    return cls(*values), pos


def decode(data: bytes | bytearray | memoryview) -> object:
    """The packet in ``data``; RemoteError, and nothing else, if the bytes are not
    exactly one valid packet."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise RemoteError(f"expected bytes, got {type(data).__name__}")
    try:
        raw = data if type(data) is bytes else bytes(data)
        if len(raw) > 3 and raw[0] == VERSION:
            try:
                packet, pos = _read_packet(raw, 1, 0)
            except GIVE_UP:
                pass
            else:
                if pos == len(raw):
                    return packet
        return decode_reference(raw)
    except RemoteError:
        raise
    except Exception as exc:  # MemoryError, RecursionError, a packet class's own checks
        raise RemoteError(f"packet could not be decoded: {type(exc).__name__}: {exc}") from None


check_shortcuts(encode, _read_packet, GIVE_UP)

__all__ = [
    "DECODE_BASE_BYTES",
    "DECODE_BASE_CELLS",
    "DECODE_BYTES_PER_BYTE",
    "DECODE_CELLS_PER_BYTE",
    "MAX_ELEMENTS",
    "VERSION",
    "decode",
    "decode_budget",
    "encode",
    "encode_all",
    "metadata_bytes",
    "packet_tag",
]
