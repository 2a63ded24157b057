"""``Node.broadcast_many`` over real sockets on 127.0.0.1: one step per batch, a trace
event per message, batches larger than a frame cut into parts, checkpoint replay."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId
from mailroom.core.stack import Stack
from mailroom.net import Node
from mailroom.net import frames as fr
from mailroom.net.steps import FRAME_PART, frame_parts, replay_op
from mailroom.protocols import Reliable, Sequencer
from mailroom.trace import read_jsonl
from mailroom.trace.checkers import check

from .net_support import KEY, listening_sockets, table_of, until


def _stack(pid: int, n: int) -> Any:
    return Stack(Reliable(pid, n, rto=0.2), Sequencer(pid, n))


async def _group(
    tmp_path: Path, batches: dict[int, list[list[Any]]]
) -> tuple[list[list[Message]], list[Node]]:
    """Three nodes; each sends its batches with ``broadcast_many``; every delivery."""
    socks = listening_sockets(3)
    table = table_of(socks)
    got: list[list[Message]] = [[] for _ in range(3)]
    nodes = [
        Node(
            _stack(p, 3),
            table,
            KEY,
            listen=socks[p],
            trace=tmp_path / f"p{p}.jsonl",
            checkpoint=tmp_path / f"p{p}.ckpt",
            on_deliver=got[p].append,
        )
        for p in range(3)
    ]
    for node in nodes:
        await node.start()
    total = sum(len(b) for bs in batches.values() for b in bs)
    for p, bs in batches.items():
        for k, batch in enumerate(bs):
            mids = nodes[p].broadcast_many(batch)
            first = sum(len(b) for b in bs[:k]) + 1
            assert mids == [MessageId(p, first + i) for i in range(len(batch))]
    await until(lambda: all(len(g) == total for g in got))
    for node in nodes:
        await node.close()
    return got, nodes


def test_batches_are_delivered_in_one_total_order_and_traced_per_message(
    tmp_path: Path,
) -> None:
    batches = {
        0: [["a0", "a1", "a2"], [], ["a3"]],
        1: [[f"b{i}" for i in range(20)], [{"k": [1, 2]}, None, 3.5]],
        2: [["c0", "c1"]],
    }
    got, nodes = asyncio.run(_group(tmp_path, batches))
    assert [m.payload for m in got[0]] == [m.payload for m in got[1]] == [m.payload for m in got[2]]
    for p, bs in batches.items():
        sent = [x for b in bs for x in b]
        assert [m.payload for m in got[0] if m.sender == p] == sent  # the sender's order
        assert nodes[p].stats.sent == len(sent)
    events = [e for p in range(3) for e in read_jsonl(tmp_path / f"p{p}.jsonl")]
    sends = [e for e in events if e.kind == "send"]
    assert len(sends) == 29 and all(e.dest == (0, 1, 2) for e in sends)
    receives = {(e.process, e.message) for e in events if e.kind == "receive"}
    assert (2, MessageId(1, 20)) in receives  # one event per message of a batch packet
    report = check(events, ["integrity", "total", "liveness"])
    assert report.ok, report


def test_a_batch_larger_than_a_frame_is_sent_in_parts(tmp_path: Path) -> None:
    big = ["x" * (FRAME_PART * 3 // 5) for _ in range(4)] + ["tail"]
    assert [len(p) for p in frame_parts(big)] == [1, 1, 1, 2]
    assert sum(len(p) for p in big) > fr.MAX_FRAME
    got, _ = asyncio.run(_group(tmp_path, {1: [big]}))
    assert [m.payload for m in got[0]] == [m.payload for m in got[2]] == big


def test_frame_parts_keep_order_and_respect_the_limit() -> None:
    payloads: list[Any] = ["ab", 7, "é" * 10, {"k": "v"}, "z" * 50]
    parts = frame_parts(payloads, limit=60)
    assert [x for part in parts for x in part] == payloads
    assert parts == [["ab", 7], ["é" * 10, {"k": "v"}], ["z" * 50]]  # é: 4 bytes at most
    assert frame_parts([]) == [[]]


def test_a_logged_batch_replays_as_the_same_step() -> None:
    live, replayed = _stack(1, 3), _stack(1, 3)
    actions = live.broadcast_many(["a", {"b": [1]}])
    assert replay_op(replayed, ["m", ["a", {"b": [1]}]]) == actions
    assert replayed.snapshot() == live.snapshot()


def test_a_bad_payload_sends_nothing() -> None:
    socks = listening_sockets(3)

    async def main() -> tuple[int, int]:
        node = Node(_stack(0, 3), table_of(socks), KEY, listen=socks[0])
        await node.start()
        with pytest.raises(LocalError, match="payload"):
            node.broadcast_many(["fine", b"bytes"])
        sent = node.endpoint.sent_count, node.stats.sent
        await node.close()
        return sent

    assert asyncio.run(main()) == (0, 0)
