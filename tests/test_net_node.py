"""The Node runtime in one test process, over real sockets on 127.0.0.1.

- three nodes deliver every broadcast, causally, through ``deliveries()``;
- garbage, a peer pid that does not match its table entry's host, or a peer
  with another peer table close that connection only: the endpoint and the
  other connections carry on;
- a node that goes away and comes back (same socket, restored from its
  checkpoint) is reconnected and catches up.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

from mailroom.core.messages import Message
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable
from mailroom.protocols import CBCAST, Reliable

from .net_support import KEY, RawClient, listening_sockets, reliable_cbcast, table_of, until


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_three_nodes_deliver_every_broadcast() -> None:
    socks = listening_sockets(3)
    table = table_of(socks)

    async def main() -> list[list[Message]]:
        nodes = [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in range(3)]
        got: list[list[Message]] = [[] for _ in range(3)]

        async def read(p: int) -> None:
            async for m in nodes[p].deliveries():
                got[p].append(m)

        readers = [asyncio.create_task(read(p)) for p in range(3)]
        for node in nodes:
            await node.start()
        for k in range(10):
            for p, node in enumerate(nodes):
                node.broadcast(f"P{p} says {k}")
        await until(lambda: all(len(g) == 30 for g in got))
        for node in nodes:
            await node.close()
        await asyncio.gather(*readers)
        return got

    got = _run(main())
    for p in range(3):
        for q in range(3):
            from_q = [m.payload for m in got[p] if m.sender == q]
            assert from_q == [f"P{q} says {k}" for k in range(10)]


def test_bad_connections_are_closed_and_nothing_else_changes() -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    port0 = socks[0].getsockname()[1]

    async def main() -> tuple[Node, list[bool]]:
        nodes = [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in range(3)]
        for node in nodes:
            await node.start()
        nodes[1].broadcast("before")
        await until(lambda: nodes[0].stats.delivered == 1)
        snapshot = nodes[0].endpoint.snapshot()

        def attack() -> list[bool]:
            closed = []
            c = RawClient(port0)  # garbage
            c.send(b"\x00\x10\x00\x00" + bytes(range(40)))
            closed.append(c.closed_by_peer())
            c = RawClient(port0)  # a peer with another peer table
            c.hello(2, 0, PeerTable.of({**table.entries(), 2: "127.0.0.1:1"}))
            closed.append(c.closed_by_peer())
            c = RawClient(port0)  # a HELLO meant for another process
            c.hello(2, 1, table)
            closed.append(c.closed_by_peer())
            return closed

        closed = await asyncio.to_thread(attack)
        assert nodes[0].endpoint.snapshot() == snapshot  # the endpoint is untouched
        nodes[2].broadcast("after")
        await until(lambda: nodes[0].stats.delivered == 2 and nodes[1].stats.delivered == 2)
        for node in nodes:
            await node.close()
        return nodes[0], closed

    node0, closed = _run(main())
    assert closed == [True, True, True]
    assert node0.stats.garbage == 1
    assert node0.stats.refused == 2
    assert node0.stats.connected == 2  # its own links were never disturbed


def test_host_must_match_the_table_entry() -> None:
    s = listening_sockets(1)[0]
    try:
        table = PeerTable.of({0: f"127.0.0.1:{s.getsockname()[1]}", 1: "localhost:9"})
        node = Node(CBCAST(0, 2), table, KEY)
        assert node.transport.host_matches(0, "127.0.0.1")
        assert not node.transport.host_matches(0, "127.0.0.2")
        assert node.transport.host_matches(1, "127.0.0.1") or node.transport.host_matches(1, "::1")
    finally:
        s.close()


def test_a_node_that_comes_back_catches_up(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)

    async def main() -> list[int]:
        ckpt = tmp_path / "p2.json"
        nodes = [Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in range(2)]
        nodes.append(
            Node(reliable_cbcast(2, 3), table, KEY, listen=_dup(socks[2]), checkpoint=ckpt)
        )
        for node in nodes:
            await node.start()
        nodes[0].broadcast("one")
        await until(lambda: all(n.stats.delivered == 1 for n in nodes))
        await nodes[2].close()
        nodes[0].broadcast("two")  # P2 is away: the reliable layer keeps it for P2
        nodes[1].broadcast("three")
        await until(lambda: nodes[0].stats.delivered == 3 and nodes[1].stats.delivered == 3)
        back = Node(reliable_cbcast(2, 3), table, KEY, listen=_dup(socks[2]), checkpoint=ckpt)
        assert back.stats.delivered == 1  # resumed from the checkpoint
        await back.start()
        await until(lambda: back.stats.delivered == 3)
        back.broadcast("four")
        await until(lambda: nodes[0].stats.delivered == 4 and nodes[1].stats.delivered == 4)
        for node in [nodes[0], nodes[1], back]:
            await node.close()
        return [nodes[0].stats.delivered, nodes[1].stats.delivered, back.stats.delivered]

    assert _run(main()) == [4, 4, 4]


def _dup(s: socket.socket) -> socket.socket:
    """A copy of a listening socket, so that closing a node does not free the port."""
    return s.dup()


def test_a_connection_that_never_authenticates_is_closed(monkeypatch: Any) -> None:
    import mailroom.net.settings as node_module

    monkeypatch.setattr(node_module, "HANDSHAKE_TIMEOUT", 0.2)
    socks = listening_sockets(2)
    table = table_of(socks)

    async def main() -> tuple[bool, int]:
        node = Node(CBCAST(0, 2), table, KEY, listen=socks[0])
        await node.start()
        client = await asyncio.to_thread(RawClient, socks[0].getsockname()[1])
        closed = await asyncio.to_thread(client.closed_by_peer)
        client.close()
        await node.close()
        socks[1].close()
        return closed, node.stats.timeouts

    closed, timeouts = _run(main())
    # P1's address accepts (the kernel's backlog) but never answers: the node's own
    # connection there times out too, so at least this one was counted.
    assert closed and timeouts >= 1


def test_a_checkpoint_of_another_process_is_refused(tmp_path: Path) -> None:
    import pytest

    from mailroom.core.errors import LocalError
    from mailroom.net.store import write_atomic

    table = PeerTable.of({0: "127.0.0.1:1", 1: "127.0.0.1:2"})
    ckpt = tmp_path / "p1.json"
    write_atomic(ckpt, {"endpoint": CBCAST(1, 2).snapshot(), "trace": 0})
    assert Node(CBCAST(1, 2), table, KEY, checkpoint=ckpt).stats.delivered == 0
    with pytest.raises(LocalError):
        Node(CBCAST(0, 2), table, KEY, checkpoint=ckpt)


def test_explicit_consumption_and_stable_reports_are_driven_by_the_node(tmp_path: Path) -> None:
    """A tagged endpoint in explicit mode: the node consumes each delivery in the step that
    delivers it (so a broadcast from the application never raises for an unconsumed
    delivery), hands Stable reports to ``on_stable``, and a checkpointed node replays its
    consumptions on restart."""
    from mailroom.core.messages import MessageId
    from mailroom.protocols import TaggedCausalBroadcast

    socks = listening_sockets(3)
    table = table_of(socks)

    def tagged(p: int) -> Any:
        return Stack(Reliable(p, 3, rto=0.2), TaggedCausalBroadcast(p, 3, consume="explicit"))

    async def main() -> tuple[list[list[Message]], list[set[MessageId]], Any]:
        got: list[list[Message]] = [[] for _ in range(3)]
        stable: list[set[MessageId]] = [set() for _ in range(3)]
        nodes: list[Node] = []

        def on_deliver(p: int) -> Any:
            def hand(m: Message) -> None:
                got[p].append(m)
                if m.sender != p and m.payload == "question":
                    nodes[p].broadcast(f"answer from P{p}")  # would raise if unconsumed

            return hand

        for p in range(3):
            nodes.append(
                Node(
                    tagged(p),
                    table,
                    KEY,
                    listen=socks[p],
                    on_deliver=on_deliver(p),
                    on_stable=lambda ids, p=p: stable[p].update(ids),
                    checkpoint=tmp_path / f"p{p}.ckpt",
                )
            )
        for node in nodes:
            await node.start()
        nodes[0].broadcast("question")
        await until(lambda: all(len(g) == 3 for g in got))
        await until(lambda: all(len(s) == 3 for s in stable))
        for node in nodes:
            await node.close()
        # The checkpoint replays the consumptions: the restored endpoint holds none.
        restored = Node(tagged(1), table, KEY, checkpoint=tmp_path / "p1.ckpt")
        return got, stable, restored.endpoint

    got, stable, restored = _run(main())
    for p in range(3):
        payloads = [m.payload for m in got[p]]
        assert payloads[0] == "question"
        assert sorted(payloads[1:]) == ["answer from P1", "answer from P2"]
        assert stable[p] == {m.id for m in got[0]}
    assert restored.layers[-1].snapshot()["unconsumed"] == []


def test_a_callback_that_raises_does_not_stop_the_rest_of_the_step(caplog: Any) -> None:
    """What the application's callback raises is logged and counted (``app_errors``),
    and the node still hands the rest of that step: stopping there would skip the
    step's later deliveries for good (the step is written already)."""
    socks = listening_sockets(2)
    table = table_of(socks)
    handed: list[object] = []

    def on_deliver(m: Message) -> None:
        handed.append(m.payload)
        if m.payload == "boom":
            raise ValueError("the application failed on this one")

    async def main() -> tuple[int, int]:
        node = Node(reliable_cbcast(0, 2), table, KEY, listen=socks[0], on_deliver=on_deliver)
        await node.start()
        node.broadcast_many(["boom", "after", "and after"])  # one step, three deliveries
        await until(lambda: len(handed) == 3)
        node.broadcast("later")
        await until(lambda: len(handed) == 4)
        await node.close()
        return node.stats.app_errors, node.stats.delivered

    assert _run(main()) == (1, 4)
    assert handed == ["boom", "after", "and after", "later"]
    assert "raised on a Message: ValueError: the application failed" in caplog.text
