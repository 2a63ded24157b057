"""The endpoint contract: errors leave state unchanged, snapshots round-trip, pending explains."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import CBCAST, RST, Deliver, Fifo, LocalError, RemoteError, Transmit, Unordered
from mailroom.protocols import CBCASTPacket, FifoPacket, RSTPacket, UnorderedPacket
from mailroom.sim import Simulation

N = 3


def _busy(factory: Any) -> Any:
    """An endpoint (pid 2) with something delivered and something buffered."""
    ep = factory(2, N)
    sender = factory(0, N)
    if isinstance(ep, CBCAST):
        first = sender.broadcast("a")[0].packet
        second = sender.broadcast("b")[0].packet
    else:
        first = sender.send("a", to=2)[0].packet
        second = sender.send("b", to=2)[0].packet
        sender.send("c", to=2)
    third = (sender.broadcast if isinstance(ep, CBCAST) else lambda p: sender.send(p, to=2))("c")
    ep.receive(first)
    ep.receive(third[0].packet)
    return ep, second


PROTOCOLS = [RST, CBCAST, Fifo, Unordered]

garbage = st.one_of(
    st.none(),
    st.integers(),
    st.text(),
    st.binary(),
    st.lists(st.integers()),
    st.dictionaries(st.text(), st.integers()),
)


@pytest.mark.parametrize("factory", PROTOCOLS)
@given(junk=garbage)
def test_garbage_is_a_remote_error_and_changes_nothing(factory: Any, junk: object) -> None:
    ep, _ = _busy(factory)
    before = ep.snapshot()
    with pytest.raises(RemoteError, match="expected"):
        ep.receive(junk)
    assert ep.snapshot() == before


def _mutations(packet: Any) -> list[tuple[str, Any]]:
    """Field changes that no correct peer can produce, with the words the error must use."""
    out: list[tuple[str, Any]] = [
        ("not a process", attrs.evolve(packet, sender=7)),
        ("not a process", attrs.evolve(packet, sender=-1)),
        ("integer", attrs.evolve(packet, sender="0")),
    ]
    if hasattr(packet, "dest"):
        out.append(("arrived at", attrs.evolve(packet, dest=1)))
    if hasattr(packet, "seq"):
        out += [
            ("negative", attrs.evolve(packet, seq=-1)),
            ("at least 1", attrs.evolve(packet, seq=0)),
        ]
    if hasattr(packet, "sent"):
        rows = [list(r) for r in packet.sent]
        out += [
            ("rows", attrs.evolve(packet, sent=rows[:2])),
            ("entries", attrs.evolve(packet, sent=[r[:2] for r in rows])),
            ("negative", attrs.evolve(packet, sent=[[-1, 0, 0], *rows[1:]])),
            ("absurdly large", attrs.evolve(packet, sent=[[2**60, 0, 0], *rows[1:]])),
            ("claims P2", attrs.evolve(packet, sent=[*rows[:2], [0, 0, 5]])),
        ]
    if hasattr(packet, "vc"):
        vc = list(packet.vc)
        out += [
            ("entries", attrs.evolve(packet, vc=vc[:2])),
            ("negative", attrs.evolve(packet, vc=[vc[0], -1, vc[2]])),
            ("claims P2", attrs.evolve(packet, vc=[vc[0], vc[1], 9])),
        ]
    if hasattr(packet, "channel"):
        out.append(("at least 1", attrs.evolve(packet, channel=0)))
    return out


@pytest.mark.parametrize("factory", PROTOCOLS)
def test_impossible_packets_are_remote_errors_naming_the_problem(factory: Any) -> None:
    ep, valid = _busy(factory)
    before = ep.snapshot()
    for words, bad in _mutations(valid):
        with pytest.raises(RemoteError, match=words) as info:
            ep.receive(bad)
        assert info.value.hint
        assert ep.snapshot() == before, words
    assert any(isinstance(a, Deliver) for a in ep.receive(valid))  # still works


@pytest.mark.parametrize("factory", [RST, Fifo, Unordered])
def test_local_errors_for_bad_destinations_and_payloads(factory: Any) -> None:
    ep = factory(0, N)
    before = ep.snapshot()
    for to in (3, -1, "1", None):
        with pytest.raises(LocalError, match="destination"):
            ep.send("x", to=to)
    for payload in (object(), {1: "x"}, float("nan"), (1, 2), b"bytes"):
        with pytest.raises(LocalError):
            ep.send(payload, to=1)
    assert ep.snapshot() == before
    assert ep.send({"ok": [1, 2.5, None, True]}, to=1)[0].message_id.seq == 1


def test_constructor_and_restore_errors() -> None:
    with pytest.raises(LocalError):
        RST(3, 3)
    with pytest.raises(LocalError):
        CBCAST(0, 0)
    with pytest.raises(LocalError, match="not 'RST'"):
        RST.restore(CBCAST(0, 3).snapshot())
    data = RST(0, 3).snapshot()
    data["deliv"] = [0, 0]
    with pytest.raises(LocalError, match="deliv"):
        RST.restore(data)
    del data["deliv"]
    with pytest.raises(LocalError):
        RST.restore(data)


@pytest.mark.parametrize("factory", PROTOCOLS)
def test_snapshot_round_trips_and_restored_endpoint_continues(factory: Any) -> None:
    ep, second = _busy(factory)
    data = ep.snapshot()
    clone = type(ep).restore(data)
    assert clone.snapshot() == data
    import json

    assert json.loads(json.dumps(data)) == data  # JSON-safe
    assert [a for a in clone.receive(second)] == [a for a in ep.receive(second)]
    assert clone.snapshot() == ep.snapshot()


def test_message_ids_are_predictable() -> None:
    ep = RST(1, 3)
    ids = [a.message_id for to in (0, 2, 1) for a in ep.send("x", to=to)]
    assert [(m.origin, m.seq) for m in ids] == [(1, 1), (1, 2), (1, 3)]
    cb = CBCAST(2, 3)
    actions = cb.broadcast("x")
    assert [a.to for a in actions if isinstance(a, Transmit)] == [0, 1]
    (own,) = [a for a in actions if isinstance(a, Deliver)]
    assert own.message.id.origin == 2 and own.message.id.seq == 1
    assert own.message.sender == 2 and own.message.payload == "x"


def test_cbcast_pending_and_echo() -> None:
    sim = Simulation([CBCAST(pid, 3) for pid in range(3)], adversarial=True)
    m1 = sim.broadcast(0, "first")
    m2 = sim.broadcast(0, "second")
    sim.arrive_message(m1, 1)
    m3 = sim.broadcast(1, "reply")
    assert sim.arrive_message(m3, 2) == []
    assert sim.arrive_message(m2, 2) == []
    explained = [p.explain() for p in sim.endpoints[2].pending()]
    assert explained == [
        "P0#2 waits for 1 message from P0 (seq 1)",
        "P1#1 waits for 1 message from P0 (seq 1)",
    ]
    assert len(sim.arrive_message(m1, 2)) == 3
    # an echo of one's own broadcast is ignored, not delivered
    echo = CBCASTPacket(0, (1, 0, 0), "first")
    assert sim.endpoints[0].receive(echo) == []
    assert sim.endpoints[0].duplicates == 1


def test_packet_classes_are_registered() -> None:
    from mailroom.core.wire import PACKET_TYPES

    for cls in (RSTPacket, CBCASTPacket, FifoPacket, UnorderedPacket):
        assert PACKET_TYPES[cls.__name__] is cls
