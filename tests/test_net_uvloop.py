"""The runtime under uvloop, the event loop many asyncio services run: its transports
are not ``asyncio.Transport`` subclasses, and an accepted connection reads through
``BufferedProtocol``. Real sockets on 127.0.0.1; a group of replicated counters."""

from __future__ import annotations

import asyncio

import pytest

from mailroom.net import PeerTable
from mailroom.net.membership import group_endpoint
from mailroom.replicated import AsyncReplica, ReplCounter
from tests.net_support import KEY, listening_sockets

uvloop = pytest.importorskip("uvloop")


def test_a_safe_group_of_replicas_runs_under_uvloop() -> None:
    socks = listening_sockets(3)
    table = PeerTable.of({p: f"127.0.0.1:{s.getsockname()[1]}" for p, s in enumerate(socks)})

    async def main() -> tuple[list[int], list[int]]:
        assert type(asyncio.get_running_loop()).__module__.startswith("uvloop")

        def member(p: int) -> AsyncReplica:
            group = group_endpoint(
                "sequencer", p, 3, members=range(3), safe=True, safe_quorum="majority"
            )
            return AsyncReplica(ReplCounter(), group, table, KEY, safe=True, listen=socks[p])

        replicas = [member(p) for p in range(3)]
        for r in replicas:
            await r.start()
        try:
            await asyncio.wait_for(asyncio.gather(*(r.wait_joined() for r in replicas)), 30)

            async def client(r: AsyncReplica) -> list[int]:
                return [await r.call.add(1) for _ in range(20)]

            results = await asyncio.wait_for(asyncio.gather(*map(client, replicas)), 60)
            # every call's result is the counter after it: 60 distinct values, 1..60
            told = sorted(v for rs in results for v in rs)
            finals = [await asyncio.wait_for(r.ordered.get(), 30) for r in replicas]
            return told, finals
        finally:
            for r in replicas:
                await r.close()

    told, finals = uvloop.run(main())
    assert told == list(range(1, 61))
    assert finals == [60, 60, 60]
