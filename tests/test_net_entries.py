"""The checkpoint log's entries (``mailroom.net.entries``): one typed table states each
kind's row, its reading and its replay; the rows are those 0.2.0 wrote."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from mailroom import CBCAST, Reliable, Stack
from mailroom.core.codec import encode
from mailroom.core.endpoint import upcoming_id, upcoming_ids
from mailroom.core.messages import MessageId
from mailroom.net.entries import (
    KINDS,
    Broadcast,
    BroadcastMany,
    Consumed,
    Joined,
    Left,
    Provided,
    Received,
    Sent,
    Suspected,
    Tick,
    entry_of,
)
from mailroom.net.steps import replay_op
from mailroom.protocols import FifoPacket

PACKET = FifoPacket(1, 0, 3, 0, "x")
B64 = base64.b64encode(encode(PACKET)).decode()

ROWS: list[tuple[Any, list[Any]]] = [
    (Received.of(PACKET), ["r", B64]),
    (Received.of(encode(PACKET), 1), ["r", B64, 1]),
    (Broadcast.of(("a", 1)), ["b", ["a", 1]]),
    (BroadcastMany.of(["a", {"b": [1]}]), ["m", ["a", {"b": [1]}]]),
    (Sent.of("hi", 2), ["s", "hi", 2]),
    (Tick(1.5), ["t", 1.5]),
    (Consumed(MessageId(2, 7)), ["c", [2, 7]]),
    (Consumed(None), ["c", None]),
    (Provided.of(4, {"k": 1}), ["p", 4, {"k": 1}]),
    (Joined(), ["j"]),
    (Joined([0, 2]), ["j", [0, 2]]),
    (Suspected(1), ["x", 1]),
    (Left(), ["l"]),
]


@pytest.mark.parametrize(("entry", "row"), ROWS, ids=[r[0] for _, r in ROWS])
def test_each_entry_writes_its_row_and_reads_it_back(entry: Any, row: list[Any]) -> None:
    assert entry.row() == row
    assert entry_of(row) == entry
    assert KINDS[row[0]] is type(entry)


def test_every_kind_is_in_the_table_once() -> None:
    assert sorted(KINDS) == sorted({row[0] for _, row in ROWS})


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ([], "must be a list naming its kind"),
        ("r", "must be a list naming its kind"),
        ([7], "must be a list naming its kind"),
        (["z", 1], "unknown input 'z'"),
        (["r"], "malformed Received entry"),
        (["r", 5], "is not text"),
        (["s", "x"], "malformed Sent entry"),
        (["t", float("nan")], "tick at nan"),
        (["t", "soon"], "tick at 'soon'"),
        (["m", "ab"], "not a list"),
        (["c", [1]], "malformed Consumed entry"),
        (["x", "one"], "invalid literal"),
    ],
)
def test_a_malformed_row_is_a_value_error_naming_it(row: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        entry_of(row)


def test_replaying_entries_is_what_the_endpoint_did() -> None:
    """The rows a node would log, replayed on a fresh endpoint, give the same actions
    (and the ids the endpoint says it will give are the ones it gives)."""
    live = Stack(Reliable(0, 2), CBCAST(0, 2))
    again = Stack(Reliable(0, 2), CBCAST(0, 2))
    assert upcoming_ids(live, 3) == [MessageId(0, k) for k in (1, 2, 3)]
    first = live.broadcast("a")
    assert upcoming_id(live) == MessageId(0, 2)
    second = live.broadcast_many(["b", "c"])
    third = live.tick(5.0)
    assert replay_op(again, Broadcast.of("a").row()) == first
    assert replay_op(again, BroadcastMany.of(["b", "c"]).row()) == second
    assert replay_op(again, Tick(5.0).row()) == third
    assert upcoming_id(again) == upcoming_id(live) == MessageId(0, 4)


def test_a_received_packet_that_does_not_decode_replays_as_refused() -> None:
    ep = Stack(Reliable(0, 2), CBCAST(0, 2))
    junk = Received(base64.b64encode(b"\x00garbage").decode())
    assert junk.replay(ep) == []
    assert ep.sent_count == 0
