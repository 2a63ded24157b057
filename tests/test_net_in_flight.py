"""A node's broadcasts in flight (``max_in_flight``): counted until they are delivered
back to it, so that a relay (the sequencer) queues a bounded number for each sender.

Real nodes on 127.0.0.1, in one process."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.core.stack import Stack
from mailroom.net import Node, NodeConfig
from mailroom.net.status import node_status
from mailroom.protocols import Reliable, Sequencer

from .net_support import KEY, listening_sockets, table_of

N = 3


async def _until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for ``predicate``; the timeout is only a safety net."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def _started(
    top: Callable[[int, int], Any], got: list[list[Message]], **options: Any
) -> list[Node]:
    socks = listening_sockets(N)
    table = table_of(socks)
    nodes = [
        Node(
            Stack(Reliable(p, N, rto=5.0), top(p, N)),
            table,
            KEY,
            listen=socks[p],
            on_deliver=got[p].append,
            **options,
        )
        for p in range(N)
    ]
    for node in nodes:
        await node.start()
    await _until(lambda: all(node.stats.connected == N - 1 for node in nodes))
    return nodes


def test_a_broadcast_is_in_flight_until_it_is_delivered_back() -> None:
    async def main() -> dict[str, Any]:
        got: list[list[Message]] = [[] for _ in range(N)]
        nodes = await _started(Sequencer, got, max_in_flight=8)
        member, sequencer = nodes[1], nodes[0]
        seen: dict[str, Any] = {"fresh": (member.in_flight, member.can_send())}
        answers = []
        for k in range(8):
            answers.append(member.can_send())
            member.broadcast(f"m{k}")
        seen["answers"] = answers
        seen["full"] = (member.in_flight, member.can_send())
        member.broadcast("m8")  # past the bound: it still goes
        seen["past"] = member.in_flight
        await member.wait_can_send()  # returns once half of the bound came back
        seen["woken"] = member.in_flight
        await _until(lambda: all(len(g) == 9 for g in got))
        seen["back"] = (member.in_flight, member.can_send(), node_status(member)["in_flight"])
        # the sequencer delivers its own broadcasts in the step that takes them
        for k in range(8):
            sequencer.broadcast(f"s{k}")
        seen["sequencer"] = (sequencer.in_flight, sequencer.can_send())
        sequencer.flush()
        seen["sequencer_after"] = (sequencer.in_flight, sequencer.can_send())
        await _until(lambda: all(len(g) == 17 for g in got))
        seen["got"] = [[m.payload for m in g] for g in got]
        for node in nodes:
            await node.close()
        return seen

    seen = asyncio.run(main())
    assert seen["fresh"] == (0, True)
    assert seen["answers"] == [True] * 8
    assert seen["full"] == (8, False)
    assert seen["past"] == 9
    assert seen["woken"] <= 4
    assert seen["back"] == (0, True, 0)
    assert seen["sequencer"] == (8, False)
    assert seen["sequencer_after"] == (0, True)
    assert seen["got"][0] == seen["got"][1] == seen["got"][2]
    sent = [f"m{k}" for k in range(9)] + [f"s{k}" for k in range(8)]
    assert sorted(seen["got"][0]) == sorted(sent)


def test_without_a_bound_nothing_is_counted_against_sending() -> None:
    async def main() -> tuple[int, bool]:
        got: list[list[Message]] = [[] for _ in range(N)]
        nodes = await _started(Sequencer, got, max_in_flight=None)
        for k in range(100):
            nodes[1].broadcast(k)
        answer = (nodes[1].in_flight, nodes[1].can_send())
        await _until(lambda: all(len(g) == 100 for g in got))
        for node in nodes:
            await node.close()
        return answer

    assert asyncio.run(main()) == (100, True)


async def _sequencer_backlog(max_in_flight: int | None, count: int) -> tuple[int, list[int]]:
    """Members 1 and 2 broadcast ``count`` messages each as fast as ``can_send()`` lets
    them, over links from the sequencer that hold every frame back 20 ms (a sequencer
    that forwards more slowly than it is asked); returns the most packets the
    sequencer's reliable layer kept at once and the most each member had in flight."""
    got: list[list[Message]] = [[] for _ in range(N)]
    socks = listening_sockets(N)
    table = table_of(socks)
    nodes = []
    for p in range(N):
        delays = {q: 0.02 for q in range(1, N)} if p == 0 else {}
        stack = Stack(Reliable(p, N, rto=5.0), Sequencer(p, N))
        nodes.append(
            Node(
                stack,
                table,
                KEY,
                listen=socks[p],
                on_deliver=got[p].append,
                delays=delays,
                max_in_flight=max_in_flight,
            )
        )
    for node in nodes:
        await node.start()
    await _until(lambda: all(node.stats.connected == N - 1 for node in nodes))
    reliable = nodes[0].endpoint.layers[0]
    most = [0, 0, 0]

    async def member(node: Node) -> None:
        for k in range(count):
            if not node.can_send():
                await node.wait_can_send()
            node.broadcast(k)
            most[node.pid] = max(most[node.pid], node.in_flight)
            most[0] = max(most[0], reliable.retained())
            if k % 16 == 15:
                await asyncio.sleep(0)

    await asyncio.gather(*(member(nodes[p]) for p in range(1, N)))
    await _until(lambda: all(len(g) == 2 * count for g in got), timeout=60.0)
    for node in nodes:
        await node.close()
    return most[0], most[1:]


def test_a_sequencer_keeps_a_bounded_queue_for_each_sender() -> None:
    """With ``max_in_flight`` = 16 each member has at most 16 messages in the group, so the
    sequencer keeps at most 2 x 16 orders for each of its 2 peers (twice that as slack:
    an order is acknowledged a little after its sender has it back; measured, it kept
    4 or 5 packets). Without the bound the same run has the members put hundreds in
    flight and the sequencer keep more (60 to 250 packets, by the machine's speed):
    what the bound holds back is there to hold."""
    bound = 2 * (N - 1) * (N - 1) * 16
    kept, most = asyncio.run(_sequencer_backlog(16, 1500))
    assert most == [16, 16]
    assert kept <= bound
    unbounded, most = asyncio.run(_sequencer_backlog(None, 1500))
    assert min(most) > 16
    assert unbounded > kept


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_a_bad_bound_is_refused(bad: Any) -> None:
    with pytest.raises(LocalError, match="max_in_flight must be a positive integer or None"):
        NodeConfig(max_in_flight=bad)
