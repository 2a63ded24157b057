"""Replicated objects over mailroom.net, in one process on 127.0.0.1: awaitable calls and
their results, an error that changes nothing anywhere, ordered and local reads, the
blocking form from a thread, a joiner that gets the state, a false suspicion whose
victim's pending call gets OutcomeUnknown and rejoins, the lock released when its holder
is excluded, a restart from the node's checkpoint; the history checker judges it all."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from mailroom.cli import main as cli_main
from mailroom.core.errors import LocalError
from mailroom.net.membership import group_endpoint, group_of
from mailroom.protocols.membership import Group
from mailroom.replicated import Bundle, History, ReplDict, ReplLockManager, check_history
from mailroom.replicated.aiohost import AsyncReplica

from .net_support import KEY, listening_sockets, table_of


def store() -> Bundle:
    return Bundle(kv=ReplDict(), locks=ReplLockManager())


async def until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def run_checked(main: Coroutine[Any, Any, None], socks: list[Any], history: History) -> Any:
    """Run ``main``, close ``socks`` however it ends, and check the history it recorded
    (which must hold): the checker's report."""
    try:
        asyncio.run(main)
    finally:
        for s in socks:
            s.close()
    report = check_history(history.rows, store)
    assert report.ok, [p.explain() for p in report.problems]
    return report


def replica_at(
    p: int,
    obj: object,
    socks: list[Any],
    peers: Any,
    history: History,
    *,
    safe: bool = True,
    members: Any = (0, 1),
    contacts: Any = (),
    **options: Any,
) -> AsyncReplica:
    """Replica ``p`` of ``obj`` over a reliable Sequencer group, one slot per socket
    (``peers``: their table, taken while they are all open)."""
    group = Group(
        p,
        len(socks),
        "sequencer",
        members=members,
        contacts=contacts,
        reliable=True,
        retry=0.1,
        safe=safe,
    )
    return AsyncReplica(
        obj, group, peers, KEY, listen=socks[p], history=history, safe=safe, **options
    )


@pytest.mark.parametrize("safe", [False, True])
def test_calls_reads_a_joiner_an_exclusion_and_a_restart(tmp_path: Path, safe: bool) -> None:
    socks = listening_sockets(3)
    peers = table_of(socks)
    history = History()

    def replica(p: int, *, members: Any = None, **options: Any) -> AsyncReplica:
        return replica_at(
            p,
            store(),
            socks,
            peers,
            history,
            safe=safe,
            members=members,
            contacts=[0, 1],
            **options,
        )

    async def main() -> list[AsyncReplica]:
        r = [replica(p, members=[0, 1], checkpoint=tmp_path / f"ckpt{p}") for p in (0, 1)]
        for x in r:
            await x.start()
        assert await r[0].call("kv.set", "a", 1) is None
        assert await r[1].call.kv.incr("n", 5) == 5  # the proxy form
        with pytest.raises(KeyError):
            await r[1].call.kv.pop("missing")  # raised on every replica, same error here
        assert await r[1].ordered("kv.get", "a") == 1
        with pytest.raises(LocalError, match="cannot be encoded"):
            await r[0].call("kv.set", "b", {1, 2})  # refused before anything is sent
        told = await asyncio.to_thread(r[0].sync, "kv.incr", "n")  # from a thread
        assert told == 6
        with pytest.raises(LocalError, match="from the event loop"):
            r[0].sync("kv.incr", "n")
        r.append(replica(2))
        await r[2].start()
        await r[2].wait_joined()  # the state came with its first view
        assert r[2].local("kv.items") == [["a", 1], ["n", 6]]
        assert await r[2].call("locks.acquire", "L") is True
        await until(lambda: r[0].local("locks.holder", "L") == [2, 0, ""], "P0 to see the lock")
        for x in r[:2]:
            x.node.suspect(2)  # a false suspicion: P2 is excluded, then rejoins
        await until(lambda: r[0].local("locks.held") == {}, "the lock to be released")
        await until(lambda: r[2].replica.incarnation == 1 and r[2].replica.view, "P2 back")
        assert r[2].local("kv.get", "n") == 6 and r[2].local("locks.held") == {}
        assert await r[2].call("locks.acquire", "L") is True
        await until(lambda: r[1].local("locks.holder", "L") == [2, 1, ""], "P1 to see it")
        for x in r:
            await x.close()
        return r

    async def restart() -> None:
        again = replica(1, members=[0, 1], checkpoint=tmp_path / "ckpt1")
        assert again.replica.view is not None and again.replica_read("kv.get", "n") == 6
        assert again.replica_read("locks.holder", "L") == [2, 1, ""]

    try:
        asyncio.run(main())
        asyncio.run(restart())
    finally:
        for s in socks:
            s.close()
    report = check_history(history.rows, store, safe=safe)
    assert report.ok, [p.explain() for p in report.problems]
    assert report.acknowledged >= 7


def test_the_calls_of_one_turn_go_out_as_one_batch_each_with_its_own_result() -> None:
    socks = listening_sockets(2)
    peers = table_of(socks)
    history = History()

    async def main() -> None:
        r = [replica_at(p, store(), socks, peers, history) for p in (0, 1)]
        for x in r:
            await x.start()
        assert await r[1].call.kv.incr("n", 0) == 0
        sent = r[1].node.endpoint.sent_count
        calls = [r[1].call.kv.incr("n") for _ in range(300)]
        calls[10:10] = [r[1].call.kv.pop("missing"), r[1].call.kv.set("x", {1, 2})]
        tasks = [asyncio.ensure_future(c) for c in calls]
        tasks[20].cancel()  # cancelled before the end of the turn: never sent
        told = await asyncio.gather(*tasks, return_exceptions=True)
        assert r[1].node.endpoint.sent_count == sent + 1  # one group message for them all
        assert isinstance(told[10], KeyError) and isinstance(told[11], LocalError)
        assert isinstance(told[20], asyncio.CancelledError)
        assert [t for t in told if type(t) is int] == list(range(1, 300))  # in call order
        await until(lambda: r[0].local("kv.get", "n") == 299, "P0 to apply the batch")
        for x in r:
            await x.close()

    report = run_checked(main(), socks, history)
    assert report.acknowledged == 1 + 299 + 1  # the pop's KeyError is an answer too


def test_calls_made_while_the_node_is_busy_wait_and_go_in_order_when_it_can_send() -> None:
    """With one broadcast in flight at most (``max_in_flight=1``) a call made while the
    node's batch is not yet delivered back waits in the lot, and the replica sends it
    once the node can take sends again: every call gets its own result, in the order
    the calls were made, and the calls that waited went out together."""
    socks = listening_sockets(2)
    peers = table_of(socks)
    history = History()

    async def main() -> None:
        r = [replica_at(p, store(), socks, peers, history, max_in_flight=1) for p in (0, 1)]
        for x in r:
            await x.start()
        assert await r[1].call.kv.incr("n", 0) == 0
        sent = r[1].node.endpoint.sent_count
        calls, busy = [], 0
        for _ in range(80):  # a call a turn, none awaited before the next is made
            busy += not r[1].node.can_send()  # a batch is in flight: this call waits
            calls.append(asyncio.ensure_future(r[1].call.kv.incr("n")))
            await asyncio.sleep(0)
        assert await asyncio.gather(*calls) == list(range(1, 81))  # in the order made
        assert busy > 0
        assert r[1].node.endpoint.sent_count - sent < 80  # the waiting ones went together
        await until(lambda: r[0].local("kv.get", "n") == 80, "P0 to apply every call")
        for x in r:
            await x.close()

    assert run_checked(main(), socks, history).acknowledged == 1 + 80


def test_a_replica_that_rejoins_after_a_kill_records_no_start_for_its_old_life(
    tmp_path: Path,
) -> None:
    """Restarted from its checkpoint to rejoin (as after ``kill -9``), a replica is its
    next incarnation once the state arrives: its killed life must not start again in
    the history (the nemesis found the checker then counting that life alive at the
    end, and every later operation "lost" at it)."""
    socks = listening_sockets(2)
    peers = table_of(socks)
    history = History()

    def replica(p: int, **options: Any) -> AsyncReplica:
        return replica_at(
            p, ReplDict(), socks, peers, history, checkpoint=tmp_path / f"ckpt{p}", **options
        )

    async def main() -> None:
        r = [replica(p) for p in (0, 1)]
        for x in r:
            await x.start()
        assert await r[0].call("set", "a", 1) is None
        await until(lambda: r[1].local("get", "a") == 1, "P1 to apply it")
        for x in r:
            await x.close()

    try:
        asyncio.run(main())
        before = len(history.rows)
        again = replica(1, rejoin=[0])
        assert again.replica.view is None  # it waits for the state as its next incarnation
        assert [row["row"] for row in history.rows[before:]] == []
        resumed = replica(0)  # resumed in place (no rejoin): its life starts again
        assert resumed.replica.view is not None
        assert [row["row"] for row in history.rows[before:]] == ["start"]
    finally:
        for s in socks:
            s.close()


def test_a_replica_needs_a_total_order_group() -> None:
    socks = listening_sockets(1)
    try:
        with pytest.raises(LocalError, match="total order"):
            AsyncReplica(store(), Group(0, 1, "cbcast", members=[0]), table_of(socks), KEY)
        with pytest.raises(LocalError, match="replica's own"):
            group = Group(0, 1, "skeen", members=[0])
            AsyncReplica(store(), group, table_of(socks), KEY, on_deliver=print)
    finally:
        for s in socks:
            s.close()


def test_the_blocking_form_needs_a_running_replica() -> None:
    socks = listening_sockets(1)
    try:
        r = AsyncReplica(store(), Group(0, 1, "skeen", members=[0]), table_of(socks), KEY)
        with pytest.raises(LocalError, match="not running"):
            r.sync("kv.set", "a", 1)
        assert threading.active_count() >= 1
    finally:
        for s in socks:
            s.close()


def test_a_replica_that_requires_safe_delivery_refuses_a_plain_group() -> None:
    socks = listening_sockets(1)
    try:
        group = Group(0, 1, "skeen", members=[0])
        with pytest.raises(LocalError, match="delivers safely"):
            AsyncReplica(store(), group, table_of(socks), KEY, safe=True)
        endpoint = group_endpoint("skeen", 0, 1, members=[0], safe=True)
        r = AsyncReplica(store(), endpoint, table_of(socks), KEY, safe=True)
        assert group_of(r.node.endpoint) is endpoint.group and endpoint.group.safe
    finally:
        for s in socks:
            s.close()


def test_a_replica_serves_its_status_and_mailroom_status_shows_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``AsyncReplica(status=...)``: the node's status with the replica's, at a loopback
    address, read by ``mailroom status`` (the CLI) as text and as JSON."""
    socks = listening_sockets(2)
    peers = table_of(socks)

    async def main() -> tuple[dict[str, Any], tuple[str, int] | None, list[Any]]:
        r = [
            replica_at(p, store(), socks, peers, History(), status="127.0.0.1:0" if p else None)
            for p in (0, 1)
        ]
        for x in r:
            await x.start()
        assert r[0].status_address is None  # not asked for
        for k in range(5):
            await r[1].call("kv.set", f"k{k}", k)
        await until(lambda: r[0].replica.applied == r[1].replica.applied == 5, "both applied")
        address = r[1].status_address
        assert address is not None and address[0] == "127.0.0.1" and address[1] > 0
        text = await asyncio.to_thread(cli_main, ["status", f"127.0.0.1:{address[1]}"])
        data = await asyncio.to_thread(cli_main, ["status", "--json", f"127.0.0.1:{address[1]}"])
        mine = r[1].status()
        for x in r:
            await x.close()
        assert r[1].status_address is None  # closed with the replica
        return mine, address, [text, data]

    try:
        mine, _, codes = asyncio.run(main())
    finally:
        for s in socks:
            s.close()
    assert codes == [0, 0]
    assert mine == {
        "member": True,
        "incarnation": 0,
        "applied": 5,
        "log_entries": 5,
        "log_bytes": mine["log_bytes"],
        "compactions": 0,
        "calls_waiting": 0,
    }
    assert mine["log_bytes"] > 0
    out = capsys.readouterr().out
    text, _, json_text = out.partition("{")
    assert "P1: " in text and "members and incarnations: P0#0, P1#0" in text
    assert "replica: incarnation 0, 5 operations applied, log 5 entries" in text
    assert json.loads("{" + json_text)["replica"]["applied"] == 5


def test_a_replica_refuses_a_status_address_that_is_not_loopback() -> None:
    socks = listening_sockets(1)
    try:
        group = Group(0, 1, "skeen", members=[0])
        for address, words in [("0.0.0.0:8101", "loopback address only"), ("nowhere", "host:port")]:
            with pytest.raises(LocalError, match=words):
                AsyncReplica(store(), group, table_of(socks), KEY, status=address)
    finally:
        for s in socks:
            s.close()
