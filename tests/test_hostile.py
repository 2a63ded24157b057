"""Hostile input: random bytes, truncated and mutated valid packets, impossible counters
and unknown senders, fed to every endpoint (bare and over the reliable layer).

The only outcomes allowed are a normal step or ``RemoteError`` (from the codec or the
endpoint); after an error the endpoint's ``snapshot()`` is exactly what it was before,
and after a normal step it still checkpoints through JSON and restores exactly.
Run with ``-s`` to see how many inputs of each kind were tried and how they ended.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import (
    CBCAST,
    KS,
    RST,
    Fifo,
    LamportTotalOrder,
    LocalError,
    Reliable,
    RemoteError,
    Sequencer,
    Skeen,
    Stack,
    TaggedCausalBroadcast,
    Unordered,
    codec,
)
from mailroom.core.registry import restore_endpoint
from mailroom.sim import Simulation
from tests.strategies import field_values, packets

N = 3
ME = 1

ENDPOINTS: dict[str, tuple[Callable[[int, int], Any], bool]] = {
    "Fifo": (Fifo, False),
    "RST": (RST, False),
    "KS": (KS, False),
    "CBCAST": (CBCAST, True),
    "Unordered": (Unordered, False),
    "Reliable": (Reliable, False),
    "Reliable+Fifo": (lambda p, n: Stack(Reliable(p, n), Fifo(p, n)), False),
    "Reliable+RST": (lambda p, n: Stack(Reliable(p, n), RST(p, n)), False),
    "Reliable+KS": (lambda p, n: Stack(Reliable(p, n), KS(p, n)), False),
    "Reliable+CBCAST": (lambda p, n: Stack(Reliable(p, n), CBCAST(p, n)), True),
    "Sequencer": (Sequencer, True),
    "Skeen": (Skeen, True),
    "Lamport": (LamportTotalOrder, True),
    "Reliable+Skeen": (lambda p, n: Stack(Reliable(p, n), Skeen(p, n)), True),
    "Tagged": (TaggedCausalBroadcast, True),
    "Tagged(explicit)": (lambda p, n: TaggedCausalBroadcast(p, n, consume="explicit"), True),
    "Reliable+Tagged": (lambda p, n: Stack(Reliable(p, n), TaggedCausalBroadcast(p, n)), True),
    "Reliable+Fifo+Lamport": (
        lambda p, n: Stack(Reliable(p, n), Fifo(p, n), LamportTotalOrder(p, n)),
        True,
    ),
}

#: Endpoints where the one missing packet is all that their held messages wait for.
ONE_ROUND = {
    "Fifo",
    "RST",
    "KS",
    "Reliable+KS",
    "CBCAST",
    "Reliable",
    "Reliable+Fifo",
    "Reliable+RST",
    "Reliable+CBCAST",
    "Tagged",
    "Tagged(explicit)",
    "Reliable+Tagged",
}

TRIED: Counter[str] = Counter()


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    total = sum(v for k, v in TRIED.items() if k.startswith("input:"))
    print(f"\nhostile inputs tried: {total}")
    for key in sorted(TRIED):
        print(f"  {key}: {TRIED[key]}")


_BUSY: dict[str, tuple[dict[str, Any], list[bytes]]] = {}


def busy(name: str) -> tuple[Any, list[bytes]]:
    """P1 after a small run (something delivered, something held), and valid packets for it."""
    if name not in _BUSY:
        factory, broadcast = ENDPOINTS[name]
        sim = Simulation([factory(p, N) for p in range(N)], adversarial=True)
        for k in range(4):
            sender = (0, 2, 1, 0)[k]
            if broadcast:
                sim.broadcast(sender, f"b{k}")
            else:
                sim.send(sender, {"k": [k, 1.5, None]}, to=ME if sender != ME else 0)
        samples = [codec.encode(p.packet) for p in sim.packets(to=ME)]
        first = sim.packets(to=ME)[0].id
        for _ in range(50):  # everything arrives except P1's first packet: it stays held
            rest = [p for p in sim.packets() if p.id != first]
            if not rest:
                break
            sim.arrive(rest[0].id)
        _BUSY[name] = (sim.endpoints[ME].snapshot(), samples)
    data, samples = _BUSY[name]
    return restore_endpoint(json.loads(json.dumps(data))), samples


def feed(ep: Any, data: bytes | None, packet: object, kind: str) -> None:
    TRIED[f"input: {kind}"] += 1
    before = ep.snapshot()
    if data is not None:
        try:
            packet = codec.decode(data)
        except RemoteError:
            TRIED["outcome: refused by the codec"] += 1
            return
    try:
        ep.receive(packet)
    except RemoteError:
        TRIED["outcome: refused by the endpoint (state unchanged)"] += 1
        assert ep.snapshot() == before
        return
    TRIED["outcome: normal step"] += 1
    after = json.loads(json.dumps(ep.snapshot()))
    assert restore_endpoint(after).snapshot() == ep.snapshot()


names = pytest.mark.parametrize("name", sorted(ENDPOINTS))


@names
@given(data=st.binary(max_size=120))
def test_random_bytes(name: str, data: bytes) -> None:
    ep, _ = busy(name)
    feed(ep, data, None, "random bytes")


@st.composite
def mutated(draw: st.DrawFn, samples: list[bytes]) -> bytes:
    raw = bytearray(draw(st.sampled_from(samples)))
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["truncate", "flip", "set", "insert", "delete", "splice"]))
        i = draw(st.integers(0, max(len(raw) - 1, 0)))
        if how == "truncate":
            del raw[i:]
        elif how == "flip" and raw:
            raw[i] ^= 1 << draw(st.integers(0, 7))
        elif how == "set" and raw:
            raw[i] = draw(st.integers(0, 255))
        elif how == "insert":
            raw[i:i] = draw(st.binary(min_size=1, max_size=4))
        elif how == "delete" and raw:
            del raw[i]
        else:
            raw[i:] = draw(st.sampled_from(samples))[i:]
    return bytes(raw)


@names
@given(data=st.data())
def test_truncated_and_mutated_valid_packets(name: str, data: st.DataObject) -> None:
    ep, samples = busy(name)
    raw = data.draw(mutated(samples))
    feed(ep, raw, None, "mutated valid packet")


@names
@given(data=st.data())
def test_valid_packets_with_one_field_made_impossible(name: str, data: st.DataObject) -> None:
    ep, samples = busy(name)
    packet = codec.decode(data.draw(st.sampled_from(samples)))
    field = data.draw(st.sampled_from([f.name for f in attrs.fields(type(packet))]))
    value = data.draw(
        st.sampled_from([-1, N, N + 7, 2**53 + 1, 2**64 - 1, None, "x", (), (0,) * (N + 1)])
        | field_values
    )
    try:
        packet = attrs.evolve(packet, **{field: value})
        raw = codec.encode(packet)
    except (TypeError, ValueError, LocalError):  # the encoder refuses what decode would
        return
    feed(ep, raw, None, "valid packet, one field impossible")


@names
@given(packet=packets())
def test_any_registered_packet_with_arbitrary_fields(name: str, packet: object) -> None:
    ep, _ = busy(name)
    feed(ep, codec.encode(packet), None, "registry packet, arbitrary fields")


@names
def test_the_busy_endpoints_are_busy(name: str) -> None:
    ep, samples = busy(name)
    assert len(samples) >= 2
    if name not in ONE_ROUND:
        return  # Unordered holds nothing; total orders need more rounds than one packet
    assert ep.buffered() >= 1  # the first packet is missing, later ones wait
    feed(ep, samples[0], None, "the missing packet")
    assert ep.buffered() == 0 and ep.pending() == []
