"""``carried_message_id`` is the spec of a frame's message id: for every Transmit that
any registered protocol (bare and over ``Reliable``) or buggy variant emits, on a
lossy, duplicating network that Hypothesis chooses, the packet names the message the
endpoint said it carries. The runtime refuses a packet whose frame header names
another id than any layer of it (``layer_ids``): a packet may also be the application's
payload, whose own id ``carried_message_id`` reads instead."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import CBCAST, Reliable, RemoteError, Stack
from mailroom.core.actions import Transmit
from mailroom.core.endpoint import capabilities
from mailroom.core.messages import MessageId
from mailroom.core.registry import PROTOCOLS
from mailroom.core.wire import (
    carried_high_ids,
    carried_message_id,
    carried_message_ids,
    layer_message_id,
)
from mailroom.lab.matrix import VARIANTS as MATRIX_VARIANTS
from mailroom.net.connections import layer_ids
from mailroom.protocols import CBCASTBatch, CBCASTPacket, FifoPacket, ReliableAck, ReliablePacket
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


#: Packets an application may send as its payload (``check_payload`` takes a whole
#: packet): one naming another message, a control packet, one whose ``carries()``
#: fails (no vector entry for P7; not in a Stack over ``Reliable``, which names a
#: retransmission by ``carried_message_id`` and cannot name this one).
APP_PACKETS = (FifoPacket(1, 0, 7, 2, "x"), ReliableAck(1, 0, 3), CBCASTPacket(7, (0, 0, 1), "y"))


@pytest.mark.parametrize("name", [*BATCHING, "reliable"])
def test_a_frame_labels_one_of_the_layers_of_a_packet_carrying_an_application_packet(
    name: str,
) -> None:
    """With packets as the application's payloads, every Transmit names the id of one
    layer of its packet (what the runtime accepts), though not always the innermost one
    (``carried_message_id``): the top layer's, which the bytes cannot tell apart from
    a lower layer carrying it."""
    n = 3
    seen: list[Transmit] = []
    sim = Simulation(
        [CASES[name](p, n) for p in range(n)],
        NetworkModel(delay=(0.1, 3.0), duplicate=0.2),
        seed=3,
        on_transmit=lambda _s, _p, t: seen.append(t),
    )
    broadcast = "broadcast" in capabilities(sim.endpoints[0])
    payloads = APP_PACKETS[:2] if name.startswith("reliable+") else APP_PACKETS
    for k, payload in enumerate(payloads * 2):
        p = k % n
        if broadcast:
            sim.schedule(k * 0.3, lambda s, p=p, x=payload: s.broadcast(p, x))
        else:
            sim.schedule(k * 0.3, lambda s, p=p, x=payload: s.send(p, x, to=(p + 1) % n))
    sim.run(until=200.0)
    labelled = [t for t in seen if t.message_id is not None]
    assert len(labelled) >= len(payloads) * 2
    for t in seen:
        assert t.message_id in (layer_ids(t.packet) or ()), (type(t.packet).__name__, t)
    innermost = []
    for t in labelled:
        with contextlib.suppress(RemoteError):
            innermost.append(carried_message_id(t.packet) == t.message_id)
    assert not all(innermost)  # the check that refused these frames


def test_the_layers_of_a_packet_name_their_ids_outermost_first() -> None:
    inner = CBCASTPacket(2, (0, 0, 5), FifoPacket(2, 0, 7, 1, "x"))
    assert layer_ids(inner) == [MessageId(2, 5), MessageId(2, 7)]
    wrapped = ReliablePacket(2, 0, 9, 4, 0, inner)
    assert layer_ids(wrapped) == [MessageId(2, 4), MessageId(2, 5), MessageId(2, 7)]
    assert layer_ids(CBCASTPacket(2, (0, 0, 5), ReliableAck(2, 0, 3))) == [MessageId(2, 5), None]
    assert layer_ids(ReliablePacket(2, 0, 9, 4, 0, CBCASTPacket(7, (0, 0, 1), "x"))) == [
        MessageId(2, 4)
    ]  # a layer that names nothing well-formed is left out
    assert layer_ids(CBCASTPacket(7, (0, 0, 1), "x")) is None  # no layer names an id
    assert layer_ids("not a packet") == [None]


def test_a_lower_layers_retransmission_is_labelled_as_its_first_transmission() -> None:
    """Stack(Reliable, CBCAST) broadcasting an application payload that is itself a
    packet: CBCAST labels it with its own id; Reliable's retransmission, acting on its
    own, used to be labelled with the innermost packet's id (the application's
    FifoPacket), so the receiver accepted a frame it had named by another message. It
    is labelled with the top layer's id, as the first transmission was."""
    stack = Stack(Reliable(0, 2, rto=0.2), CBCAST(0, 2))
    app = FifoPacket(1, 0, 7, 2, "x")
    (first,) = [a for a in stack.broadcast(app) if isinstance(a, Transmit)]
    assert stack.tick(0.0) == []  # the layers' clocks start
    again = [a for a in stack.tick(1.0) if isinstance(a, Transmit)]
    assert first.message_id == MessageId(0, 1)
    assert again and [a.message_id for a in again] == [MessageId(0, 1)] * len(again)
    assert [a.packet for a in again] == [first.packet] * len(again)
    assert carried_message_id(first.packet) == MessageId(1, 7)  # what the label was
    assert layer_message_id(first.packet, 1) == MessageId(0, 1)
    assert layer_message_id(first.packet, 0) == MessageId(0, 1)  # Reliable's msg field
    assert layer_message_id(ReliableAck(0, 1, 1), 1) is None  # a control packet
