"""The wire codec: exact round trips for every registered packet, exact bytes, strict decode."""

from __future__ import annotations

import struct
import zlib
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import codec
from mailroom.clocks import VectorClock
from mailroom.core import wire_format
from mailroom.core.codec import value_size
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.wire import PACKET_TYPES
from mailroom.protocols import CBCASTPacket, FifoPacket, ReliablePacket, RSTPacket
from tests.strategies import packet_classes, packets, packets_of


def typed(value: Any) -> Any:
    """A type-strict picture of a value: 1, 1.0 and True differ; tuples and lists differ."""
    if attrs.has(type(value)):
        fields = attrs.fields(type(value))
        return (type(value).__name__, tuple(typed(getattr(value, f.name)) for f in fields))
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(typed(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((k, typed(v)) for k, v in value.items()))
    if isinstance(value, float):
        return ("float", struct.pack(">d", value))
    return (type(value).__name__, value)


def tag(name: str) -> bytes:
    return (zlib.crc32(name.encode()) & 0xFFFF).to_bytes(2, "big")


# -- round trips ------------------------------------------------------------------


@given(packets())
def test_every_registered_packet_round_trips_exactly(packet: object) -> None:
    data = codec.encode(packet)
    assert typed(codec.decode(data)) == typed(packet)
    assert codec.encode(codec.decode(data)) == data


@pytest.mark.parametrize("cls", packet_classes(), ids=lambda c: c.__name__)
@given(data=st.data())
def test_each_packet_class_round_trips(cls: type, data: st.DataObject) -> None:
    packet = data.draw(packets_of(cls))
    assert typed(codec.decode(codec.encode(packet))) == typed(packet)


def test_the_registry_is_covered_and_tags_are_distinct() -> None:
    expected = {"FifoPacket", "RSTPacket", "CBCASTPacket", "UnorderedPacket"}
    expected |= {"ReliablePacket", "ReliableAck"}
    assert expected <= set(PACKET_TYPES)
    tags = [codec.packet_tag(c) for c in PACKET_TYPES.values()]
    assert len(set(tags)) == len(tags)


# -- exact bytes ------------------------------------------------------------------


def test_cbcast_packet_exact_bytes() -> None:
    data = codec.encode(CBCASTPacket(1, (0, 2, 0), "hi"))
    # version, tag, sender 1 (small int), dense vector of 3, str "hi"
    assert data == b"\x01" + tag("CBCASTPacket") + b"\x81" + b"\x09\x03\x00\x02\x00" + b"\x05\x02hi"
    assert codec.metadata_bytes(CBCASTPacket(1, (0, 2, 0), "hi")) == 9


def test_sparse_vector_is_chosen_when_smaller() -> None:
    vc = tuple(5 if k == 30 else 0 for k in range(32))
    data = codec.encode(CBCASTPacket(30, vc, None))
    # kind 10, length 32, one non-zero, gap 30, value 5; payload None
    assert data == b"\x01" + tag("CBCASTPacket") + b"\x9e" + b"\x0a\x20\x01\x1e\x05" + b"\x00"


def test_sparse_matrix_exact_bytes() -> None:
    sent = ((0, 0, 0), (0, 0, 4), (0, 0, 0))
    data = codec.encode(RSTPacket(1, 2, 5, sent, [1, -1]))
    # sparse matrix: kind 12, 3 rows, 3 columns, 1 non-zero at position 5 (gap 5), value 4
    matrix = b"\x0c\x03\x03\x01\x05\x04"
    payload = b"\x06\x02\x81\x03\x01"  # list of 2: small int 1, zigzag(-1) = 1
    assert data == b"\x01" + tag("RSTPacket") + b"\x81\x82\x85" + matrix + payload


def test_nested_packet_and_special_values_exact_bytes() -> None:
    inner = FifoPacket(0, 1, 1, 1, {"a": 1.5})
    outer = ReliablePacket(0, 1, 1, 1, 0, inner)
    data = codec.encode(outer)
    floats = b"\x04" + struct.pack(">d", 1.5)
    inner_bytes = tag("FifoPacket") + b"\x80\x81\x81\x81" + b"\x08\x01\x01a" + floats
    assert data == b"\x01" + tag("ReliablePacket") + b"\x80\x81\x81\x81\x80\x0d" + inner_bytes
    assert value_size(VectorClock((1, 2))) == 5  # kind 14, kind 9, length 2, entries 1 and 2
    assert value_size(MessageId(3, 200)) == 4  # kind, 3, 200 as a two-byte varint


def test_big_and_negative_ints() -> None:
    for value in (128, -1, -(2**64), 2**64 - 1):
        for packet in (FifoPacket(0, 1, 1, 1, value), CBCASTPacket(0, (abs(value) - 1,), 0)):
            assert typed(codec.decode(codec.encode(packet))) == typed(packet)
    with pytest.raises(LocalError):
        codec.encode(FifoPacket(0, 1, 1, 1, 2**64))


def test_encode_refuses_what_it_cannot_carry() -> None:
    with pytest.raises(LocalError):
        codec.encode(object())
    with pytest.raises(LocalError):
        codec.encode(FifoPacket(0, 1, 1, 1, {1: "non-str key"}))
    with pytest.raises(LocalError):
        codec.encode(FifoPacket(0, 1, 1, 1, float("nan")))
    with pytest.raises(LocalError):
        codec.encode(FifoPacket(0, 1, 1, 1, {1, 2}))


# -- strict decoding ----------------------------------------------------------------

GOOD = codec.encode(RSTPacket(1, 2, 5, ((0, 3, 0), (0, 0, 4), (1, 0, 0)), {"k": ["v", 2.5]}))
HEAD = b"\x01" + tag("FifoPacket") + b"\x80\x81\x81\x81"  # a FifoPacket up to its payload


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"", "truncated"),
        (b"\x02" + GOOD[1:], "version 2"),
        (b"\x01\xff\xff", "unknown packet type"),
        (GOOD + b"\x00", "trailing"),
        (HEAD + b"\x03\x80\x00", "non-minimal"),
        (HEAD + b"\x03" + b"\xff" * 10 + b"\x01", "longer than 10"),
        (HEAD + b"\x03" + b"\xff" * 9 + b"\x7f", "out of range"),
        (HEAD + b"\x03\x02", "small int"),
        (HEAD + b"\x05\x02\xff\xfe", "UTF-8"),
        (HEAD + b"\x04" + struct.pack(">d", float("inf")), "not finite"),
        (HEAD + b"\x08\x02\x01a\x80\x01a\x81", "twice"),
        (HEAD + b"\x0a\x03\x01\x05\x01", "out of range"),
        (HEAD + b"\x0a\x03\x01\x00\x00", "zero entry"),
        (HEAD + b"\x0a\xff\xff\xff\x7f\x00", "exceeds"),
        (HEAD + b"\x0c\xff\xff\x03\xff\xff\x03\x00", "exceeds"),
        (HEAD + b"\x0b\x00\x03", "at least one row"),
        (HEAD + b"\x06\xff\xff\x03\x80", "only 1 bytes"),
        (HEAD + b"\x06\x01" * 70 + b"\x00", "nested more than"),
        (HEAD + b"\x11", "unknown value kind 17"),
        (HEAD + b"\x0e\x05", "expected a vector"),
        (b"\x01" + tag("FifoPacket") + b"\x80", "truncated"),
    ],
)
def test_decode_refuses_with_a_clear_message(data: bytes, words: str) -> None:
    with pytest.raises(RemoteError, match=words):
        codec.decode(data)


def test_decode_refuses_non_bytes() -> None:
    with pytest.raises(RemoteError, match="expected bytes"):
        codec.decode("not bytes")  # type: ignore[arg-type]


@given(packets(), st.data())
def test_every_proper_prefix_is_refused(packet: object, data: st.DataObject) -> None:
    encoded = codec.encode(packet)
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(RemoteError):
        codec.decode(encoded[:cut])


@given(st.binary(max_size=64))
def test_random_bytes_decode_or_raise_remote_error(data: bytes) -> None:
    try:
        packet = codec.decode(data)
    except RemoteError:
        return
    assert codec.encode(packet)  # whatever decodes is a packet the codec can carry


def test_compact_against_json() -> None:
    import json

    from mailroom.core.wire import packet_to_data

    n = 32
    sent = tuple(tuple(1 if j == (k + 1) % n else 0 for j in range(n)) for k in range(n))
    packet = RSTPacket(3, 4, 9, sent, "x")
    as_json = len(json.dumps(packet_to_data(packet), separators=(",", ":")))
    # 32 non-zeros of a 1024-entry matrix: sparse, about a tenth of dense varints
    assert codec.metadata_bytes(packet) < 80 < as_json / 20


def _bytes_of(packet_head: bytes, value: object) -> bytes:
    """A packet's bytes written past the encoder's checks: its head, then ``value``."""
    out = bytearray(packet_head)
    wire_format.write_value(out, value, 0, [0])
    return bytes(out)


def test_a_payload_must_be_what_an_application_can_send() -> None:
    inner = FifoPacket(0, 1, 1, 1, "x")
    for bad in [(1, 2), VectorClock((1,)), MessageId(0, 1), [1, (2,)], [inner], {"k": inner}]:
        with pytest.raises(LocalError, match="FifoPacket payload"):
            codec.encode(FifoPacket(0, 1, 1, 1, bad))
        with pytest.raises(RemoteError, match="FifoPacket payload"):
            codec.decode(_bytes_of(HEAD, bad))


# -- the fast path agrees with the general codec ---------------------------------------------


def _general_encode(packet: object) -> bytes:
    return wire_format.encode_reference(packet)


def _general_decode(data: bytes) -> Any:
    try:
        return ("ok", typed(wire_format.decode_reference(data)))
    except RemoteError as exc:
        return ("error", str(exc))


@given(packets())
def test_fast_encode_writes_the_general_encoders_bytes(packet: object) -> None:
    try:
        general = _general_encode(packet)
    except LocalError:
        with pytest.raises(LocalError):
            codec.encode(packet)
        return
    assert codec.encode(packet) == general


@given(packets(), st.data())
def test_fast_decode_agrees_with_the_general_decoder(packet: object, data: st.DataObject) -> None:
    try:
        encoded = bytearray(codec.encode(packet))
    except LocalError:
        return
    if data.draw(st.booleans()):  # flip one byte: fast and general must still agree
        k = data.draw(st.integers(0, len(encoded) - 1))
        encoded[k] = data.draw(st.integers(0, 255))
    raw = bytes(encoded)
    try:
        fast = ("ok", typed(codec.decode(raw)))
    except RemoteError as exc:
        fast = ("error", str(exc))
    assert fast == _general_decode(raw)
