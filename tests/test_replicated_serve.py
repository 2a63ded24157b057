"""The one-call entry points (``serve``, ``replicate``) in one process on 127.0.0.1: members
by address, the key from the environment, the thread-backed form called from plain
code, a close that leaves the view (the others install a view without it and log no
quorum warning, and the last two shrink to one), and a founder that starts alone
whose calls wait for its peers instead of failing."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

import pytest

from mailroom.core.errors import LocalError
from mailroom.net.config import KEY_ENV
from mailroom.replicated import ReplCounter, replicate, serve

from .net_support import KEY, listening_sockets


def ordered_sockets(n: int) -> list[socket.socket]:
    """``n`` listening sockets in the order of their ports: socket k is member k."""
    return sorted(listening_sockets(n), key=lambda s: int(s.getsockname()[1]))


def addresses(socks: list[socket.socket]) -> list[str]:
    return [f"127.0.0.1:{s.getsockname()[1]}" for s in socks]


def until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_members_are_their_places_among_the_sorted_addresses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY.decode())
    a, b, c = "127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7010"
    r = replicate(ReplCounter(), b, [c, a])  # the key from $MAILROOM_KEY
    assert r.node.pid == 1 and r.node.peers.entries() == {0: a, 1: b, 2: c}
    assert r.wait_for_peers and r.node.endpoint.formation == 30.0
    with pytest.raises(LocalError, match="listed twice"):
        replicate(ReplCounter(), a, [a, b])
    with pytest.raises(LocalError, match="not one string"):
        replicate(ReplCounter(), a, b)  # type: ignore[arg-type]
    with pytest.raises(LocalError, match="not host:port"):
        replicate(ReplCounter(), a, ["nowhere"])
    with pytest.raises(LocalError, match="at least 32"):
        replicate(ReplCounter(), a, [b], key="short")
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(LocalError, match="no group key"):
        replicate(ReplCounter(), a, [b])


def test_served_replicas_called_from_plain_code_and_a_close_that_leaves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    socks = ordered_sockets(3)
    at = addresses(socks)
    caplog.set_level(logging.WARNING, logger="mailroom.net")
    served = []
    try:
        for k, me in enumerate(at):  # each listens on its socket, the others by address
            others = [a for a in at if a != me]
            served.append(serve(ReplCounter(), me, others, key=KEY, listen=socks[k], timeout=30))
        assert [s.sync.inc() for s in served] == [1, 2, 3]  # blocks until applied here
        assert served[2].ordered.get() == 3
        until(lambda: [s.local.get() for s in served] == [3, 3, 3], "every replica to apply")
        served[0].close()  # leaves: the others go on at once, without suspecting it
        rest = served[1:]
        until(lambda: all(s.replica.node.view.members == (1, 2) for s in rest), "view {1, 2}")
        assert served[1].sync.add(10) == 13
        served[1].close()  # one of two leaves too: the last one goes on alone
        until(lambda: served[2].replica.node.view.members == (2,), "view {2}")
        assert served[2].sync.inc() == 14
        assert [s.replica.node.service.quorum_lines for s in served] == [0, 0, 0]
        assert "waiting for a majority" not in caplog.text
        with pytest.raises(LocalError, match="closed"):
            served[0].local.get()
        with pytest.raises(LocalError, match="not running"):
            served[0].sync.inc()
    finally:
        for s in served:
            s.close()
        for sock in socks:
            sock.close()


def test_a_founder_alone_waits_for_its_peers_then_serves() -> None:
    socks = ordered_sockets(2)
    at = addresses(socks)

    async def main() -> None:
        first = replicate(ReplCounter(), at[0], [at[1]], key=KEY, listen=socks[0])
        async with first:
            call = asyncio.ensure_future(first.call.inc())
            await asyncio.sleep(1.0)
            assert not call.done()  # nobody else holds its view yet: it waits
            second = replicate(ReplCounter(), at[1], [at[0]], key=KEY, listen=socks[1])
            async with second:
                assert await call == 1  # let in: the call goes, and is applied
                assert await second.call.inc() == 2
                assert first.node.view is not None and first.node.view.id == 1  # no exclusion
            assert first.node.view.members == (0,)  # the second left on its way out

    try:
        asyncio.run(main())
    finally:
        for sock in socks:
            sock.close()


def test_a_replica_that_keeps_a_checkpoint_does_not_leave_on_close(tmp_path: Any) -> None:
    socks = ordered_sockets(2)
    at = addresses(socks)

    async def main() -> None:
        kept = {"checkpoint": tmp_path / "p0.ckpt"}
        r = [
            replicate(ReplCounter(), at[0], [at[1]], key=KEY, listen=socks[0], **kept),
            replicate(ReplCounter(), at[1], [at[0]], key=KEY, listen=socks[1]),
        ]
        for x in r:
            await x.start()
        assert await r[0].call.inc() == 1
        await r[0].close()  # resumes from its checkpoint later: still a member
        await asyncio.sleep(0.5)
        assert r[1].node.view.members == (0, 1)
        await r[1].close(leave=False)

    try:
        asyncio.run(main())
    finally:
        for sock in socks:
            sock.close()


def test_a_founder_that_starts_after_its_exclusion_waits_for_its_rejoin() -> None:
    """No formation window: the first two exclude the third before it starts; its first
    call waits until it is let in again (with the state), instead of OutcomeUnknown."""
    socks = ordered_sockets(3)
    at = addresses(socks)
    timing = {"heartbeat": 0.1, "suspect_after": 0.5, "formation": 0.0}

    def member(k: int) -> Any:
        others = [a for a in at if a != at[k]]
        return replicate(ReplCounter(), at[k], others, key=KEY, listen=socks[k], **timing)

    async def main() -> None:
        early = [member(0), member(1)]
        for r in early:
            await r.start()
        assert await early[0].call.inc() == 1
        while early[0].node.view.members != (0, 1):  # bounded: P2 is suspected in 0.5 s
            await asyncio.sleep(0.05)
        late = member(2)
        await late.start()
        assert late.node.view is not None and late.node.view.members == (0, 1, 2)
        assert await late.call.inc() == 2  # it waited to be let in, then called
        assert late.node.view.members == (0, 1, 2) and late.node.view.id > 2
        for r in [late, *early]:
            await r.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        for sock in socks:
            sock.close()
