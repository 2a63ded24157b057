"""mailroom.net against hostile peers and failing disks, over real sockets on 127.0.0.1.

- an I/O failure never loses a delivery: a failed checkpoint write acts on
  nothing, the node stalls and retries, and what the application got equals
  what the trace says; a node that cannot write and is closed resumes from its
  checkpoint with nothing lost;
- a flood of 1,100 idle connections against a process limited to 1,024 open
  files (RLIMIT_NOFILE) loses nothing and keeps the genuine links;
- before authentication a connection is bounded: a 1 MiB frame is refused at
  its header, so a flood of them leaves the node's memory (RSS) where it was;
- a BATCH frame with a garbage packet is all or nothing; a frame naming an
  impossible message id is garbage; a packet whose frame names another id than
  it carries is refused alone, not its link nor the other packets of its BATCH;
  a packet as the application's payload is delivered at once, not refused;
  trace destinations come from the sends, exactly, with nothing kept per message
  where the endpoint fixes them; rejected connections are logged with a rate
  limit;
- a squatter on a down member's address gets no HELLO and no packet;
- encrypted groups deliver; a member that does not encrypt is refused.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import socket
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.codec import encode
from mailroom.core.messages import Message, MessageId
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable, pake
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.net import node as node_module
from mailroom.net import settings as settings_module
from mailroom.net.node import Busy
from mailroom.net.outgoing import LOT_LIMIT
from mailroom.net.store import CheckpointLog
from mailroom.protocols import CBCAST, CBCASTPacket, FifoPacket, Reliable, ReliableAck
from mailroom.trace import check, read_jsonl

from .net_support import (
    KEY,
    RawClient,
    group,
    idle_flood,
    listening_sockets,
    reliable_cbcast,
    rss_mb,
    table_of,
    until,
    wait_for,
)


def _delivered_in(path: Path) -> list[MessageId]:
    return [e.message for e in read_jsonl(path) if e.kind == "deliver"]


# -- persist, then act ------------------------------------------------------------------------


def test_a_failed_checkpoint_write_acts_on_nothing_and_is_retried(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    failing = {"left": 0}
    real_append = CheckpointLog.append

    def append(self: CheckpointLog, records: list[Any], *tail: Any) -> None:
        if self.path.name == "p0.ckpt" and failing["left"] > 0:
            failing["left"] -= 1
            raise OSError(24, "Too many open files")
        real_append(self, records, *tail)

    monkeypatch.setattr(CheckpointLog, "append", append)

    async def main() -> tuple[Node, list[Message], list[Any]]:
        got: list[Message] = []
        trace0 = tmp_path / "t0.jsonl"
        nodes = [
            Node(
                reliable_cbcast(0, 3),
                table,
                KEY,
                listen=socks[0],
                checkpoint=tmp_path / "p0.ckpt",
                trace=trace0,
                on_deliver=got.append,
            ),
            *[Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in (1, 2)],
        ]
        for node in nodes:
            await node.start()
        nodes[1].broadcast("before")
        await until(lambda: len(got) == 1)
        failing["left"] = 6  # the next six writes fail: the node stalls and retries
        nodes[1].broadcast("during 1")
        nodes[2].broadcast("during 2")
        await until(lambda: nodes[0].stats.io_errors >= 1)
        seen: list[Any] = [len(got), len(_delivered_in(trace0)), nodes[0].can_send()]
        try:
            nodes[0].broadcast("while stalled")
        except Busy:
            seen.append("busy")
        await nodes[0].wait_can_send()  # returns once the writes succeed again
        nodes[0].broadcast("after")
        await until(lambda: len(got) == 4 and all(n.stats.delivered == 4 for n in nodes))
        for node in nodes:
            await node.close()
        return nodes[0], got, seen

    node0, got, seen = asyncio.run(main())
    # While the writes failed, nothing was delivered or recorded, and sends waited.
    assert seen == [1, 1, False, "busy"]
    assert node0.stats.io_errors == 6
    traced = _delivered_in(tmp_path / "t0.jsonl")
    assert [m.id for m in got] == traced  # the application got exactly what was recorded
    assert sorted(m.payload for m in got) == ["after", "before", "during 1", "during 2"]


def test_a_node_that_cannot_write_resumes_from_its_checkpoint_with_nothing_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    broken = {"on": False}
    real_append = CheckpointLog.append

    def append(self: CheckpointLog, records: list[Any], *tail: Any) -> None:
        if broken["on"] and self.path.name == "p0.ckpt":
            raise OSError(28, "No space left on device")
        real_append(self, records, *tail)

    monkeypatch.setattr(CheckpointLog, "append", append)
    ckpt, trace0 = tmp_path / "p0.ckpt", tmp_path / "t0.jsonl"

    async def main() -> tuple[list[Message], list[Message]]:
        first: list[Message] = []
        nodes = [
            Node(
                reliable_cbcast(0, 3),
                table,
                KEY,
                listen=socks[0].dup(),
                checkpoint=ckpt,
                trace=trace0,
                on_deliver=first.append,
            ),
            *[Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p]) for p in (1, 2)],
        ]
        for node in nodes:
            await node.start()
        nodes[1].broadcast("one")
        await until(lambda: len(first) == 1)
        broken["on"] = True  # the disk is full from now on
        for k in range(5):
            nodes[2].broadcast(f"lost? {k}")
        await until(lambda: nodes[0].stats.io_errors >= 2)
        await nodes[0].close()  # gives up: the steps were never written, nor acted on
        broken["on"] = False
        second: list[Message] = []
        back = Node(
            reliable_cbcast(0, 3),
            table,
            KEY,
            listen=socks[0].dup(),
            checkpoint=ckpt,
            trace=trace0,
            on_deliver=second.append,
        )
        await back.start()
        await until(lambda: len(second) == 5)
        for node in [back, nodes[1], nodes[2]]:
            await node.close()
        return first, second

    first, second = asyncio.run(main())
    assert [m.payload for m in first] == ["one"]
    assert [m.payload for m in second] == [f"lost? {k}" for k in range(5)]
    assert [m.id for m in first + second] == _delivered_in(trace0)


@pytest.mark.slow
def test_an_idle_flood_under_rlimit_nofile_loses_no_delivery(tmp_path: Path) -> None:
    count, flood = 150, 1100
    with group(
        tmp_path,
        3,
        [
            "--protocol",
            "cbcast",
            "--count",
            str(count),
            "--expect",
            str(3 * count),
            "--interval",
            "0.01",
            "--start-after",
            "2.0",
            "--rto",
            "0.2",
        ],
    ) as g:
        for pid in range(3):
            g.start(
                pid,
                ["--checkpoint", str(g.path("checkpoint", pid))],
                max_files=1024 if pid == 0 else None,
            )
        idle = idle_flood(g.socks[0].getsockname()[1], flood)  # more than P0 may open
        try:
            g.wait_done(120)
        finally:
            for s in idle:
                s.close()
        g.stop()
        events = g.trace()
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
        stats = g.stats(0)
        traced = sum(e.kind == "deliver" and e.process == 0 for e in events)
        # What the application got equals what the trace and the counters say: all of it.
        assert stats["handed"] == stats["delivered"] == traced == 3 * count
        assert stats["evicted"] >= flood - 2 * node_module.MAX_UNAUTHENTICATED
        assert stats["io_errors"] == 0
        assert g.path("log", 0).stat().st_size < 20_000  # rate-limited, no tracebacks


@pytest.mark.slow
def test_real_emfile_under_an_idle_flood_loses_no_delivery(tmp_path: Path) -> None:
    count = 100
    with group(
        tmp_path,
        3,
        [
            "--protocol",
            "cbcast",
            "--count",
            str(count),
            "--expect",
            str(3 * count),
            "--interval",
            "0.01",
            "--start-after",
            "1.0",
            "--rto",
            "0.2",
            "--handshake-timeout",
            "1",
        ],
    ) as g:
        for pid in range(3):
            # 40 files: the idle connections exhaust them, so accept() really fails
            # with EMFILE (asyncio pauses accepting for a second); the checkpoint
            # log needs no new file, a compaction that fails is retried later.
            g.start(
                pid,
                ["--checkpoint", str(g.path("checkpoint", pid))],
                max_files=40 if pid == 0 else None,
            )
        idle = idle_flood(g.socks[0].getsockname()[1], 150, timeout=0.5)
        try:
            g.wait_done(120)
        finally:
            for s in idle:
                s.close()
        g.stop()
        events = g.trace()
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
        stats = g.stats(0)
        traced = sum(e.kind == "deliver" and e.process == 0 for e in events)
        assert stats["handed"] == stats["delivered"] == traced == 3 * count
        assert stats["timeouts"] >= 1  # the flood did hold connections
        log = g.path("log", 0).read_text()
        assert "Traceback" not in log
        assert "Too many open files" in log  # EMFILE happened, and was only logged


# -- bounded before authentication ----------------------------------------------------------------


@pytest.mark.slow
def test_a_preauth_flood_leaves_memory_at_its_baseline(tmp_path: Path) -> None:
    conns, size = 300, 1 << 20
    with group(tmp_path, 2, ["--protocol", "cbcast", "--no-reliable"]) as g:
        g.start(0)
        port = g.socks[0].getsockname()[1]
        wait_for(lambda: _accepts(port), 30, "P0 to listen")
        pid = g.procs[0].pid
        baseline = rss_mb(pid)
        # Each connection announces a frame of 1 MiB and sends it, before any HELLO.
        junk = size.to_bytes(4, "big") + bytes([fr.HELLO]) + b"x" * (size - 1)

        def attack(_: int) -> socket.socket | None:
            try:  # a reset already at the connect: the node evicted it at once
                s = socket.create_connection(("127.0.0.1", port), timeout=10)
            except ConnectionResetError:
                return None
            with contextlib.suppress(OSError):  # refused at the header: the node hung up
                s.sendall(junk)
            return s

        peak = baseline
        with concurrent.futures.ThreadPoolExecutor(16) as pool:
            socks = list(pool.map(attack, range(conns)))
            peak = max(peak, rss_mb(pid))
        peak = max(peak, rss_mb(pid))
        opened = [s for s in socks if s is not None]
        assert len(opened) >= conns // 3  # the flood reached the node
        for s in opened:
            s.close()
        wait_for(lambda: _accepts(port), 30, "P0 to serve again")
        after = rss_mb(pid)
    assert peak - baseline < 40, (baseline, peak)
    assert after - baseline < 20, (baseline, after)


def _accepts(port: int) -> bool:
    try:
        c = RawClient(port)
    except OSError:
        return False
    c.close()
    return True


def test_too_many_unauthenticated_connections_close_the_oldest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(node_module, "MAX_UNAUTHENTICATED", 4)
    socks = listening_sockets(2)
    table = table_of(socks)

    async def main() -> tuple[int, int, bool]:
        node = Node(CBCAST(0, 2), table, KEY, listen=socks[0], max_unauthenticated=4)
        await node.start()
        port = socks[0].getsockname()[1]
        idle = await asyncio.to_thread(lambda: [RawClient(port) for _ in range(10)])
        await until(lambda: node.stats.evicted == 6)
        waiting = node.transport.handshaking()
        closed = await asyncio.to_thread(idle[0].closed_by_peer, 5.0)
        for c in idle:
            c.close()
        await node.close()
        socks[1].close()
        return node.stats.evicted, waiting, closed

    assert asyncio.run(main()) == (6, 4, True)


# -- frames: all or nothing, ids checked, tables bounded, logs rate-limited ---------------------


def _one_node(n: int = 3) -> tuple[list[socket.socket], PeerTable]:
    socks = listening_sockets(n)
    return socks, table_of(socks)


def test_a_batch_with_one_bad_packet_delivers_nothing() -> None:
    socks, table = _one_node()

    async def main() -> tuple[int, int, bool]:
        node = Node(CBCAST(0, 3), table, KEY, listen=socks[0])
        await node.start()
        before = node.endpoint.snapshot()

        def attack() -> None:
            c = RawClient(socks[0].getsockname()[1])
            sealer = c.hello(2, 0, table)
            good = encode(CBCASTPacket(2, (0, 0, 1), "deliverable"))
            frame = sealer.seal_many(
                [(good, MessageId(2, 1), fr.BROADCAST), (b"\xff\x00garbage", None, fr.CONTROL)]
            )
            c.send(frame)
            assert c.closed_by_peer()

        await asyncio.to_thread(attack)
        unchanged = node.endpoint.snapshot() == before
        await node.close()
        return node.stats.delivered, node.stats.garbage, unchanged

    assert asyncio.run(main()) == (0, 1, True)


def test_a_frame_naming_an_impossible_message_id_is_garbage() -> None:
    socks, table = _one_node()

    async def main() -> tuple[int, int]:
        node = Node(CBCAST(0, 3), table, KEY, listen=socks[0])
        await node.start()

        def attack() -> None:
            c = RawClient(socks[0].getsockname()[1])
            sealer = c.hello(2, 0, table)
            good = encode(CBCASTPacket(2, (0, 0, 1), "x"))
            c.send(sealer.seal(good, MessageId(9, 1), fr.BROADCAST))  # no P9 in a group of 3
            assert c.closed_by_peer()

        await asyncio.to_thread(attack)
        await node.close()
        return node.stats.delivered, node.stats.garbage

    assert asyncio.run(main()) == (0, 1)


def test_a_frame_naming_another_message_id_than_its_packet_is_refused_not_the_link(
    tmp_path: Path,
) -> None:
    """An authentic frame whose packet carries another message than its header names
    (at any of its layers) is refused and counted (``mislabeled``), the state unchanged
    and no receive row written; the link stays up: the next frame on it is delivered."""
    socks, table = _one_node()
    trace = tmp_path / "t.jsonl"

    async def main() -> tuple[int, int, int, int, bool]:
        node = Node(CBCAST(0, 3), table, KEY, listen=socks[0], trace=trace)
        await node.start()
        before = node.endpoint.snapshot()
        c = await asyncio.to_thread(RawClient, socks[0].getsockname()[1])
        sealer = await asyncio.to_thread(c.hello, 2, 0, table)
        good = encode(CBCASTPacket(2, (0, 0, 1), "x"))  # carries P2#1
        c.send(sealer.seal(good, MessageId(1, 1), fr.BROADCAST))  # a valid id, not its own
        await until(lambda: node.stats.mislabeled == 1)
        unchanged = node.endpoint.snapshot() == before
        c.send(sealer.seal(good, MessageId(2, 1), fr.BROADCAST))  # the same link, labelled
        await until(lambda: node.stats.delivered == 1)
        c.close()
        await node.close()
        s = node.stats
        return s.delivered, s.mislabeled, s.garbage, s.closed, unchanged

    assert asyncio.run(main()) == (1, 1, 0, 0, True)
    receives = [e.message for e in read_jsonl(trace) if e.kind == "receive"]
    assert receives == [MessageId(2, 1)]  # no row for the refused frame


def test_a_mislabelled_packet_costs_only_itself_not_the_rest_of_its_batch_frame(
    tmp_path: Path,
) -> None:
    """A BATCH frame of a correctly labelled packet and a mislabelled one: the first is
    delivered at once (bare CBCAST never retransmits), the second refused and counted
    (``mislabeled``), neither delivered nor buffered nor traced; the link stays up.
    Before, the whole frame was refused and its good packet came only if resent."""
    socks, table = _one_node()
    trace = tmp_path / "t.jsonl"

    async def main() -> tuple[list[Any], int, int, int, int, int]:
        got: list[Message] = []
        node = Node(CBCAST(0, 3), table, KEY, listen=socks[0], trace=trace, on_deliver=got.append)
        await node.start()
        c = await asyncio.to_thread(RawClient, socks[0].getsockname()[1])
        sealer = await asyncio.to_thread(c.hello, 2, 0, table)
        good = encode(CBCASTPacket(2, (0, 0, 1), "good"))  # carries P2#1
        forged = encode(CBCASTPacket(2, (0, 0, 2), "forged"))  # carries P2#2
        c.send(
            sealer.seal_many(
                [(good, MessageId(2, 1), fr.BROADCAST), (forged, MessageId(1, 1), fr.BROADCAST)]
            )
        )
        await until(lambda: node.stats.mislabeled == 1 and node.stats.delivered == 1, 5.0)
        buffered = node.endpoint.buffered()
        later = encode(CBCASTPacket(2, (0, 0, 2), "later"))  # the same link, labelled
        c.send(sealer.seal(later, MessageId(2, 2), fr.BROADCAST))
        await until(lambda: node.stats.delivered == 2, 5.0)
        c.close()
        await node.close()
        s = node.stats
        return [m.payload for m in got], buffered, s.mislabeled, s.garbage, s.closed, s.delivered

    assert asyncio.run(main()) == (["good", "later"], 0, 1, 0, 0, 2)
    receives = [e.message for e in read_jsonl(trace) if e.kind == "receive"]
    assert receives == [MessageId(2, 1), MessageId(2, 2)]  # no row for the refused packet


#: Application payloads that are packets (``check_payload`` accepts a whole packet):
#: one naming another message (P1#7), a control packet (it names none) and one whose
#: ``carries()`` fails (no vector entry for P7).
PACKET_PAYLOADS = [
    FifoPacket(1, 0, 7, 2, "x"),
    ReliableAck(1, 0, 3),
    CBCASTPacket(7, (0, 0, 1), "y"),
]


@pytest.mark.parametrize("reliable", [False, True], ids=["cbcast", "reliable+cbcast"])
def test_a_packet_as_the_application_payload_is_delivered_at_once(reliable: bool) -> None:
    """An honest sender whose application broadcasts packets: each frame names the
    message the endpoint numbered (P1#k), while ``carried_message_id`` reads the id of
    the innermost packet, the application's. Before, the receiver refused such a frame
    (``mislabeled``) or closed the link (``garbage``): over bare CBCAST the message
    never came; over Reliable it came by retransmission, labelled with the inner id,
    so the receiver took P1#7 as seen. Now each is delivered at once (the
    retransmission timeout is longer than the test), nothing is refused and ``seen``
    is what P1 sent."""
    socks = listening_sockets(2)
    table = table_of(socks)

    def endpoint(p: int) -> Any:
        return Stack(Reliable(p, 2, rto=30.0), CBCAST(p, 2)) if reliable else CBCAST(p, 2)

    async def main() -> tuple[list[Any], list[MessageId], int, int, int, int, int]:
        got: list[Message] = []
        receiver = Node(endpoint(0), table, KEY, listen=socks[0], on_deliver=got.append)
        sender = Node(endpoint(1), table, KEY, listen=socks[1])
        await receiver.start()
        await sender.start()
        sent: list[MessageId] = []
        for payload in PACKET_PAYLOADS:  # one a turn: each a packet of its own, not a batch
            sent.append(sender.broadcast(payload))
            await until(lambda: len(got) == len(sent), 10.0)
        await sender.close()
        await receiver.close()
        s = receiver.stats
        seen = receiver.transport.seen.of(1)
        return [m.payload for m in got], sent, s.mislabeled, s.garbage, s.closed, seen, s.delivered

    payloads, sent, mislabeled, garbage, closed, seen, delivered = asyncio.run(main())
    assert payloads == PACKET_PAYLOADS
    assert sent == [MessageId(1, k) for k in (1, 2, 3)]
    assert (mislabeled, garbage, closed) == (0, 0, 0)
    assert seen == 3 and delivered == 3


def test_destinations_in_the_trace_come_from_the_sends_not_from_tables(tmp_path: Path) -> None:
    """An endpoint that both sends and broadcasts (Fifo): each message's destinations
    reach every trace exactly, retransmissions to a peer that came late included (the
    node keeps a byte per own message, in its checkpoint too); one that only sends
    keeps nothing per message."""
    from mailroom.protocols import Fifo

    socks = listening_sockets(3)
    table = table_of(socks)
    traces = [tmp_path / f"t{p}.jsonl" for p in range(3)]

    def node(p: int) -> Node:
        return Node(
            Stack(Reliable(p, 3, rto=0.1), Fifo(p, 3)),
            table,
            KEY,
            listen=socks[p],
            trace=traces[p],
            checkpoint=tmp_path / f"c{p}",
        )

    async def main() -> int:
        nodes = [node(0), node(1)]  # P2 comes late: what P0 sends it is retransmitted
        for n in nodes:
            await n.start()
        nodes[0].send("to P1", to=1)
        nodes[0].broadcast("to all")
        nodes[0].send("to P2", to=2)
        late = node(2)
        await late.start()
        nodes.append(late)
        await until(lambda: [n.stats.delivered for n in nodes] == [1, 2, 2])
        for n in nodes:
            await n.close()
        again = Node(Stack(Reliable(0, 3), Fifo(0, 3)), table, KEY, checkpoint=tmp_path / "c0")
        kinds = [fr.UNICAST, fr.BROADCAST, fr.UNICAST]  # kept for retransmissions
        assert [again.core.dests.kind(MessageId(0, k + 1)) for k in range(3)] == kinds
        sole = Node(Reliable(0, 3), table, KEY, trace=tmp_path / "r.jsonl")
        for _ in range(50):
            sole.core.dests.issued(fr.UNICAST)
        return len(sole.core.dests.own) + len(sole.core.dests.held)

    assert asyncio.run(main()) == 0
    dest = {"to P1": [1], "to all": [0, 1, 2], "to P2": [2]}
    for p, path in enumerate(traces):
        sends = {e.message: e.payload for e in read_jsonl(path) if e.kind == "send"}
        payload = {
            **sends,
            **{e.message: e.payload for p2 in traces for e in read_jsonl(p2) if e.kind == "send"},
        }
        for e in read_jsonl(path):
            if e.kind in ("send", "receive", "deliver"):
                assert list(e.dest) == dest[payload[e.message]], (p, e)


def test_rejected_connections_are_logged_with_a_rate_limit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    socks, table = _one_node(2)

    async def main() -> int:
        node = Node(CBCAST(0, 2), table, KEY, listen=socks[0])
        await node.start()
        port = socks[0].getsockname()[1]

        def attack() -> None:
            for _ in range(60):
                c = RawClient(port)
                c.send(b"\x00\x00\x00\x09hello there")
                assert c.closed_by_peer()

        await asyncio.to_thread(attack)
        await node.close()
        return node.stats.garbage

    with caplog.at_level(logging.WARNING, logger="mailroom.net"):
        garbage = asyncio.run(main())
    assert garbage == 60
    closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert len(closing) == node_module.LOG_BURST


# -- mutual authentication and encryption ---------------------------------------------------------


def test_a_squatter_on_a_down_members_address_learns_nothing() -> None:
    socks = listening_sockets(2)
    table = table_of(socks)
    squat = socks[1]  # P1 is down; a process without the key holds its address
    digest = fr.table_digest(table.entries())
    guess = b"the-squatter-guesses-this-key-0123"  # its share commits it to this guess
    mine = pake.KeyPair.fresh(pake.generator(guess, digest))
    greeting = hs.Greeting(b"s" * fr.NONCE_SIZE, mine.share)

    def squatter() -> bytes:
        squat.settimeout(10)
        conn, _ = squat.accept()
        conn.settimeout(3)
        conn.sendall(greeting.frame())
        got = b""
        reader = fr.FrameReader()
        try:
            while chunk := conn.recv(65536):
                got += chunk
                for kind, _ in reader.feed(chunk):
                    if kind == fr.CLAIM:  # answer with a CONFIRM it cannot make
                        conn.sendall(fr.frame(fr.CONFIRM, b"p" * (fr.MAC_SIZE + 8)))
        except (TimeoutError, ConnectionError):
            pass
        conn.close()
        return got

    async def main() -> tuple[bytes, int]:
        node = Node(reliable_cbcast(0, 2), table, KEY, listen=socks[0])
        await node.start()
        for k in range(20):
            node.broadcast(f"secret {k}")
        got = await asyncio.to_thread(squatter)
        await node.close()
        return got, node.stats.bad_mac

    got, bad_mac = asyncio.run(main())
    frames = fr.FrameReader().feed(got)
    kinds = [kind for kind, _ in frames]
    assert kinds and set(kinds) == {fr.CLAIM}  # no DATA, no BATCH
    assert b"secret" not in got
    assert bad_mac >= 1
    # What the squatter can compute from what it saw tests no key offline, not even the
    # group's: its share fixed the one guess the CLAIM's MAC can confirm (online).
    claim = hs.read_claim(fr.CLAIM, frames[0][1], {0, 1}, "P0")
    for key in (KEY, guess):
        with pytest.raises(fr.FrameError):
            hs.check_claim(key, mine, greeting, claim)


def test_a_squatter_that_says_nothing_is_left_and_the_link_reconnects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(settings_module, "HANDSHAKE_TIMEOUT", 0.2)
    socks = listening_sockets(2)
    table = table_of(socks)
    squat = socks[1]

    def squatter() -> int:
        squat.settimeout(10)
        first, _ = squat.accept()  # ... and never sends a challenge
        second, _ = squat.accept()  # the node gave up on the first and came back
        first.settimeout(5)
        closed = first.recv(1) == b""
        first.close()
        second.close()
        return int(closed)

    async def main() -> tuple[int, int]:
        node = Node(reliable_cbcast(0, 2), table, KEY, listen=socks[0])
        await node.start()
        closed = await asyncio.to_thread(squatter)
        await node.close()
        return closed, node.stats.timeouts

    closed, timeouts = asyncio.run(main())
    assert closed == 1 and timeouts >= 1


def test_an_encrypted_group_delivers_and_refuses_a_member_that_does_not_encrypt() -> None:
    pytest.importorskip("cryptography")
    socks = listening_sockets(3)
    table = table_of(socks)

    async def main() -> tuple[list[int], int]:
        nodes = [
            Node(reliable_cbcast(p, 3), table, KEY, listen=socks[p], encrypt=True) for p in range(3)
        ]
        for node in nodes:
            await node.start()
        for k in range(5):
            for node in nodes:
                node.broadcast(f"hidden {k}")
        await until(lambda: all(n.stats.delivered == 15 for n in nodes))

        def plain_member() -> bool:
            c = RawClient(socks[0].getsockname()[1])
            c.claim(2, 0, table, encrypt=False)
            return c.closed_by_peer()

        assert await asyncio.to_thread(plain_member)
        for node in nodes:
            await node.close()
        return [n.stats.delivered for n in nodes], nodes[0].stats.refused

    assert asyncio.run(main()) == ([15, 15, 15], 1)


# -- the mail room is bounded by default ----------------------------------------------------


def test_sends_to_a_peer_that_is_down_are_bounded_by_default() -> None:
    socks, table = _one_node(3)

    async def main() -> tuple[int, int]:
        node = Node(reliable_cbcast(0, 3), table, KEY, listen=socks[0])  # P1 and P2 never come
        await node.start()
        sent = 0
        with pytest.raises(Busy):
            while True:
                node.broadcast("x" * 64)
                sent += 1
        retained = node.core.flow.retained()
        assert not node.can_send()
        await node.close()
        return sent, retained

    sent, retained = asyncio.run(main())
    assert retained == node_module.MAX_RETAINED  # 4096 packets for two peers
    # The sends of one turn are taken in lots of LOT_LIMIT: while the reliable windows
    # are open, each lot is one packet per peer; once they are full, each broadcast is
    # a packet per peer again, kept until acknowledged, up to max_retained.
    window = Reliable(0, 3).window
    assert sent == LOT_LIMIT * window + (node_module.MAX_RETAINED - 2 * window) // 2
