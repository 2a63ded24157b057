"""The packet registry keyed by class, the format's reference and the shortcuts checked
against it, and ``encode_all``."""

from __future__ import annotations

import dataclasses
import gc
import weakref
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import codec
from mailroom.core import codec as codec_module
from mailroom.core import wire_format
from mailroom.core.codec_check import SAMPLES, check_shortcuts
from mailroom.core.errors import LocalError
from mailroom.core.packets import PACKET_TYPES, PACKETS, packet, packet_tag
from mailroom.core.wire import is_packet
from mailroom.protocols import CBCASTPacket, FifoPacket, ReliablePacket
from tests.strategies import packets


def _ping_class() -> type:
    """A fresh class named ``RegistryPing`` (what re-running a notebook cell makes)."""

    @attrs.frozen
    class RegistryPing:
        seq: int
        payload: Any

    return RegistryPing


def test_redefining_a_packet_class_replaces_it_and_the_old_one_still_encodes() -> None:
    old = packet(_ping_class())
    try:
        old_packet = old(1, "hi")
        new = packet(_ping_class())
        assert new is not old and PACKET_TYPES["RegistryPing"] is new
        assert codec.encode(old_packet) == codec.encode(new(1, "hi"))  # same tag, same bytes
        back = codec.decode(codec.encode(old_packet))
        assert type(back) is new and back == new(1, "hi")  # decoding builds the new class
        assert is_packet(old_packet) and is_packet(back)
        carried = FifoPacket(0, 1, 1, 1, old_packet)  # the old class still travels as a payload
        assert type(codec.decode(codec.encode(carried)).payload) is new
    finally:
        PACKETS.unregister(new)
        PACKETS.unregister(old)
    assert "RegistryPing" not in PACKET_TYPES


def test_a_retired_class_leaves_the_registry_when_it_is_collected() -> None:
    old = packet(_ping_class())
    new = packet(_ping_class())
    try:
        gone = weakref.ref(old)
        assert len(PACKETS.retired) == 1
        del old
        gc.collect()
        assert gone() is None and not PACKETS.retired
    finally:
        PACKETS.unregister(new)


def test_an_unregistered_class_is_refused_by_name() -> None:
    with pytest.raises(LocalError, match="RegistryPing is not a registered @packet class"):
        codec.encode(_ping_class()(1, None))


def test_a_dataclass_packet_is_a_one_line_local_error_at_decoration() -> None:
    @dataclasses.dataclass(frozen=True)
    class DataclassPing:
        seq: int

    with pytest.raises(LocalError) as caught:
        packet(DataclassPing)
    message = str(caught.value)
    assert "\n" not in message and "DataclassPing is not an attrs class" in message
    assert "@attrs.frozen" in message
    assert "DataclassPing" not in PACKET_TYPES


def test_a_tag_collision_is_refused_at_decoration() -> None:
    names = {}
    for k in range(100_000):  # two names with the same crc32 & 0xFFFF
        name = f"Collide{k}"
        tag = packet_tag(type(name, (), {}))
        if tag in names:
            break
        names[tag] = name
    first = attrs.make_class(names[tag], ["x"], frozen=True)
    second = attrs.make_class(name, ["x"], frozen=True)
    with PACKETS.registered(first), pytest.raises(LocalError, match="share codec tag"):
        packet(second)
    assert name not in PACKET_TYPES


# -- the shortcuts and the reference --------------------------------------------------


def test_the_import_check_refuses_an_encoder_that_drifts() -> None:
    def drifted(packet: object) -> bytes:
        data = codec.encode(packet)
        return data.replace(b"\x05\x01a", b"\x05\x01b")  # a one-letter string changes

    with pytest.raises(AssertionError, match="codec shortcut writes"):
        check_shortcuts(drifted, codec_module._read_packet, codec_module.GIVE_UP)


def test_the_import_check_refuses_a_reader_that_drifts() -> None:
    def drifted(data: bytes, pos: int, depth: int) -> tuple[object, int]:
        packet, end = codec_module._read_packet(data, pos, depth)
        values = [v + 1 if type(v) is int and v == 127 else v for v in attrs.astuple(packet)]
        return type(packet)(*values), end  # 127 read as 128

    with pytest.raises(AssertionError, match="codec shortcut reads"):
        check_shortcuts(codec.encode, drifted, codec_module.GIVE_UP)


def test_the_import_check_refuses_a_reader_that_accepts_malformed_bytes() -> None:
    def lenient(data: bytes, pos: int, depth: int) -> tuple[object, int]:
        fixed = data.replace(b"\x80\x00", b"\x00")  # a non-minimal varint, read anyway
        packet, end = codec_module._read_packet(fixed, pos, depth)
        return packet, end + len(data) - len(fixed)

    with pytest.raises(AssertionError, match="which is refused"):
        check_shortcuts(codec.encode, lenient, codec_module.GIVE_UP)


@pytest.mark.parametrize(
    "packet",
    [
        FifoPacket(1, 2, 300, 20000, "a short text"),
        FifoPacket(1, 2, 3, 4, -5),
        FifoPacket(1, 2, 3, 4, None),
        FifoPacket(1, 2, 3, 4, "é" * 100),
        CBCASTPacket(2, (1, 200, 70000), 7),
        ReliablePacket(0, 1, 2, 3, 4, CBCASTPacket(1, (1, 2), "x")),
    ],
    ids=str,
)
def test_the_shortcuts_read_the_common_shapes_without_the_reference(packet: object) -> None:
    data = codec.encode(packet)
    assert codec_module._read_packet(data, 1, 0) == (packet, len(data))


def test_every_sample_round_trips_or_is_refused_the_same_way() -> None:
    for value in SAMPLES:
        packet = FifoPacket(0, 1, 1, 1, [value])
        try:
            reference = wire_format.encode_reference(packet)
        except LocalError:
            with pytest.raises(LocalError):
                codec.encode(packet)
            continue
        assert codec.encode(packet) == reference
        assert codec.decode(reference) == wire_format.decode_reference(reference)


# -- encode_all ---------------------------------------------------------------------


@given(st.lists(packets(), max_size=4), st.data())
def test_encode_all_writes_what_encode_writes(batch: list[object], data: st.DataObject) -> None:
    """Including a packet carried by several others (one broadcast, several peers)."""
    if batch and data.draw(st.booleans()):
        inner = batch[0]
        batch += [ReliablePacket(0, to, to, 1, 0, inner) for to in range(3)]
    try:
        expected = [codec.encode(p) for p in batch]
    except LocalError:
        with pytest.raises(LocalError):
            codec.encode_all(batch)
        return
    assert codec.encode_all(batch) == expected


def test_encode_all_writes_a_shared_payload_once() -> None:
    inner = CBCASTPacket(1, (1, 2, 3), "x")
    carriers = [ReliablePacket(1, to, 1, 1, 0, inner) for to in (0, 2)]
    calls: list[object] = []
    values = PACKETS.by_class[CBCASTPacket].values
    PACKETS.by_class[CBCASTPacket] = attrs.evolve(
        PACKETS.by_class[CBCASTPacket], values=lambda p: calls.append(p) or values(p)
    )
    try:
        assert codec.encode_all(carriers) == [codec.encode(c) for c in carriers]
    finally:
        PACKETS.by_class[CBCASTPacket] = attrs.evolve(PACKETS.by_class[CBCASTPacket], values=values)
    assert len(calls) == 1 + 2  # encode_all reads the inner packet once, encode once each
