"""The batch form of broadcast: ``broadcast_batch`` and ``Stack.broadcast_many``."""

from __future__ import annotations

import pytest

from mailroom import RST, Deliver, LocalError, Reliable, Stack, Transmit, Unordered
from mailroom.core import broadcast_batch, capabilities
from mailroom.core.wire import carried_message_ids
from mailroom.protocols.total import LamportTotalOrder


def test_the_fallback_is_one_broadcast_per_payload_in_order() -> None:
    # (LamportTotalOrder was the example until it got a batch form; Unordered has none)
    batched = Unordered(1, 3)
    single = Unordered(1, 3)
    assert "broadcast_many" not in capabilities(batched)
    actions = broadcast_batch(batched, ["a", "b", "c"])
    expected = [a for p in ("a", "b", "c") for a in single.broadcast(p)]
    assert actions == expected
    assert batched.sent_count == 3
    assert batched.snapshot() == single.snapshot()


def test_a_bad_payload_anywhere_in_the_batch_sends_nothing() -> None:
    ep = Stack(Reliable(0, 3), LamportTotalOrder(0, 3))
    before = ep.snapshot()
    with pytest.raises(LocalError, match="payload"):
        ep.broadcast_many(["fine", b"bytes are not a payload", "fine"])
    assert ep.sent_count == 0
    assert ep.snapshot() == before


def test_an_empty_batch_is_nothing() -> None:
    ep = Stack(Reliable(0, 3), LamportTotalOrder(0, 3))
    assert ep.broadcast_many([]) == []
    assert ep.sent_count == 0


def test_an_endpoint_without_broadcast_refuses_a_batch() -> None:
    with pytest.raises(LocalError, match="broadcast"):
        broadcast_batch(RST(0, 3), ["a"])
    with pytest.raises(LocalError, match="broadcast"):
        Stack(Reliable(0, 3), RST(0, 3)).broadcast_many(["a"])


def test_every_packet_of_a_batch_names_the_messages_it_carries() -> None:
    ep = Stack(Reliable(1, 3), LamportTotalOrder(1, 3))
    actions = ep.broadcast_many(["x", "y"])
    carried = [
        ids for a in actions if isinstance(a, Transmit) for ids in carried_message_ids(a.packet)
    ]
    assert {(m.origin, m.seq) for m in carried} == {(1, 1), (1, 2)}
    for a in actions:
        if isinstance(a, Transmit):
            first = carried_message_ids(a.packet)[:1]
            assert first == (() if a.message_id is None else (a.message_id,))
    assert not [a for a in actions if isinstance(a, Deliver)]
