"""``carried_message_id`` is the spec of a frame's message id: for every Transmit that
any registered protocol (bare and over ``Reliable``) or buggy variant emits, on a
lossy, duplicating network that Hypothesis chooses, the packet names the message the
endpoint said it carries. The runtime refuses a frame whose header says otherwise."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import Reliable, RemoteError, Stack
from mailroom.core.actions import Transmit
from mailroom.core.endpoint import capabilities
from mailroom.core.messages import MessageId
from mailroom.core.registry import PROTOCOLS
from mailroom.core.wire import carried_high_ids, carried_message_id, carried_message_ids
from mailroom.lab.matrix import VARIANTS as MATRIX_VARIANTS
from mailroom.protocols import CBCASTBatch, CBCASTPacket, ReliableAck, ReliablePacket
from mailroom.protocols.total.sequencer import SequencerOrderBatch
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing import variants, variants_total

Factory = Callable[[int, int], Any]


def _over_reliable(make: Factory) -> Factory:
    return lambda p, n: Stack(Reliable(p, n, rto=2.0, max_rto=8.0), make(p, n))


CASES: dict[str, Factory] = {"reliable": lambda p, n: Reliable(p, n, rto=2.0, max_rto=8.0)}
for _name, (_factory, _, _) in PROTOCOLS.items():
    CASES[_name] = _factory
    CASES[f"reliable+{_name}"] = _over_reliable(_factory)
for _module in (variants, variants_total):
    for _cls in vars(_module).values():
        mine = isinstance(_cls, type) and _cls.__module__ == _module.__name__
        if mine and not _cls.__name__.startswith("_"):
            CASES[f"variant:{_cls.__name__}"] = _cls
for _cls in MATRIX_VARIANTS:
    CASES[f"lab:{_cls.__name__}"] = _cls


@pytest.mark.parametrize("name", sorted(CASES))
@given(
    seed=st.integers(0, 2**16),
    n=st.integers(2, 4),
    sends=st.integers(1, 12),
    lossy=st.booleans(),
)
def test_every_transmit_carries_the_message_id_it_names(
    name: str, seed: int, n: int, sends: int, lossy: bool
) -> None:
    factory = CASES[name]
    seen: list[Transmit] = []
    reliable = name.startswith("reliable")
    net = NetworkModel(
        delay=(0.1, 3.0), loss=0.3 if lossy and reliable else 0.0, duplicate=0.2 if lossy else 0.0
    )
    sim = Simulation(
        [factory(p, n) for p in range(n)],
        net,
        seed=seed,
        on_transmit=lambda _s, _p, t: seen.append(t),
    )
    broadcast = "broadcast" in capabilities(sim.endpoints[0])
    for k in range(sends):
        p = (k * 7 + seed) % n
        if broadcast:
            sim.schedule(k * 0.3, lambda s, p=p, k=k: s.broadcast(p, [k]))
        else:
            sim.schedule(k * 0.3, lambda s, p=p, k=k: s.send(p, f"m{k}", to=(p + k + 1) % n))
    buggy = name.startswith(("variant:", "lab:"))
    with contextlib.suppress(*((RemoteError,) if buggy else ())):  # a buggy variant may stop
        sim.run(until=200.0)
    assert seen
    assert any(t.message_id is not None for t in seen)
    for t in seen:
        assert carried_message_id(t.packet) == t.message_id, (type(t.packet).__name__, t)


def test_a_stacked_packet_is_looked_inside_and_control_packets_carry_nothing() -> None:
    inner = CBCASTPacket(2, (0, 0, 5), "x")
    assert carried_message_id(inner) == MessageId(2, 5)
    assert carried_message_id(ReliablePacket(2, 0, 9, 9, 0, inner)) == MessageId(2, 5)
    assert carried_message_id(ReliablePacket(2, 0, 9, 4, 0, "app data")) == MessageId(2, 4)
    assert carried_message_id(ReliableAck(2, 0, 3)) is None
    assert carried_message_id("not a packet") is None


def test_a_malformed_packet_names_no_message_id() -> None:
    with pytest.raises(RemoteError, match="CBCASTPacket names no well-formed message id"):
        carried_message_id(CBCASTPacket(7, (0, 0, 1), "x"))  # no vc entry for P7


def _highest(ids: tuple[MessageId, ...]) -> set[MessageId]:
    """Each origin's highest id among ``ids``."""
    high: dict[int, MessageId] = {}
    for m in ids:
        if m.origin not in high or m.seq > high[m.origin].seq:
            high[m.origin] = m
    return set(high.values())


BATCHING = sorted(
    name for name in CASES if not name.startswith(("variant:", "lab:")) and name != "reliable"
)


@pytest.mark.parametrize("name", BATCHING)
@given(seed=st.integers(0, 2**16), sizes=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_the_high_ids_of_every_packet_bound_what_it_carries(
    name: str, seed: int, sizes: list[int]
) -> None:
    """What a runtime records as seen (``carried_high_ids``: a batch's last id alone) is
    each origin's highest id among everything the packet carries, batches included."""
    n = 3
    seen: list[Transmit] = []
    sim = Simulation(
        [CASES[name](p, n) for p in range(n)],
        NetworkModel(delay=(0.1, 3.0)),
        seed=seed,
        on_transmit=lambda _s, _p, t: seen.append(t),
    )
    broadcast = "broadcast" in capabilities(sim.endpoints[0])
    for k, size in enumerate(sizes):
        p, batch = (k + seed) % n, [k] * size
        if broadcast:
            sim.schedule(k * 0.3, lambda s, p=p, batch=batch: s.broadcast_many(p, batch))
        else:
            sim.schedule(k * 0.3, lambda s, p=p, batch=batch: s.send_many(p, batch, (p + 1) % n))
    sim.run(until=200.0)
    assert seen
    for t in seen:
        assert set(carried_high_ids(t.packet)) == _highest(carried_message_ids(t.packet))


def test_a_malformed_batch_names_no_high_id() -> None:
    batch = CBCASTBatch(1, (0, 4, 0), "not a tuple")
    with pytest.raises(RemoteError, match="CBCASTBatch names no well-formed message ids"):
        carried_high_ids(batch)
    assert carried_high_ids(CBCASTBatch(1, (0, 4, 0), ())) == ()
    assert carried_high_ids(CBCASTBatch(1, (0, 4, 0), ("a", "b"))) == (MessageId(1, 5),)
    inner = SequencerOrderBatch(9, 2, 7, ("a", "b", "c"))
    assert carried_high_ids(ReliablePacket(1, 0, 3, 7, 0, inner)) == (MessageId(2, 9),)
