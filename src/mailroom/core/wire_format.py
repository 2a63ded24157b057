"""The wire format, described once: this text, and the reference writer and reader below.

The codec knows no protocol. It works over every ``@packet`` attrs class of the
registry (``mailroom.core.packets``): a packet is its class's type tag followed by
its fields in declaration order, so a new protocol's packets encode without codec
changes.

Format, version 1::

    packet  := VERSION (1 byte) tag (2 bytes, big-endian) value*   # one per field
    tag     := crc32(class name) & 0xFFFF                          # stable across runs
    value   := kind (1 byte) body

Kinds (the first byte of a value):

- ``0x80..0xFF``: a small non-negative int, ``kind - 0x80`` (0..127), no body;
- ``0`` None, ``1`` False, ``2`` True;
- ``3`` int (-2**64 <= v < 2**64, not 0..127): zigzag varint (LEB128);
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

The encoder picks the smaller of the dense and sparse forms (dense on a tie). The
decoder refuses, with ``RemoteError``, anything it would not have produced: a wrong
version, an unknown tag or kind, truncation, trailing bytes, over-long or non-minimal
varints, lengths larger than the bytes left, invalid UTF-8, non-finite floats,
duplicate keys, sparse indices out of order or out of range, zero sparse values,
vectors or matrices of more than ``MAX_ELEMENTS`` entries, nesting deeper than 64, a
``payload`` field that is not JSON data or a packet (what ``check_payload`` allows an
application to send), a packet carried as a payload whose other fields are not plain
data (JSON data and tuples: what a trace row or a checkpoint can hold), and field
values the packet class itself rejects. The writer raises ``LocalError`` for every
value whose bytes the reader would refuse.

Decoding has a budget. The sparse forms are the only values that decode into more
than a few bytes of memory per byte on the wire (a sparse 2**20 x 1 matrix is 7
bytes), so each charges the cells it builds: a sparse vector its length, a sparse
matrix its entries plus ``ROW_CELLS`` per row. A packet of L bytes may charge at most
``decode_budget(L) = DECODE_BASE_CELLS + DECODE_CELLS_PER_BYTE * L`` cells (the base
lets any vector of up to 65,536 entries and any matrix up to 254 x 254 through,
however sparse). Everything else is paid for in bytes: each list, tuple or dict item,
vector or matrix entry, string or packet takes at least one byte. So decoding L bytes
allocates at most about ``DECODE_BYTES_PER_BYTE * L + DECODE_BASE_BYTES`` bytes
(tests/test_codec_fuzz.py measures it with tracemalloc).

The functions here are the reference: simple, one per kind, with a precise error for
every refusal. ``mailroom.core.codec`` adds shortcuts for the common shapes on the
per-packet path; they are checked against these functions when the codec is imported
(``mailroom.core.codec_check``) and by the tests.
"""

from __future__ import annotations

import math
import struct
from typing import Any

from mailroom.clocks import VectorClock
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, check_payload
from mailroom.core.packets import PACKETS, VERSION

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

FLOAT_BYTES = struct.Struct(">d")
HEAD = bytes((VERSION,))


def decode_budget(size: int) -> int:
    """Cells a packet of ``size`` bytes may decode into: its sparse values' full sizes."""
    return DECODE_BASE_CELLS + DECODE_CELLS_PER_BYTE * size


def payload_problem(value: object) -> str | None:
    """Why ``value`` cannot be a ``payload`` field, or None: it must be JSON data, or a
    packet whose other fields are plain data (``check_payload``)."""
    try:
        check_payload(value)
    except LocalError as exc:
        return str(exc)
    return None


# -- writing ------------------------------------------------------------------------
#
# ``spent`` (a one-item list) sums the cells the sparse forms written so far will
# cost the decoder; the packet is refused if its bytes cannot pay for them (``paid``).


def write_varint(out: bytearray, v: int) -> None:
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def varint_size(v: int) -> int:
    return max(1, (v.bit_length() + 6) // 7)


def is_counters(value: tuple[Any, ...]) -> bool:
    return all(type(v) is int and 0 <= v < MAX_INT for v in value)


def sparse_form(values: list[int] | tuple[int, ...]) -> list[tuple[int, int]] | None:
    """The (index, value) pairs of the non-zeros if the sparse form is smaller, else None.

    The entries' own varints are in both forms, so the sparse form is smaller when the
    count of non-zeros and the gaps take fewer bytes than the zeros do (one each).
    """
    zeros = values.count(0)
    nonzero = len(values) - zeros
    if zeros <= nonzero + 1:  # the count and one byte per gap at least: never smaller
        return None
    pairs = [(k, v) for k, v in enumerate(values) if v]
    if len(values) > 128:  # gaps may take more than one byte each: count them
        extra, prev = varint_size(nonzero), -1
        for k, _ in pairs:
            extra += varint_size(k - prev - 1)
            prev = k
        if extra >= zeros:
            return None
    return pairs


def write_entries(out: bytearray, values: list[int] | tuple[int, ...], nonzero: Any) -> None:
    """The entries, sparse (count, then (gap, value) pairs) when ``nonzero`` is given."""
    if nonzero is None:
        for v in values:
            write_varint(out, v)
        return
    write_varint(out, len(nonzero))
    prev = -1
    for k, v in nonzero:
        write_varint(out, k - prev - 1)
        write_varint(out, v)
        prev = k


def write_counters(out: bytearray, row: tuple[int, ...] | list[int], spent: list[int]) -> None:
    """A vector of counters, dense (kind 9) or sparse (kind 10)."""
    if len(row) > MAX_ELEMENTS:
        raise LocalError(f"a vector of {len(row)} entries exceeds {MAX_ELEMENTS}")
    nonzero = sparse_form(row)
    if nonzero is None:
        out.append(COUNTERS)
    else:
        out.append(SPARSE)
        spent[0] += len(row)
    write_varint(out, len(row))
    write_entries(out, row, nonzero)


def is_matrix(value: tuple[Any, ...]) -> bool:
    if not value or not all(type(r) is tuple for r in value):
        return False
    cols = len(value[0])
    return cols > 0 and all(len(r) == cols and is_counters(r) for r in value)


def write_matrix(out: bytearray, rows: tuple[tuple[int, ...], ...], spent: list[int]) -> None:
    """A matrix of counters, dense (kind 11) or sparse (kind 12)."""
    if len(rows) * len(rows[0]) > MAX_ELEMENTS:
        raise LocalError(f"a {len(rows)} x {len(rows[0])} matrix exceeds {MAX_ELEMENTS} entries")
    flat = [v for r in rows for v in r]
    nonzero = sparse_form(flat)
    if nonzero is None:
        out.append(MATRIX)
    else:
        out.append(SPARSE_MATRIX)
        spent[0] += len(flat) + ROW_CELLS * len(rows)
    write_varint(out, len(rows))
    write_varint(out, len(rows[0]))
    write_entries(out, flat, nonzero)


def write_str(out: bytearray, s: str) -> None:
    """A string's body: varint length + UTF-8."""
    try:
        raw = s.encode("utf-8")
    except UnicodeEncodeError:
        raise LocalError(f"string {s[:20]!r}... is not valid Unicode text") from None
    write_varint(out, len(raw))
    out += raw


def write_int(out: bytearray, value: int) -> None:
    """A small int (one byte) or kind 3 with a zigzag varint."""
    if 0 <= value < 0x80:
        out.append(FIXINT | value)
        return
    if not -MAX_INT <= value < MAX_INT:
        raise LocalError(f"int {value} does not fit the codec's 65 bits")
    out.append(INT)
    write_varint(out, value * 2 if value >= 0 else -value * 2 - 1)


def write_tuple(out: bytearray, value: tuple[Any, ...], depth: int, spent: list[int]) -> None:
    """A matrix, a vector of counters (the smaller form), or a tuple of values."""
    if is_matrix(value):
        write_matrix(out, value, spent)
    elif value and is_counters(value):
        write_counters(out, value, spent)
    else:
        out.append(TUPLE)
        write_varint(out, len(value))
        for v in value:
            write_value(out, v, depth + 1, spent)


def write_value(out: bytearray, value: Any, depth: int, spent: list[int]) -> None:
    """Any value of a packet's field (the reference: one branch per kind)."""
    if depth > MAX_DEPTH:
        raise LocalError(f"value is nested more than {MAX_DEPTH} levels deep")
    kind = type(value)
    if value is None:
        out.append(NONE)
    elif kind is bool:
        out.append(TRUE if value else FALSE)
    elif kind is int:
        write_int(out, value)
    elif kind is float:
        if not math.isfinite(value):
            raise LocalError(f"float {value!r} is not finite")
        out.append(FLOAT)
        out += FLOAT_BYTES.pack(value)
    elif kind is str:
        out.append(STR)
        write_str(out, value)
    elif kind is tuple:
        write_tuple(out, value, depth, spent)
    elif kind is list:
        out.append(LIST)
        write_varint(out, len(value))
        for v in value:
            write_value(out, v, depth + 1, spent)
    elif kind is dict:
        out.append(DICT)
        write_varint(out, len(value))
        for k, v in value.items():
            if type(k) is not str:
                raise LocalError(f"dict key {k!r} is not a string")
            write_str(out, k)
            write_value(out, v, depth + 1, spent)
    elif kind is VectorClock:
        out.append(VCLOCK)
        write_counters(out, value.entries, spent)
    elif kind is MessageId:
        if not (is_counters((value.origin, value.seq))):
            raise LocalError(f"message id {value!r} holds something other than counters")
        out.append(MSGID)
        write_varint(out, value.origin)
        write_varint(out, value.seq)
    elif PACKETS.layout(kind) is not None:
        out.append(PACKET)
        write_packet(out, value, depth + 1, spent)
    else:
        raise LocalError(
            f"a {kind.__name__} cannot be encoded",
            hint="packets hold ints, floats, str, None, bools, lists, tuples, dicts "
            "with str keys, vector clocks, message ids and registered packets",
        )


def write_packet(out: bytearray, packet: Any, depth: int, spent: list[int]) -> None:
    """A packet's tag and fields (the reference for ``mailroom.core.codec``'s writer)."""
    cls = type(packet)
    layout = PACKETS.layout(cls)
    if layout is None:
        raise LocalError(f"{cls.__name__} is not a registered @packet class")
    out += layout.tag_bytes
    for at, value in enumerate(layout.values(packet)):
        if at == layout.payload_at and (problem := payload_problem(value)) is not None:
            raise LocalError(f"{cls.__name__} payload: {problem}")
        write_value(out, value, depth, spent)


def paid(out: bytearray, spent: int) -> bytes:
    """The packet's bytes if they pay for the cells its sparse values will cost."""
    if spent > decode_budget(len(out)):
        raise LocalError(
            f"packet of {len(out)} bytes has sparse values of {spent} cells, over the "
            f"decode budget of {decode_budget(len(out))}",
            hint="send fewer or smaller vectors and matrices per packet",
        )
    return bytes(out)


def encode_reference(packet: object) -> bytes:
    """A packet's bytes written by the reference writer alone (what ``encode`` writes)."""
    out, spent = bytearray(HEAD), [0]
    write_packet(out, packet, 0, spent)
    return paid(out, spent[0])


# -- reading --------------------------------------------------------------------------


class Input:
    """The bytes being read, the position, and the cells the packet may still build."""

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


def read_counters(r: Input, kind: int) -> tuple[int, ...]:
    """A vector of counters, dense or sparse."""
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
    return tuple(read_sparse(r, size, "sparse vector"))


def read_sparse(r: Input, size: int, what: str) -> list[int]:
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


def read_matrix(r: Input, kind: int) -> tuple[tuple[int, ...], ...]:
    """A matrix of counters, dense or sparse."""
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
        flat = read_sparse(r, rows * cols, "sparse matrix")
    return tuple(tuple(flat[k * cols : (k + 1) * cols]) for k in range(rows))


def read_int(r: Input) -> int:
    """The body of kind 3: a zigzag varint outside the small ints."""
    z = r.varint("int", 2 * MAX_INT)
    value = z >> 1 if not z & 1 else -(z >> 1) - 1
    if 0 <= value < 0x80:
        raise RemoteError(f"int {value} should have been a one-byte small int")
    return value


def read_float(r: Input) -> float:
    (value,) = FLOAT_BYTES.unpack(r.take(8, "float"))
    if not math.isfinite(value):
        raise RemoteError(f"float {value!r} is not finite")
    return float(value)


def read_dict(r: Input, depth: int) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for _ in range(r.count("dict size", 2)):
        key = r.text("dict key length")
        if key in result:
            raise RemoteError(f"dict key {key!r} appears twice")
        result[key] = read_value(r, depth + 1)
    return result


def read_value(r: Input, depth: int) -> Any:
    """Any value of a packet's field (the reference: one branch per kind)."""
    if depth > MAX_DEPTH:
        raise RemoteError(f"packet is nested more than {MAX_DEPTH} levels deep")
    kind = r.byte("a value")
    if kind >= FIXINT:
        return kind - FIXINT
    if kind <= TRUE:
        return (None, False, True)[kind]
    if kind == INT:
        return read_int(r)
    if kind == FLOAT:
        return read_float(r)
    if kind == STR:
        return r.text("string length")
    if kind in (LIST, TUPLE):
        items = [read_value(r, depth + 1) for _ in range(r.count("sequence length"))]
        return items if kind == LIST else tuple(items)
    if kind == DICT:
        return read_dict(r, depth)
    if kind in (COUNTERS, SPARSE):
        return read_counters(r, kind)
    if kind in (MATRIX, SPARSE_MATRIX):
        return read_matrix(r, kind)
    if kind == VCLOCK:
        return VectorClock(read_counters(r, r.byte("vector clock")))
    if kind == MSGID:
        return MessageId(r.varint("message id origin"), r.varint("message id seq"))
    if kind == PACKET:
        return read_packet(r, depth + 1)
    raise RemoteError(f"unknown value kind {kind} at byte {r.pos - 1}")


def read_packet(r: Input, depth: int) -> object:
    """A packet's tag and fields, built into the tag's current class."""
    tag = int.from_bytes(r.take(2, "packet type tag"), "big")
    cls = PACKETS.by_tag.get(tag)
    if cls is None:
        raise RemoteError(f"unknown packet type tag {tag}")
    layout = PACKETS.by_class[cls]
    values = [read_value(r, depth) for _ in layout.names]
    if layout.payload_at >= 0 and (problem := payload_problem(values[layout.payload_at])):
        raise RemoteError(f"{cls.__name__} payload: {problem}")
    try:
        return cls(*values)
    except (TypeError, ValueError) as exc:
        raise RemoteError(f"{cls.__name__} refuses its fields: {exc}") from None


def decode_reference(data: bytes) -> object:
    """The packet in ``data`` read by the reference reader alone; RemoteError if the
    bytes are not exactly one valid packet."""
    r = Input(data)
    version = r.byte("the version byte")
    if version != VERSION:
        raise RemoteError(f"codec version {version} is not supported (this is version {VERSION})")
    packet = read_packet(r, 0)
    if r.left():
        raise RemoteError(f"{r.left()} trailing bytes after the packet")
    return packet
