"""Hostile codec input (issue 19): decoding has a budget, raises only RemoteError, and
every packet the codec accepts can be delivered and traced.

Memory is measured with tracemalloc (the peak of what decoding allocates), never
with a clock. The bound is ``DECODE_BYTES_PER_BYTE * len(data) + DECODE_BASE_BYTES``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import tracemalloc
import zlib
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mailroom import CBCAST, Reliable, Stack, codec
from mailroom.clocks import VectorClock
from mailroom.core import codec as codec_module
from mailroom.core import wire_format
from mailroom.core.actions import Deliver, Transmit
from mailroom.core.codec import (
    DECODE_BASE_BYTES,
    DECODE_BASE_CELLS,
    DECODE_BYTES_PER_BYTE,
    DECODE_CELLS_PER_BYTE,
    MAX_ELEMENTS,
    decode_budget,
)
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.protocols import CBCASTBatch, CBCASTPacket, FifoPacket, ReliablePacket, RSTPacket
from mailroom.trace import Event, read_jsonl, write_jsonl
from tests.strategies import packets


def tag(name: str) -> bytes:
    return (zlib.crc32(name.encode()) & 0xFFFF).to_bytes(2, "big")


def varint(v: int) -> bytes:
    out = bytearray()
    wire_format.write_varint(out, v)
    return bytes(out)


def rst(value: bytes, payload: bytes = b"\x00") -> bytes:
    """An RSTPacket whose ``sent`` field is ``value`` (the codec does not type fields)."""
    return b"\x01" + tag("RSTPacket") + b"\x80\x80\x80" + value + payload


def sparse_matrix(rows: int, cols: int) -> bytes:
    return b"\x0c" + varint(rows) + varint(cols) + b"\x00"  # no non-zero entry


def sparse_vector(size: int) -> bytes:
    return b"\x0a" + varint(size) + b"\x00"


def seq(kind: int, items: list[bytes]) -> bytes:
    return bytes([kind]) + varint(len(items)) + b"".join(items)


def bound(data: bytes) -> int:
    return DECODE_BYTES_PER_BYTE * len(data) + DECODE_BASE_BYTES


def decode_measured(data: bytes) -> tuple[str, int]:
    """("ok" or the RemoteError text, the tracemalloc peak of decoding ``data``)."""
    tracemalloc.start()
    try:
        codec.decode(data)
        outcome = "ok"
    except RemoteError as exc:
        outcome = str(exc)
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return outcome, peak


# -- the attacks of issue 19, reproduced --------------------------------------------

#: Before the budget: 13 bytes allocated 67 MB, 39 bytes 302 MB and 213 bytes 2.0 GB
#: (tracemalloc peaks); each sparse 2**20 x 1 matrix costs 7 bytes on the wire.
ATTACKS = {
    "a sparse 2**20 x 1 matrix as a payload": b"\x01"
    + tag("FifoPacket")
    + b"\x80\x81\x81\x81"
    + sparse_matrix(1 << 20, 1),
    "a CBCAST vector clock of 2**20 zeros": b"\x01"
    + tag("CBCASTPacket")
    + b"\x80"
    + sparse_vector(1 << 20)
    + b"\x00",
    "RST sent: one sparse 2**20 x 1 matrix": rst(sparse_matrix(1 << 20, 1)),
    "RST sent: a tuple of 5 of them": rst(seq(7, [sparse_matrix(1 << 20, 1)] * 5)),
    "RST sent: a tuple of 34 of them": rst(seq(7, [sparse_matrix(1 << 20, 1)] * 34)),
    "a tuple of 2 sparse 2**20 vectors": rst(seq(7, [sparse_vector(1 << 20)] * 2)),
}


@pytest.mark.parametrize("data", ATTACKS.values(), ids=list(ATTACKS))
def test_the_amplification_attacks_are_refused_within_the_budget(data: bytes) -> None:
    outcome, peak = decode_measured(data)
    assert "decode budget" in outcome
    assert peak <= bound(data)
    assert peak < 64 * 1024  # refused before the allocation, not after it


def test_the_budget_is_the_documented_formula() -> None:
    assert decode_budget(0) == DECODE_BASE_CELLS
    assert decode_budget(100) == DECODE_BASE_CELLS + 100 * DECODE_CELLS_PER_BYTE


# -- the most a packet can cost: worst cases by construction -------------------------

ACK = b"\x0d" + tag("ReliableAck") + b"\x80\x80\x80"  # a nested packet of three small ints
ENTRIES = [varint(len(k)) + k + b"\x06\x00" for k in (f"{i:x}".encode() for i in range(20_000))]
WORST = {
    # the base: as much as any short packet may build
    "sparse 13,000 x 1 matrix": rst(sparse_matrix(13_000, 1)),
    "sparse 254 x 254 matrix": rst(sparse_matrix(254, 254)),
    "sparse vector of 65,536": rst(sparse_vector(65_536)),
    # the per-byte part: sparse values paid for by bytes, and the densest dense values
    "5,000 sparse 200-vectors": rst(seq(7, [sparse_vector(200)] * 5_000)),
    "4,000 sparse 40 x 1 matrices": rst(seq(7, [sparse_matrix(40, 1)] * 4_000)),
    "5,000 vector clocks of 200": rst(seq(7, [b"\x0e" + sparse_vector(200)] * 5_000)),
    "20,000 empty lists": rst(seq(6, [b"\x06\x00"] * 20_000)),
    "20,000 empty dicts": rst(seq(6, [b"\x08\x00"] * 20_000)),
    "20,000 [[]]": rst(seq(6, [b"\x06\x01\x06\x00"] * 20_000)),
    "20,000 nested ReliableAcks": rst(seq(6, [ACK] * 20_000)),
    "dict of 20,000 keys": rst(b"\x08" + varint(20_000) + b"".join(ENTRIES)),
    "dense 50,000 x 1 matrix": rst(b"\x0b" + varint(50_000) + b"\x01" + b"\x01" * 50_000),
    "dense vector of 50,000": rst(b"\x09" + varint(50_000) + b"\x01" * 50_000),
    "64 levels of lists": rst(b"\x06\x01" * 63 + b"\x06\x00"),
}


@pytest.mark.parametrize("data", WORST.values(), ids=list(WORST))
def test_worst_cases_stay_within_the_bound(data: bytes) -> None:
    _, peak = decode_measured(data)
    assert peak <= bound(data)


def test_a_legitimate_large_group_still_fits_the_base() -> None:
    """A 254-process RST matrix of zeros and a 65,536-process vector clock decode in a
    packet of a dozen bytes; one entry more than the base allows is refused."""
    for packet in (
        RSTPacket(0, 1, 1, tuple((0,) * 254 for _ in range(254)), None),
        CBCASTPacket(0, (0,) * 65_536, None),
    ):
        data = codec.encode(packet)
        assert len(data) < 16
        assert codec.decode(data) == packet
    too_big = CBCASTPacket(0, (0,) * (DECODE_BASE_CELLS + 200), None)
    with pytest.raises(LocalError, match="decode budget"):
        codec.encode(too_big)
    with pytest.raises(RemoteError, match="decode budget"):
        codec.decode(
            b"\x01"
            + tag("CBCASTPacket")
            + b"\x80"
            + sparse_vector(DECODE_BASE_CELLS + 200)
            + b"\x00"
        )


# -- fuzzing with a memory bound --------------------------------------------------------


@st.composite
def hostile_values(draw: st.DrawFn, depth: int = 0) -> bytes:
    """Bytes of one value, chosen to be expensive: sparse forms of any size, long
    sequences, nesting, sometimes malformed."""
    sizes = st.integers(0, 40) | st.sampled_from([200, 13_000, 65_536, 1 << 20, (1 << 20) + 1])
    choice = draw(st.integers(0, 9 if depth < 6 else 5))
    if choice == 0:
        return sparse_vector(draw(sizes))
    if choice == 1:
        return sparse_matrix(draw(sizes) or 1, draw(st.sampled_from([1, 2, 254, 1 << 20])))
    if choice == 2:
        return b"\x0e" + sparse_vector(draw(sizes))
    if choice == 3:
        return draw(st.sampled_from([b"\x80", b"\x00", b"\x06\x00", b"\x08\x00", b"\x03\x80\x02"]))
    if choice == 4:
        return b"\x0d" + tag("ReliableAck") + b"\x80" * draw(st.integers(0, 4))
    if choice == 5:
        return draw(st.binary(max_size=6))
    count = draw(st.integers(0, 6))
    items = [draw(hostile_values(depth + 1)) for _ in range(count)]
    kind = draw(st.sampled_from([6, 7]))
    return bytes([kind]) + varint(count) + b"".join(items)


@st.composite
def hostile_packets(draw: st.DrawFn) -> bytes:
    fields = draw(st.lists(hostile_values(), min_size=1, max_size=6))
    head = b"\x01" + draw(
        st.sampled_from([tag("RSTPacket"), tag("FifoPacket"), tag("CBCASTPacket")])
    )
    return head + b"".join(fields)


#: What the fast decoder reads inline in a batch: short text, small ints and None (a
#: batch of ints only is written as a vector, which it reads in its own way).
INLINE = st.one_of(st.text(max_size=30), st.none(), st.integers(0, 127))


@st.composite
def batch_frames(draw: st.DrawFn, items: st.SearchStrategy[object] | None = None) -> object:
    """A CBCAST batch (by default of short and long text, ints, None and bools), alone or
    carried by Reliable."""
    if items is None:
        text = st.text(max_size=8) | st.text(min_size=100, max_size=140)  # 1- and 2-byte lengths
        items = st.one_of(text, st.integers(-300, 300), st.none(), st.booleans())
    batch = CBCASTBatch(
        draw(st.integers(0, 3)),
        tuple(draw(st.lists(st.integers(0, 300), min_size=1, max_size=4))),
        tuple(draw(st.lists(items, min_size=1, max_size=6))),
    )
    if draw(st.booleans()):
        return batch
    return ReliablePacket(0, 1, 1, 1, 0, batch)


@st.composite
def mutated(draw: st.DrawFn, source: st.SearchStrategy[object] | None = None) -> bytes:
    """A valid encoding, then a few bytes flipped, set, inserted, deleted or cut."""
    try:
        raw = bytearray(codec.encode(draw(packets() if source is None else source)))
    except LocalError:
        assume(False)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(raw)))
        how = draw(st.sampled_from(["set", "insert", "delete", "cut"]))
        if how == "set" and at < len(raw):
            raw[at] = draw(st.integers(0, 255))
        elif how == "insert":
            raw[at:at] = draw(
                st.sampled_from([b"\x0a\xff\xff\x3f\x00", b"\x0c\xff\xff\x3f\x01\x00", b"\xff"])
            )
        elif how == "delete" and at < len(raw):
            del raw[at]
        elif how == "cut":
            del raw[at:]
    return bytes(raw)


def general_outcome(data: bytes) -> tuple[str, Any]:
    try:
        return ("ok", codec.encode(wire_format.decode_reference(data)))
    except RemoteError as exc:
        return ("error", str(exc))


def check_hostile(data: bytes) -> None:
    """Only RemoteError, within the memory bound, and fast and general decoders agree."""
    outcome, peak = decode_measured(data)  # anything but RemoteError fails the test here
    assert peak <= bound(data), f"{len(data)} bytes took {peak} bytes to decode"
    if outcome == "ok":
        assert general_outcome(data) == ("ok", codec.encode(codec.decode(data)))
        assert codec.encode(codec.decode(data)) == data or codec.decode(
            codec.encode(codec.decode(data))
        )
    else:
        assert general_outcome(data) == ("error", outcome)


@given(st.binary(max_size=200))
def test_random_bytes_within_the_memory_bound(data: bytes) -> None:
    check_hostile(data)


@given(hostile_packets())
def test_expensive_shapes_within_the_memory_bound(data: bytes) -> None:
    check_hostile(data)


@given(mutated())
def test_mutated_packets_within_the_memory_bound(data: bytes) -> None:
    check_hostile(data)


@given(mutated(batch_frames()))
def test_mutated_batches_decode_as_the_general_decoder_says(data: bytes) -> None:
    check_hostile(data)


@given(batch_frames(INLINE))
def test_batches_decode_on_the_fast_path(packet: object) -> None:
    batch = packet.payload if isinstance(packet, ReliablePacket) else packet
    assume(0 not in batch.vc)  # a clock with a zero entry is written sparse
    assume(not all(type(p) is int for p in batch.payloads))
    data = codec.encode(packet)
    assert codec_module._read_packet(data, 1, 0) == (packet, len(data))
    assert codec.decode(data) == wire_format.decode_reference(data) == packet


@given(batch_frames())
def test_the_fast_path_reads_a_batch_exactly_or_leaves_it(packet: object) -> None:
    """Whatever a batch holds, the fast decoder reads exactly it or gives it up."""
    data = codec.encode(packet)
    try:
        read = codec_module._read_packet(data, 1, 0)
    except (codec_module._GiveUp, IndexError, UnicodeDecodeError):
        return
    assert read == (packet, len(data))


# -- nothing but RemoteError, even under a memory or recursion limit ------------------------


def run_isolated(code: str) -> str:
    """Run ``code`` in a fresh interpreter (a limit there cannot hurt this one)."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS is enforced on Linux")
def test_memory_error_under_a_memory_limit_becomes_remote_error() -> None:
    """A legitimate 1 MB packet needs about 40 MB decoded; under a limit that leaves
    less, decoding meets MemoryError and reports RemoteError (before: MemoryError)."""
    out = run_isolated(
        """
        import resource
        from mailroom import codec
        from mailroom.core.errors import RemoteError
        from mailroom.protocols import FifoPacket
        data = codec.encode(FifoPacket(0, 1, 1, 1, [[]] * 250_000))
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (8 << 20), resource.RLIM_INFINITY))
        try:
            codec.decode(data)
            print("decoded")
        except RemoteError as exc:
            print("RemoteError", exc)
        """
    )
    assert out.startswith("RemoteError packet could not be decoded: MemoryError"), out


def test_recursion_error_becomes_remote_error() -> None:
    """Decoding called with little stack left meets RecursionError: RemoteError.

    The packet's payload nests 60 lists (within the format's 64) and its class checks
    the payload by recursing over it, as an application's packet class may: code that
    stays Python in every build. The pure reader meets the recursion limit in its own
    recursion first; in the compiled build the reader and ``check_payload`` are native
    code, which uses no Python frames, so the class's check meets it. With the whole
    stack, the same bytes decode: it is the stack, not the bytes, that fails.
    """
    out = run_isolated(
        """
        import sys
        import attrs
        from mailroom import codec
        from mailroom.core.errors import RemoteError
        from mailroom.core.packets import packet

        def depth(value):
            return 1 + depth(value[0]) if type(value) is list and value else 0

        @packet
        @attrs.frozen
        class DeeplyChecked:
            sender: int
            payload: object = attrs.field(validator=lambda _p, _a, v: depth(v))

        payload = []
        for _ in range(60):
            payload = [payload]
        sent = DeeplyChecked(1, payload)
        data = codec.encode(sent)
        print("decoded" if codec.decode(data) == sent else "decoded wrong")
        def deep(k):
            if k:
                return deep(k - 1)
            try:
                codec.decode(data)
                return "decoded with little stack left"
            except RemoteError as exc:
                return f"RemoteError {exc}"
        sys.setrecursionlimit(200)
        print(deep(150))
        """
    )
    whole, little = out.splitlines()
    assert whole == "decoded", out
    assert little.startswith("RemoteError packet could not be decoded: RecursionError"), out


def test_nesting_is_refused_by_rule_at_the_format_limit() -> None:
    """The deepest payload the format allows (65 lists: depths 0 to 64) decodes in every
    build; one level more is refused by the decoder's rule, which names the limit, not
    by the interpreter's recursion limit."""
    payload: list[Any] = []
    for _ in range(64):
        payload = [payload]
    deepest = FifoPacket(0, 1, 1, 1, payload)
    data = codec.encode(deepest)
    assert codec.decode(data) == deepest
    assert data.endswith(b"\x06\x01\x06\x00")  # ... [[]]: one more level below
    with pytest.raises(RemoteError, match=f"nested more than {wire_format.MAX_DEPTH} levels"):
        codec.decode(data[:-2] + b"\x06\x01\x06\x00")
    with pytest.raises(LocalError, match=f"nested more than {wire_format.MAX_DEPTH} levels"):
        codec.encode(FifoPacket(0, 1, 1, 1, [payload]))


# -- the encoder refuses what the decoder refuses ----------------------------------------


def unchecked_bytes(packet: object) -> bytes:
    """A packet's bytes as the format writes them, past every encoder check."""
    out = bytearray(b"\x01")

    def write(p: object, depth: int) -> None:
        out.extend(tag(type(p).__name__))
        for f in attrs.fields(type(p)):  # type: ignore[misc]
            value = getattr(p, f.name)
            if attrs.has(type(value)) and type(value) not in (VectorClock, MessageId):
                out.append(wire_format.PACKET)
                write(value, depth + 1)
            else:
                wire_format.write_value(out, value, depth, [0])

    write(packet, 0)
    return bytes(out)


@given(packets(loose=True))
def test_encode_refuses_exactly_what_decode_refuses(packet: object) -> None:
    try:
        raw = unchecked_bytes(packet)
    except LocalError:  # a value no packet can hold (a set, NaN, 2**64): refused anyway
        with pytest.raises(LocalError):
            codec.encode(packet)
        return
    try:
        codec.decode(raw)
    except RemoteError:
        with pytest.raises(LocalError):
            codec.encode(packet)
        return
    assert codec.encode(packet) == raw


def test_the_encoder_refuses_vectors_its_decoder_refuses() -> None:
    """Before: these encoded, and the decoder then refused its own bytes."""
    for packet in (
        CBCASTPacket(0, (0,) * (MAX_ELEMENTS + 1), None),
        CBCASTPacket(0, (1,) * (MAX_ELEMENTS + 1), None),
        RSTPacket(0, 1, 1, tuple((0,) * 1025 for _ in range(1024)), None),
        RSTPacket(0, 1, 1, tuple((0,) * 200 for _ in range(400)), None),  # over the budget
    ):
        with pytest.raises(LocalError):
            codec.encode(packet)


# -- any accepted packet can be delivered and traced ---------------------------------------


def carried_packet_from_a_peer(inner: object) -> bytes:
    """What P1 of a ``Stack(Reliable, CBCAST)`` group of 2 sends when asked to broadcast
    ``inner`` (a packet as the application payload)."""
    p1 = Stack(Reliable(1, 2), CBCAST(1, 2))
    sent = [a for a in p1.broadcast(inner) if isinstance(a, Transmit) and a.to == 0]
    return codec.encode(sent[0].packet)


def test_a_packet_as_the_payload_is_delivered_and_traced(tmp_path: Path) -> None:
    """Before: the codec and CBCAST accepted it, then the trace writer raised TypeError."""
    inner = FifoPacket(1, 0, 7, 2, {"text": "hi", "n": [1, 2]})
    p0 = Stack(Reliable(0, 2), CBCAST(0, 2))
    actions = p0.receive(codec.decode(carried_packet_from_a_peer(inner)))
    (delivered,) = [a.message for a in actions if isinstance(a, Deliver)]
    assert delivered.payload == inner
    event = Event(
        "run", 0, 1, "deliver", delivered.id, delivered.sender, (0, 1), payload=delivered.payload
    )
    row = event.to_dict()
    assert json.loads(json.dumps(row))["payload"] == {
        "$packet": "FifoPacket",
        "sender": 1,
        "dest": 0,
        "seq": 7,
        "channel": 2,
        "payload": {"text": "hi", "n": [1, 2]},
    }
    path = tmp_path / "trace.jsonl"
    assert write_jsonl([event], path) == 1
    (back,) = read_jsonl(path)
    assert back == event and back.payload == row["payload"]


def test_a_packet_as_the_payload_is_written_by_the_runtime_trace(tmp_path: Path) -> None:
    from mailroom.net.store import TraceFile

    inner = ReliablePacket(1, 0, 1, 1, 0, CBCASTPacket(1, (1, 0), "deep"))
    p0 = Stack(Reliable(0, 2), CBCAST(0, 2))
    actions = p0.receive(codec.decode(carried_packet_from_a_peer(inner)))
    (delivered,) = [a.message for a in actions if isinstance(a, Deliver)]
    trace = TraceFile(tmp_path / "t.jsonl")
    event = Event("run", 0, 1, "deliver", delivered.id, 1, (0, 1), payload=delivered.payload)
    trace.confirm(*trace.stage([(json.dumps(event.to_dict()) + "\n").encode()]))
    trace.close()
    (back,) = read_jsonl(tmp_path / "t.jsonl")
    assert back.payload["$packet"] == "ReliablePacket"
    assert back.payload["payload"] == {
        "$packet": "CBCASTPacket",
        "sender": 1,
        "vc": [1, 0],
        "payload": "deep",
    }


def test_a_packet_as_the_payload_is_written_to_parquet(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from mailroom.trace.parquet import read_parquet, write_parquet

    inner = FifoPacket(1, 0, 7, 2, None)
    event = Event("run", 0, 1, "deliver", MessageId(1, 1), 1, (0, 1), payload=inner)
    write_parquet([event], tmp_path / "t.parquet")
    (back,) = read_parquet(tmp_path / "t.parquet")
    assert back.payload == {
        "$packet": "FifoPacket",
        "sender": 1,
        "dest": 0,
        "seq": 7,
        "channel": 2,
        "payload": None,
    }


@pytest.mark.parametrize(
    "inner",
    [
        FifoPacket(VectorClock((1,)), 0, 1, 1, "x"),  # type: ignore[arg-type]
        FifoPacket(MessageId(0, 1), 0, 1, 1, "x"),  # type: ignore[arg-type]
        FifoPacket(FifoPacket(0, 0, 1, 1, None), 0, 1, 1, "x"),  # type: ignore[arg-type]
        [FifoPacket(0, 0, 1, 1, None)],
        {"k": FifoPacket(0, 0, 1, 1, None)},
    ],
    ids=["clock field", "message id field", "packet field", "packet in a list", "packet in a dict"],
)
def test_a_payload_that_cannot_be_traced_is_refused_at_the_boundary(inner: object) -> None:
    """A carried packet whose other fields are not plain data, or a packet inside a
    payload's data, could be neither traced nor checkpointed: refused on both sides."""
    p1 = Stack(Reliable(1, 2), CBCAST(1, 2))
    with pytest.raises(LocalError):
        p1.broadcast(inner)  # the application's side: nothing sent
    packet = ReliablePacket(1, 0, 1, 1, 0, CBCASTPacket(1, (1, 0), inner))
    with pytest.raises(LocalError):
        codec.encode(packet)
    with pytest.raises(RemoteError, match="payload"):
        codec.decode(unchecked_bytes(packet))
