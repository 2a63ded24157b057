"""The wire codec: every registered packet to and from bytes, compact and strictly checked.

The codec knows no protocol. It works over every ``@packet`` attrs class in
``PACKET_TYPES``: a packet is its class's type tag followed by its fields in
declaration order, so a new protocol's packets encode without codec changes.

Format, version 1::

    packet  := VERSION (1 byte) tag (2 bytes, big-endian) value*   # one per field
    tag     := crc32(class name) & 0xFFFF                          # stable across runs
    value   := kind (1 byte) body

Kinds (the first byte of a value):

- ``0x80..0xFF``: a small non-negative int, ``kind - 0x80`` (0..127), no body;
- ``0`` None, ``1`` False, ``2`` True;
- ``3`` int (-2**64 <= v < 2**64): zigzag varint (LEB128);
- ``4`` float: 8 bytes IEEE 754, finite only;
- ``5`` str: varint length + UTF-8; ``6`` list / ``7`` tuple: varint count + values;
- ``8`` dict: varint count + (varint length + UTF-8 key, value) pairs, keys unique;
- ``9`` counters (a tuple of non-negative ints): varint count + varints;
- ``10`` sparse counters: varint count, varint non-zeros, then (gap, value) pairs,
  gap = index - previous index - 1, values non-zero;
- ``11`` matrix (a tuple of equally long counter tuples): varint rows, varint
  columns, the entries row by row as varints;
- ``12`` sparse matrix: rows, columns, non-zeros, then (gap, value) pairs over
  the row-major positions;
- ``13`` a nested packet (one layer carrying another's): tag + its fields;
- ``14`` a VectorClock: a counters value (kind 9 or 10) follows;
- ``15`` a MessageId: varint origin, varint seq.

The encoder picks the smaller of the dense and sparse forms. The decoder refuses,
with ``RemoteError``, anything it would not have produced: a wrong version, an
unknown tag or kind, truncation, trailing bytes, over-long or non-minimal varints,
lengths larger than the bytes left, invalid UTF-8, non-finite floats, duplicate
keys, sparse indices out of order or out of range, zero sparse values, vectors or
matrices of more than ``MAX_ELEMENTS`` entries, nesting deeper than 64, a
``payload`` field that is not JSON data or a packet (what ``check_payload`` allows
an application to send), a packet carried as a payload whose other fields are not
plain data (JSON data and tuples: what a trace row or a checkpoint can hold), and
field values the packet class itself rejects. ``decode`` raises nothing but
``RemoteError``, whatever the bytes (a ``MemoryError`` or ``RecursionError`` met
on the way becomes one too); ``encode`` raises ``LocalError`` for every packet
whose bytes ``decode`` would refuse.

Decoding has a budget. The sparse forms are the only values that decode into
more than a few bytes of memory per byte on the wire (a sparse 2**20 x 1 matrix
is 7 bytes), so each charges the cells it builds: a sparse vector its length, a
sparse matrix its entries plus ``ROW_CELLS`` per row. A packet of L bytes may
charge at most ``decode_budget(L) = DECODE_BASE_CELLS + DECODE_CELLS_PER_BYTE * L``
cells (the base lets any vector of up to 65,536 entries and any matrix up to 254 x 254
through, however sparse). Everything else is paid for in bytes: each list, tuple or dict
item, vector or matrix entry, string or packet takes at least one byte. So decoding
L bytes allocates at most about ``DECODE_BYTES_PER_BYTE * L + DECODE_BASE_BYTES``
bytes (tests/test_codec_fuzz.py measures it with tracemalloc over random, mutated
and worst-case inputs).
"""

from __future__ import annotations

import math
import operator
import struct
import zlib
from typing import Any

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, check_payload
from mailroom.core.wire import PACKET_TYPES, is_plain

VERSION = 1
MAX_DEPTH = 64
#: Upper bound on the entries of one decoded vector or matrix.
MAX_ELEMENTS = 1 << 20
MAX_INT = 1 << 64
#: Cells any packet may decode into, however short (see "Decoding has a budget").
DECODE_BASE_CELLS = 1 << 16
#: Cells each byte of a packet adds to its budget.
DECODE_CELLS_PER_BYTE = 8
#: What a sparse matrix row's own tuple is charged, in cells.
ROW_CELLS = 4
#: The memory bound that the budget gives, checked by the codec fuzz tests:
#: decoding L bytes allocates at most DECODE_BYTES_PER_BYTE * L + DECODE_BASE_BYTES.
DECODE_BYTES_PER_BYTE = 256
DECODE_BASE_BYTES = 2 << 20

NONE, FALSE, TRUE, INT, FLOAT, STR, LIST, TUPLE, DICT = range(9)
COUNTERS, SPARSE, MATRIX, SPARSE_MATRIX, PACKET, VCLOCK, MSGID = range(9, 16)
FIXINT = 0x80

_FLOAT = struct.Struct(">d")
_HEAD = bytes((VERSION,))


def decode_budget(size: int) -> int:
    """Cells a packet of ``size`` bytes may decode into: its sparse values' full sizes."""
    return DECODE_BASE_CELLS + DECODE_CELLS_PER_BYTE * size


def packet_tag(cls: type) -> int:
    """The 16-bit type tag of a packet class: derived from its name, stable across runs."""
    return zlib.crc32(cls.__name__.encode()) & 0xFFFF


_tags: dict[int, type] = {}
_tags_from: int = -1


def _tag_table() -> dict[int, type]:
    """Tag -> class for every registered packet (rebuilt when the registry grows)."""
    global _tags_from
    if _tags_from != len(PACKET_TYPES):
        table: dict[int, type] = {}
        for cls in PACKET_TYPES.values():
            tag = packet_tag(cls)
            if tag in table and table[tag] is not cls:
                raise LocalError(
                    f"packet classes {table[tag].__name__} and {cls.__name__} share codec "
                    f"tag {tag}; rename one"
                )
            table[tag] = cls
        _tags.clear()
        _tags.update(table)
        _encoders.clear()
        _decoders.clear()
        _tags_from = len(PACKET_TYPES)
    return _tags


def _payload_problem(value: object) -> str | None:
    """Why ``value`` cannot be a ``payload`` field, or None: it must be JSON data, or a
    packet whose other fields are plain data (``check_payload``)."""
    try:
        check_payload(value)
    except LocalError as exc:
        return str(exc)
    return None


# -- encoding ---------------------------------------------------------------------
#
# ``spent`` (a one-item list) sums the cells the sparse forms written so far will
# cost the decoder; ``encode`` refuses the packet if its bytes cannot pay for them.


def _varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _varint_size(v: int) -> int:
    return max(1, (v.bit_length() + 6) // 7)


def _is_counters(value: tuple[Any, ...]) -> bool:
    return all(type(v) is int and 0 <= v < MAX_INT for v in value)


def _sparse_form(values: list[int] | tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The (index, value) pairs of the non-zeros if the sparse form is smaller, else None."""
    nonzero = [(k, v) for k, v in enumerate(values) if v]
    dense = sum(_varint_size(v) for v in values)
    sparse, prev = _varint_size(len(nonzero)), -1
    for k, v in nonzero:
        sparse += _varint_size(k - prev - 1) + _varint_size(v)
        prev = k
    return nonzero if sparse < dense else None


def _entries(out: bytearray, values: list[int] | tuple[int, ...], nonzero: Any) -> None:
    """The entries, sparse (count, then (gap, value) pairs) when ``nonzero`` is given."""
    if nonzero is None:
        for v in values:
            _varint(out, v)
        return
    _varint(out, len(nonzero))
    prev = -1
    for k, v in nonzero:
        _varint(out, k - prev - 1)
        _varint(out, v)
        prev = k


def _counters(out: bytearray, row: tuple[int, ...] | list[int], spent: list[int]) -> None:
    if len(row) > MAX_ELEMENTS:
        raise LocalError(f"a vector of {len(row)} entries exceeds {MAX_ELEMENTS}")
    nonzero = _sparse_form(row)
    if nonzero is None:
        out.append(COUNTERS)
    else:
        out.append(SPARSE)
        spent[0] += len(row)
    _varint(out, len(row))
    _entries(out, row, nonzero)


def _is_matrix(value: tuple[Any, ...]) -> bool:
    if not value or not all(type(r) is tuple for r in value):
        return False
    cols = len(value[0])
    return cols > 0 and all(len(r) == cols and _is_counters(r) for r in value)


def _matrix(out: bytearray, rows: tuple[tuple[int, ...], ...], spent: list[int]) -> None:
    if len(rows) * len(rows[0]) > MAX_ELEMENTS:
        raise LocalError(f"a {len(rows)} x {len(rows[0])} matrix exceeds {MAX_ELEMENTS} entries")
    flat = [v for r in rows for v in r]
    nonzero = _sparse_form(flat)
    if nonzero is None:
        out.append(MATRIX)
    else:
        out.append(SPARSE_MATRIX)
        spent[0] += len(flat) + ROW_CELLS * len(rows)
    _varint(out, len(rows))
    _varint(out, len(rows[0]))
    _entries(out, flat, nonzero)


def _str(out: bytearray, s: str) -> None:
    try:
        raw = s.encode("utf-8")
    except UnicodeEncodeError:
        raise LocalError(f"string {s[:20]!r}... is not valid Unicode text") from None
    _varint(out, len(raw))
    out += raw


def _value(out: bytearray, value: Any, depth: int, spent: list[int]) -> None:
    if depth > MAX_DEPTH:
        raise LocalError(f"value is nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if value is None:
        out.append(NONE)
    elif kind is bool:
        out.append(TRUE if value else FALSE)
    elif kind is int:
        if 0 <= value < 0x80:
            out.append(FIXINT | value)
            return
        if not -MAX_INT <= value < MAX_INT:
            raise LocalError(f"int {value} does not fit the codec's 65 bits")
        out.append(INT)
        _varint(out, value * 2 if value >= 0 else -value * 2 - 1)
    elif kind is float:
        if not math.isfinite(value):
            raise LocalError(f"float {value!r} is not finite")
        out.append(FLOAT)
        out += _FLOAT.pack(value)
    elif kind is str:
        out.append(STR)
        _str(out, value)
    elif kind is tuple:
        if _is_matrix(value):
            _matrix(out, value, spent)
        elif value and _is_counters(value):
            _counters(out, value, spent)
        else:
            out.append(TUPLE)
            _varint(out, len(value))
            for v in value:
                _value(out, v, depth + 1, spent)
    elif kind is list:
        out.append(LIST)
        _varint(out, len(value))
        for v in value:
            _value(out, v, depth + 1, spent)
    elif kind is dict:
        out.append(DICT)
        _varint(out, len(value))
        for k, v in value.items():
            if type(k) is not str:
                raise LocalError(f"dict key {k!r} is not a string")
            _str(out, k)
            _value(out, v, depth + 1, spent)
    elif kind is VectorClock:
        out.append(VCLOCK)
        _counters(out, value.entries, spent)
    elif kind is MessageId:
        if not (_is_counters((value.origin, value.seq))):
            raise LocalError(f"message id {value!r} holds something other than counters")
        out.append(MSGID)
        _varint(out, value.origin)
        _varint(out, value.seq)
    elif PACKET_TYPES.get(kind.__name__) is kind:
        out.append(PACKET)
        _packet(out, value, depth + 1, spent)
    else:
        raise LocalError(
            f"a {kind.__name__} cannot be encoded",
            hint="packets hold ints, floats, str, None, bools, lists, tuples, dicts "
            "with str keys, vector clocks, message ids and registered packets",
        )


def _packet(out: bytearray, packet: Any, depth: int, spent: list[int]) -> None:
    cls = type(packet)
    tag = packet_tag(cls)
    if _tag_table().get(tag) is not cls:
        raise LocalError(f"{cls.__name__} is not a registered @packet class")
    out += tag.to_bytes(2, "big")
    for f in attrs.fields(cls):
        value = getattr(packet, f.name)
        if f.name == "payload" and (problem := _payload_problem(value)) is not None:
            raise LocalError(f"{cls.__name__} payload: {problem}")
        _value(out, value, depth, spent)


def _general_encode(packet: object) -> bytes:
    """``encode`` without the fast path: the reference the fast path must agree with."""
    out, spent = bytearray(_HEAD), [0]
    _packet(out, packet, 0, spent)
    return _paid(out, spent[0])


def _paid(out: bytearray, spent: int) -> bytes:
    """The packet's bytes if they pay for the cells its sparse values will cost."""
    if spent > decode_budget(len(out)):
        raise LocalError(
            f"packet of {len(out)} bytes has sparse values of {spent} cells, over the "
            f"decode budget of {decode_budget(len(out))}",
            hint="send fewer or smaller vectors and matrices per packet",
        )
    return bytes(out)


# -- the fast path ------------------------------------------------------------------
#
# ``encode`` and ``decode`` run once per packet on the wire, so the common shapes
# (small and large ints, strings, counter tuples, nested packets) take a path with
# no per-field generic dispatch, no ``attrs.fields`` and no reader object: a
# per-class plan (tag bytes, field getter, payload position) is built once. Every
# other value goes through the general functions above, and the bytes are the
# same either way (the byte-exact tests pin them). The fast decoder gives up on
# anything unusual, malformed bytes included, and hands the whole packet to the
# general decoder, which then either accepts it or raises its precise error.

#: class -> (tag bytes, getter of all field values as a tuple, index of ``payload`` or -1)
_encoders: dict[type, tuple[bytes, Any, int]] = {}
#: tag -> (class, field count, index of the ``payload`` field or -1)
_decoders: dict[int, tuple[type, int, int]] = {}


#: The last packet encoded as a payload (packets are frozen): (packet, depth, its bytes,
#: the cells they charge). A layer that sends one packet to several peers (a broadcast
#: over Reliable) wraps the same upper packet once per peer; it is encoded once.
_last_carried: tuple[object, int, bytes, int] = (None, -1, b"", 0)


def _encoder(cls: type) -> tuple[bytes, Any, int]:
    """The cached plan for encoding ``cls``; LocalError if it is not a registered packet."""
    plan = _encoders.get(cls)
    if plan is None or PACKET_TYPES.get(cls.__name__) is not cls:
        tag = packet_tag(cls)
        if PACKET_TYPES.get(cls.__name__) is not cls or _tag_table().get(tag) is not cls:
            raise LocalError(f"{cls.__name__} is not a registered @packet class")
        names = [f.name for f in attrs.fields(cls)]
        if len(names) == 1:
            one = operator.attrgetter(names[0])
            getter: Any = lambda p: (one(p),)  # noqa: E731
        elif names:
            getter = operator.attrgetter(*names)
        else:
            getter = lambda p: ()  # noqa: E731
        plan = (
            tag.to_bytes(2, "big"),
            getter,
            names.index("payload") if "payload" in names else -1,
        )
        _encoders[cls] = plan
    return plan


def _fast_fields(out: bytearray, packet: Any, depth: int, spent: list[int], carried: bool) -> None:
    """A packet's tag and fields; the same bytes (and refusals) as ``_packet``.

    ``carried``: the packet is another's payload, so its other fields must be plain data.
    """
    tag, getter, payload_at = _encoder(type(packet))
    out += tag
    at = -1
    for value in getter(packet):
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
                    _varint(out, z)
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
            if depth < MAX_DEPTH and PACKET_TYPES.get(kind.__name__) is kind:
                global _last_carried
                last = _last_carried
                if last[0] is value and last[1] == depth:  # one broadcast, several peers
                    out += last[2]
                    spent[0] += last[3]
                    continue
                start, before = len(out), spent[0]
                out.append(PACKET)
                _fast_fields(out, value, depth + 1, spent, True)
                _last_carried = (value, depth, bytes(out[start:]), spent[0] - before)
                continue
            if (problem := _payload_problem(value)) is not None:
                raise LocalError(f"{type(packet).__name__} payload: {problem}")
        elif kind is tuple and value and all(type(v) is int and 0 <= v < MAX_INT for v in value):
            if 0 in value or len(value) > MAX_ELEMENTS:
                _counters(out, value, spent)  # the sparse form may be the smaller one
                continue
            out.append(COUNTERS)  # no zero entry: the dense form is the smaller one
            _varint(out, len(value))
            for v in value:
                if v < 0x80:
                    out.append(v)
                elif v < 0x4000:
                    out += bytes(((v & 0x7F) | 0x80, v >> 7))
                else:
                    _varint(out, v)
            continue
        if carried and at != payload_at and not is_plain(value):
            raise LocalError(
                f"carried {type(packet).__name__} field {at} is not plain data",
                hint="a packet carried as a payload holds JSON data and tuples",
            )
        _value(out, value, depth, spent)


def encode(packet: object) -> bytes:
    """The bytes of a registered packet; LocalError if ``decode`` would refuse them."""
    out, spent = bytearray(_HEAD), [0]
    _fast_fields(out, packet, 0, spent, False)
    if spent[0]:
        return _paid(out, spent[0])
    return bytes(out)


def value_size(value: object) -> int:
    """Bytes that ``value`` takes as one field of a packet."""
    out = bytearray()
    _value(out, value, 0, [0])
    return len(out)


def metadata_bytes(packet: object) -> int:
    """Encoded bytes of ``packet`` that are not its payload: the price of ordering."""
    size = len(encode(packet))
    if hasattr(packet, "payload"):
        size -= value_size(packet.payload)
    return size


# -- decoding ---------------------------------------------------------------------


class _Reader:
    __slots__ = ("budget", "data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.budget = decode_budget(len(data))

    def left(self) -> int:
        return len(self.data) - self.pos

    def charge(self, cells: int, what: str) -> None:
        """Pay for ``cells`` cells before building them; RemoteError past the budget."""
        self.budget -= cells
        if self.budget < 0:
            raise RemoteError(
                f"{what} would take the packet past its decode budget of "
                f"{decode_budget(len(self.data))} cells for {len(self.data)} bytes"
            )

    def byte(self, what: str) -> int:
        if self.pos >= len(self.data):
            raise RemoteError(f"packet is truncated: {what} is missing at byte {self.pos}")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def take(self, size: int, what: str) -> bytes:
        if size > self.left():
            raise RemoteError(
                f"packet is truncated: {what} needs {size} bytes, {self.left()} are left"
            )
        raw = self.data[self.pos : self.pos + size]
        self.pos += size
        return raw

    def varint(self, what: str, limit: int = MAX_INT) -> int:
        value = shift = 0
        for i in range(10):
            b = self.byte(what)
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                if b == 0 and i > 0:
                    raise RemoteError(f"{what} is a non-minimal varint")
                if value >= limit:
                    raise RemoteError(f"{what} is out of range")
                return value
            shift += 7
        raise RemoteError(f"{what} is a varint longer than 10 bytes")

    def count(self, what: str, per_item: int = 1) -> int:
        """A length that the remaining bytes can actually hold."""
        n = self.varint(what)
        if n * per_item > self.left():
            raise RemoteError(
                f"packet is truncated: {what} is {n} but only {self.left()} bytes are left"
            )
        return n

    def text(self, what: str) -> str:
        raw = self.take(self.count(what), what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RemoteError(f"{what} is not valid UTF-8") from None


def _read_counters(r: _Reader, kind: int) -> tuple[int, ...]:
    if kind == COUNTERS:
        size = r.count("vector length")
        if size > MAX_ELEMENTS:
            raise RemoteError(f"vector length {size} exceeds {MAX_ELEMENTS}")
        return tuple(r.varint("vector entry") for _ in range(size))
    if kind != SPARSE:
        raise RemoteError(f"expected a vector, found kind {kind}")
    size = r.varint("sparse vector length")
    if size > MAX_ELEMENTS:
        raise RemoteError(f"sparse vector length {size} exceeds {MAX_ELEMENTS}")
    r.charge(size, f"sparse vector of {size} entries")
    return tuple(_read_sparse(r, size, "sparse vector"))


def _read_sparse(r: _Reader, size: int, what: str) -> list[int]:
    nonzero = r.count(f"{what} non-zeros", 2)
    flat = [0] * size
    index = -1
    for _ in range(nonzero):
        index += r.varint(f"{what} gap") + 1
        if index >= size:
            raise RemoteError(f"{what} index {index} is out of range (size {size})")
        value = r.varint(f"{what} entry")
        if value == 0:
            raise RemoteError(f"{what} lists a zero entry at index {index}")
        flat[index] = value
    return flat


def _read_matrix(r: _Reader, kind: int) -> tuple[tuple[int, ...], ...]:
    rows = r.varint("matrix rows")
    cols = r.varint("matrix columns")
    if rows == 0 or cols == 0:
        raise RemoteError("a matrix has at least one row and one column")
    if rows * cols > MAX_ELEMENTS:
        raise RemoteError(f"matrix of {rows} x {cols} exceeds {MAX_ELEMENTS} entries")
    if kind == MATRIX:
        if rows * cols > r.left():
            raise RemoteError(f"packet is truncated: {rows} x {cols} matrix does not fit")
        flat = [r.varint("matrix entry") for _ in range(rows * cols)]
    else:
        r.charge(rows * cols + ROW_CELLS * rows, f"sparse {rows} x {cols} matrix")
        flat = _read_sparse(r, rows * cols, "sparse matrix")
    return tuple(tuple(flat[k * cols : (k + 1) * cols]) for k in range(rows))


def _read_value(r: _Reader, depth: int) -> Any:
    if depth > MAX_DEPTH:
        raise RemoteError(f"packet is nested more than {MAX_DEPTH} levels deep")
    kind = r.byte("a value")
    if kind >= FIXINT:
        return kind - FIXINT
    if kind == NONE:
        return None
    if kind == FALSE:
        return False
    if kind == TRUE:
        return True
    if kind == INT:
        z = r.varint("int", 2 * MAX_INT)
        value = z >> 1 if not z & 1 else -(z >> 1) - 1
        if 0 <= value < 0x80:
            raise RemoteError(f"int {value} should have been a one-byte small int")
        return value
    if kind == FLOAT:
        (value,) = _FLOAT.unpack(r.take(8, "float"))
        if not math.isfinite(value):
            raise RemoteError(f"float {value!r} is not finite")
        return value
    if kind == STR:
        return r.text("string length")
    if kind in (LIST, TUPLE):
        items = [_read_value(r, depth + 1) for _ in range(r.count("sequence length"))]
        return items if kind == LIST else tuple(items)
    if kind == DICT:
        result: dict[str, Any] = {}
        for _ in range(r.count("dict size", 2)):
            key = r.text("dict key length")
            if key in result:
                raise RemoteError(f"dict key {key!r} appears twice")
            result[key] = _read_value(r, depth + 1)
        return result
    if kind in (COUNTERS, SPARSE):
        return _read_counters(r, kind)
    if kind in (MATRIX, SPARSE_MATRIX):
        return _read_matrix(r, kind)
    if kind == VCLOCK:
        return VectorClock(_read_counters(r, r.byte("vector clock")))
    if kind == MSGID:
        return MessageId(r.varint("message id origin"), r.varint("message id seq"))
    if kind == PACKET:
        return _read_packet(r, depth + 1)
    raise RemoteError(f"unknown value kind {kind} at byte {r.pos - 1}")


def _read_packet(r: _Reader, depth: int) -> object:
    tag = int.from_bytes(r.take(2, "packet type tag"), "big")
    cls = _tag_table().get(tag)
    if cls is None:
        raise RemoteError(f"unknown packet type tag {tag}")
    fields = attrs.fields(cls)
    values = [_read_value(r, depth) for _ in fields]
    for f, value in zip(fields, values, strict=True):
        if f.name == "payload" and (problem := _payload_problem(value)) is not None:
            raise RemoteError(f"{cls.__name__} payload: {problem}")
    try:
        return cls(*values)
    except (TypeError, ValueError) as exc:
        raise RemoteError(f"{cls.__name__} refuses its fields: {exc}") from None


def _slow_decode(data: bytes) -> object:
    r = _Reader(data)
    version = r.byte("the version byte")
    if version != VERSION:
        raise RemoteError(f"codec version {version} is not supported (this is version {VERSION})")
    packet = _read_packet(r, 0)
    if r.left():
        raise RemoteError(f"{r.left()} trailing bytes after the packet")
    return packet


class _GiveUp(Exception):
    """The fast decoder met something it leaves to the general one."""


def _decoder(tag: int) -> tuple[type, int, int]:
    plan = _decoders.get(tag)
    if plan is None:
        cls = _tag_table().get(tag)
        if cls is None:
            raise _GiveUp
        names = [f.name for f in attrs.fields(cls)]
        plan = (cls, len(names), names.index("payload") if "payload" in names else -1)
        _decoders[tag] = plan
    return plan


def _fast_read_varint(data: bytes, pos: int, limit: int) -> tuple[int, int]:
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


def _fast_read_packet(data: bytes, pos: int, depth: int) -> tuple[object, int]:
    """The packet whose tag is at ``pos``, its fields at ``depth``; _GiveUp or IndexError
    (truncation) on anything the general decoder should judge.

    It reads only dense values (ints, strings, counters, None) and packets in the
    payload field, so what it builds is paid for in bytes and a carried packet's other
    fields are plain data; everything else goes to the general decoder.
    """
    if len(data) < pos + 2:
        raise _GiveUp
    cls, count, payload_at = _decoder((data[pos] << 8) | data[pos + 1])
    pos += 2
    values: list[Any] = []
    append = values.append
    for at in range(count):
        kind = data[pos]
        pos += 1
        if kind >= FIXINT:
            append(kind - FIXINT)
        elif kind == INT:
            z = data[pos]
            if z < 0x80:
                pos += 1
            elif 0 < data[pos + 1] < 0x80:  # two bytes, minimal: inline
                z = (z & 0x7F) | (data[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _fast_read_varint(data, pos, 2 * MAX_INT)
            value = z >> 1 if not z & 1 else -(z >> 1) - 1
            if 0 <= value < 0x80:
                raise _GiveUp
            append(value)
        elif kind in (STR, COUNTERS):  # a length (or count), then its bytes
            size = data[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _fast_read_varint(data, pos, MAX_ELEMENTS + 1)
            if size > len(data) - pos:
                raise _GiveUp
            if kind == STR:
                append(data[pos : pos + size].decode("utf-8"))
                pos += size
                continue
            if at == payload_at:
                raise _GiveUp  # a vector is not a payload: the general decoder says so
            entries = []
            for _ in range(size):
                v = data[pos]
                if v < 0x80:
                    pos += 1
                elif 0 < data[pos + 1] < 0x80:  # two bytes, minimal: inline
                    v = (v & 0x7F) | (data[pos + 1] << 7)
                    pos += 2
                else:
                    v, pos = _fast_read_varint(data, pos, MAX_INT)
                entries.append(v)
            append(tuple(entries))
        elif kind in (TUPLE, LIST) and at != payload_at and depth < MAX_DEPTH:
            # a batch's payloads: short strings, small ints and None, inline
            size = data[pos]
            if size < 0x80:
                pos += 1
            else:
                size, pos = _fast_read_varint(data, pos, MAX_INT)
            if size > len(data) - pos:
                raise _GiveUp
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
            append(tuple(items) if kind == TUPLE else items)
        elif kind == PACKET and at == payload_at and depth < MAX_DEPTH:
            nested, pos = _fast_read_packet(data, pos, depth + 1)
            append(nested)
        elif kind == NONE:
            append(None)
        else:
            raise _GiveUp
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
                packet, pos = _fast_read_packet(raw, 1, 0)
            except (_GiveUp, IndexError, UnicodeDecodeError, LocalError, TypeError, ValueError):
                pass
            else:
                if pos == len(raw):
                    return packet
        return _slow_decode(raw)
    except RemoteError:
        raise
    except Exception as exc:  # MemoryError, RecursionError, a packet class's own checks
        raise RemoteError(f"packet could not be decoded: {type(exc).__name__}: {exc}") from None


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
    "metadata_bytes",
    "packet_tag",
]
