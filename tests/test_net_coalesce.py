"""A node takes what the application sends in one turn of the event loop as one step,
over real sockets on 127.0.0.1: few frames, nothing waits at low load, the same ids,
trace and checkpoint as sending each message as its own step, a crash before the turn
ends loses the lot as if it were never sent, and flow control still bounds memory."""

from __future__ import annotations

import asyncio
import math
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.core.endpoint import capabilities
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId
from mailroom.core.stack import Stack
from mailroom.net import Node, NodeConfig
from mailroom.net import frames as fr
from mailroom.net.lazy import LazyHold
from mailroom.net.metrics import metrics_routes
from mailroom.net.outgoing import LOT_LIMIT
from mailroom.net.transport import Link
from mailroom.protocols import CBCAST, Fifo, Reliable, Sequencer, Skeen, Unordered
from mailroom.trace import Event, check, read_header, read_jsonl

from .net_support import (
    KEY,
    group,
    listening_sockets,
    live_events,
    mailroom_check,
    table_of,
    wait_for,
)

TOPS: dict[str, Callable[[int, int], Any]] = {
    "cbcast": CBCAST,
    "sequencer": Sequencer,
    "fifo": Fifo,
    "skeen": Skeen,
    "unordered": Unordered,
}


def _stack(protocol: str, pid: int, n: int = 3, **reliable: Any) -> Stack:
    return Stack(Reliable(pid, n, rto=5.0, **reliable), TOPS[protocol](pid, n))


async def _until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Wait for ``predicate``; the timeout is only a safety net."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def _started(protocol: str, got: list[list[Message]], **options: Any) -> list[Node]:
    """Three connected nodes of ``protocol`` over Reliable, delivering into ``got``."""
    socks = listening_sockets(3)
    table = table_of(socks)
    nodes = [
        Node(_stack(protocol, p), table, KEY, listen=socks[p], on_deliver=got[p].append, **options)
        for p in range(3)
    ]
    for node in nodes:
        await node.start()
    await _until(lambda: all(node.stats.connected == 2 for node in nodes))
    return nodes


def _counts(node: Node) -> tuple[int, int, int]:
    s = node.stats
    return s.steps, s.data_frames_out, s.frames_out


# -- coalescing ---------------------------------------------------------------------------


def test_the_broadcasts_of_one_turn_ride_one_step_and_one_frame_per_peer() -> None:
    async def main() -> list[Any]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("cbcast", got)
        before = _counts(nodes[0])
        mids = [nodes[0].broadcast(f"m{k}") for k in range(50)]
        during = (_counts(nodes[0]), len(got[0]))  # nothing is taken while the turn lasts
        await asyncio.sleep(0)  # one iteration of the loop
        after = _counts(nodes[0])
        await _until(lambda: all(len(g) == 50 for g in got))
        seen = [(n.stats.data_frames_in, n.stats.steps) for n in nodes[1:]]
        scraped = (_scraped(nodes[0]), _counts(nodes[0]))  # the metrics say the counters
        for node in nodes:
            await node.close()
        return [before, mids, during, after, seen, got, scraped]

    before, mids, during, after, seen, got, scraped = asyncio.run(main())
    assert mids == [MessageId(0, k + 1) for k in range(50)]
    assert during == (before, 0)
    # one step; one frame to each peer, carrying one batch packet
    assert after == (before[0] + 1, before[1] + 2, before[2] + 2)
    assert seen == [(1, 1), (1, 1)]  # each peer: one frame, taken in one step
    assert all([m.payload for m in g] == [f"m{k}" for k in range(50)] for g in got)
    assert scraped[0] == scraped[1]


def _scraped(node: Node) -> tuple[float, float, float]:
    """Steps, data frames and packets sent, as the node's Prometheus metrics say."""
    from prometheus_client.parser import text_string_to_metric_families

    body, _ = metrics_routes(node)["/metrics"]()
    found = {
        s.name: s.value for f in text_string_to_metric_families(body.decode()) for s in f.samples
    }
    names = ("steps", "data_frames_out", "frames_out")
    steps, frames, packets = (found[f"mailroom_{name}_total"] for name in names)
    return steps, frames, packets


def test_a_run_of_unicasts_rides_one_step_and_one_frame() -> None:
    async def main() -> list[Any]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("fifo", got)  # unicasts have no batch form: one step for the lot
        before = _counts(nodes[0])
        mids = [nodes[0].send(k, to=1) for k in range(20)]
        mids += [nodes[0].send("to two", to=2), nodes[0].broadcast("to all")]
        await asyncio.sleep(0)
        after = _counts(nodes[0])
        await _until(lambda: (len(got[0]), len(got[1]), len(got[2])) == (1, 21, 2))
        seen = nodes[1].stats.data_frames_in
        for node in nodes:
            await node.close()
        return [before, mids, after, seen, got]

    before, mids, after, seen, got = asyncio.run(main())
    assert mids == [MessageId(0, k + 1) for k in range(22)]
    # one step; one frame to P1 (21 packets) and one to P2 (2 packets)
    assert after == (before[0] + 1, before[1] + 2, before[2] + 23)
    assert seen == 1
    assert [m.payload for m in got[1]] == [*range(20), "to all"]
    assert [m.payload for m in got[2]] == ["to two", "to all"]


@pytest.mark.parametrize("coalesce", [True, False])
def test_a_lone_send_waits_for_nothing(coalesce: bool) -> None:
    """At low load a send goes out in the next iteration of the loop, with or without
    coalescing: counted in loop iterations and frames, not in time."""

    async def main() -> tuple[int, int]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("cbcast", got, coalesce=coalesce)
        before = nodes[0].stats.data_frames_out
        nodes[0].broadcast("alone")
        await asyncio.sleep(0)
        after = nodes[0].stats.data_frames_out
        await _until(lambda: all(len(g) == 1 for g in got))
        for node in nodes:
            await node.close()
        return before, after

    before, after = asyncio.run(main())
    assert after == before + 2


def test_linger_holds_a_lot_until_flush_or_close(tmp_path: Path) -> None:
    async def main() -> list[Any]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("cbcast", got, linger=3600.0)
        node = nodes[0]
        before = _counts(node)
        node.broadcast("a")
        node.broadcast("b")
        for _ in range(5):
            await asyncio.sleep(0)
        held = _counts(node)
        node.flush()
        flushed = node.stats.steps
        await _until(lambda: all(len(g) == 2 for g in got))
        for n in nodes:
            await n.close()
        return [before, held, flushed]

    before, held, flushed = asyncio.run(main())
    assert held == before
    assert flushed == before[0] + 1
    # a lot still held when the node closes is taken (written, then sent) first
    socks = listening_sockets(3)
    trace = tmp_path / "t0.jsonl"

    async def closing() -> None:
        node = Node(
            _stack("cbcast", 0), table_of(socks), KEY, listen=socks[0], trace=trace, linger=3600.0
        )
        await node.start()
        node.broadcast("held")
        await node.close()

    asyncio.run(closing())
    assert [(e.kind, e.payload) for e in read_jsonl(trace)] == [
        ("send", "held"),
        ("deliver", "held"),
    ]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "1"])
def test_a_bad_linger_is_refused(bad: Any) -> None:
    with pytest.raises(LocalError, match="linger"):
        NodeConfig(linger=bad)
    with pytest.raises(LocalError, match="busy_gap"):
        NodeConfig(busy_gap=bad)


@pytest.mark.parametrize("gap", [3600.0, 0.0])
def test_sends_that_come_fast_are_gathered_across_turns(gap: float) -> None:
    """A send in a turn soon after a lot was taken waits for the rest of ``busy_gap``
    (here an hour: until ``flush``); with ``busy_gap=0`` every turn's send is a step.
    The first send, after a quiet spell, waits for nothing in both. (The node's peers
    are away, so no frame takes the lot early.)"""
    socks = listening_sockets(3)

    async def main() -> list[Any]:
        got: list[Message] = []
        # a bare CBCAST: no timer of the reliable layer's takes a lot early
        node = Node(
            CBCAST(0, 3), table_of(socks), KEY, listen=socks[0], on_deliver=got.append, busy_gap=gap
        )
        await node.start()
        for _ in range(3):  # the node's first look at itself, at start
            await asyncio.sleep(0)
        before = node.stats.steps
        node.broadcast("first")
        await asyncio.sleep(0)
        first = (node.stats.steps - before, len(got))
        for k in range(5):  # one send per turn, as a paced application sends
            node.broadcast(f"m{k}")
            await asyncio.sleep(0)
        await asyncio.sleep(0)
        held = (node.stats.steps - before, len(got))
        node.flush()
        flushed = (node.stats.steps - before, len(got))
        await node.close()
        return [first, held, flushed, [m.payload for m in got]]

    first, held, flushed, payloads = asyncio.run(main())
    for s in socks:
        s.close()
    assert first == (1, 1)
    if gap:
        assert held == (1, 1)  # five turns' sends wait in one lot
        assert flushed == (2, 6)  # taken as one step
    else:
        assert held == flushed == (6, 6)  # a step per turn
    assert payloads == ["first", *(f"m{k}" for k in range(5))]


def test_a_bad_send_fails_at_its_call_and_the_lot_goes_on() -> None:
    async def main() -> list[Any]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("cbcast", got)
        node = nodes[0]
        first = node.broadcast("a")
        errors = []
        for bad in (
            lambda: node.broadcast(b"bytes"),
            lambda: node.send("x", to=1),
            lambda: node.broadcast_many(["fine", float("nan")]),
        ):
            with pytest.raises(LocalError) as info:
                bad()
            errors.append(str(info.value))
        second = node.broadcast("b")
        await _until(lambda: all(len(g) == 2 for g in got))
        for n in nodes:
            await n.close()
        return [first, second, errors, node.stats.sent, got]

    first, second, errors, sent, got = asyncio.run(main())
    assert (first, second, sent) == (MessageId(0, 1), MessageId(0, 2), 2)
    assert "payload" in errors[0] and "unicast" in errors[1] and "finite" in errors[2]
    assert all([(m.id, m.payload) for m in g] == [(first, "a"), (second, "b")] for g in got)


# -- the same ids, trace and checkpoint as one step per send --------------------------------


async def _workload(node: Node, p: int, protocol: str) -> list[MessageId]:
    """Two turns of sends: single calls (unicasts too where the protocol has them), then
    a batch and one more."""
    mids = []
    for k in range(12):
        if protocol == "fifo" and k % 3 == 1:
            mids.append(node.send(f"p{p}-{k}", to=(p + k) % 3))
        else:
            mids.append(node.broadcast(f"p{p}-{k}"))
    await asyncio.sleep(0)
    mids += node.broadcast_many([f"p{p}-m{j}" for j in range(3)])
    mids.append(node.broadcast({"p": p, "last": True}))
    return mids


def _expected(protocol: str) -> list[int]:
    """Deliveries per process of ``_workload`` run by all three."""
    if protocol != "fifo":
        return [48, 48, 48]
    per = [36, 36, 36]  # 3 x 12 broadcasts
    for p in range(3):
        for k in range(1, 12, 3):
            per[(p + k) % 3] += 1
    return per


def _run(protocol: str, folder: Path, coalesce: bool) -> tuple[list[list[MessageId]], Any]:
    folder.mkdir()
    socks = listening_sockets(3)
    table = table_of(socks)
    counts = _expected(protocol)

    async def main() -> tuple[list[list[MessageId]], list[tuple[int, int]]]:
        nodes = [
            Node(
                _stack(protocol, p),
                table,
                KEY,
                listen=socks[p],
                coalesce=coalesce,
                trace=folder / f"t{p}.jsonl",
                checkpoint=folder / f"c{p}",
            )
            for p in range(3)
        ]
        for node in nodes:
            await node.start()
        await _until(lambda: all(node.stats.connected == 2 for node in nodes))
        mids = await asyncio.gather(*(_workload(nodes[p], p, protocol) for p in range(3)))
        await _until(lambda: [n.stats.delivered for n in nodes] == counts)
        for node in nodes:
            await node.close()
        return list(mids), [(n.stats.sent, n.stats.delivered) for n in nodes]

    mids, counters = asyncio.run(main())
    restored = []
    for p in range(3):
        back = Node(_stack(protocol, p), table, KEY, checkpoint=folder / f"c{p}")
        restored.append((back.stats.sent, back.stats.delivered, back.endpoint.sent_count))
    assert [r[:2] for r in restored] == counters  # the checkpoint holds every step
    return mids, restored


def _events(folder: Path, p: int, kind: str) -> list[tuple[Any, ...]]:
    return [
        (e.message, e.dest, e.payload) for e in read_jsonl(folder / f"t{p}.jsonl") if e.kind == kind
    ]


@pytest.mark.parametrize("protocol", sorted(TOPS))
def test_ids_trace_and_checkpoint_are_those_of_one_step_per_send(
    tmp_path: Path, protocol: str
) -> None:
    batched, unbatched = tmp_path / "batched", tmp_path / "unbatched"
    mids, restored = _run(protocol, batched, coalesce=True)
    assert (mids, restored) == _run(protocol, unbatched, coalesce=False)
    for p in range(3):
        # the same send events, in the same order; the same deliveries
        assert _events(batched, p, "send") == _events(unbatched, p, "send")
        got = sorted(_events(batched, p, "deliver"), key=lambda x: x[0])
        assert got == sorted(_events(unbatched, p, "deliver"), key=lambda x: x[0])
        if protocol in ("cbcast", "fifo"):  # a sender delivers its own in sending order
            own = [m for m, _, _ in _events(batched, p, "deliver") if m.origin == p]
            assert own == sorted(own)
    events: list[Event] = [e for p in range(3) for e in read_jsonl(batched / f"t{p}.jsonl")]
    header = read_header(batched / "t0.jsonl")
    assert header is not None and header.promises
    report = check(events, list(header.promises))
    assert report.ok, report.summary()
    if protocol == "cbcast":  # the command line, with no options, says so too
        done = mailroom_check([batched / f"t{p}.jsonl" for p in range(3)])
        assert done.returncode == 0, done.stdout + done.stderr


# -- the same, for any sequence of calls and turns (one node, its peers away) ---------------

CALLS = st.lists(
    st.one_of(
        st.tuples(st.just("b"), st.text(max_size=6)),
        st.tuples(st.just("s"), st.integers(0, 99), st.integers(0, 2)),
        st.tuples(st.just("m"), st.lists(st.integers(0, 9), max_size=5)),
        st.tuples(st.just("bad"), st.just(b"x")),
        st.tuples(st.sampled_from(["turn", "flush"])),
    ),
    max_size=40,
)


async def _calls(node: Node, calls: list[tuple[Any, ...]]) -> list[Any]:
    out: list[Any] = []
    for call in calls:
        try:
            if call[0] == "b":
                out.append(node.broadcast(call[1]))
            elif call[0] == "s":
                out.append(node.send(call[1], to=call[2]))
            elif call[0] == "m":
                out.append(node.broadcast_many(call[1]))
            elif call[0] == "bad":
                out.append(node.broadcast(call[1]))
            elif call[0] == "flush":
                node.flush()
            else:
                await asyncio.sleep(0)
        except LocalError as exc:
            out.append(type(exc).__name__)
    for _ in range(3):  # what loops back to this process arrives
        await asyncio.sleep(0)
    return out


def _alone(protocol: str, calls: list[tuple[Any, ...]], folder: Path, coalesce: bool) -> Any:
    """One node whose peers are away runs ``calls``; what it returned, its trace, and the
    endpoint restored from its checkpoint."""
    socks = listening_sockets(3)
    table = table_of(socks)
    trace, ckpt = folder / f"t{coalesce}.jsonl", folder / f"c{coalesce}"

    async def main() -> list[Any]:
        node = Node(
            _stack(protocol, 0, window=1000),
            table,
            KEY,
            listen=socks[0],
            trace=trace,
            checkpoint=ckpt,
            coalesce=coalesce,
            busy_gap=0.0,
        )
        await node.start()
        out = await _calls(node, calls)
        await node.close()
        return out

    out = asyncio.run(main())
    for s in socks:
        s.close()
    back = Node(_stack(protocol, 0, window=1000), table, KEY, checkpoint=ckpt)
    kept = [(e.kind, e.message, e.dest, e.payload) for e in read_jsonl(trace)]
    return out, kept, back


@settings(max_examples=30, deadline=None)
@given(calls=CALLS, protocol=st.sampled_from(["cbcast", "fifo", "unordered"]))
def test_any_calls_give_the_ids_trace_and_state_of_one_step_per_send(
    tmp_path_factory: pytest.TempPathFactory, calls: list[tuple[Any, ...]], protocol: str
) -> None:
    folder = tmp_path_factory.mktemp("calls")
    out, kept, back = _alone(protocol, calls, folder, coalesce=True)
    out1, kept1, back1 = _alone(protocol, calls, folder, coalesce=False)
    assert out == out1
    sends = [x for x in kept if x[0] == "send"]
    assert sends == [x for x in kept1 if x[0] == "send"]
    assert [x for x in kept if x[0] == "deliver"] == [x for x in kept1 if x[0] == "deliver"]
    assert (back.stats.sent, back.stats.delivered) == (back1.stats.sent, back1.stats.delivered)
    top, top1 = back.endpoint.top.snapshot(), back1.endpoint.top.snapshot()
    assert top == top1  # the protocol's state; its packets may travel in fewer packets
    if "broadcast_many" not in capabilities(back.endpoint):  # the same calls exactly
        rel, rel1 = back.endpoint.layers[0], back1.endpoint.layers[0]
        assert (rel.next_seq, rel.received, rel.retained()) == (
            rel1.next_seq,
            rel1.received,
            rel1.retained(),
        )


# -- a crash before the turn ends -----------------------------------------------------------

CRASH = """
import asyncio, os, socket, sys
from mailroom import CBCAST, Reliable, Stack
from mailroom.net import Node, PeerTable

async def main() -> None:
    table = PeerTable.of({p: a for p, a in enumerate(sys.argv[1].split(","))})
    node = Node(Stack(Reliable(0, 3, rto=5.0), CBCAST(0, 3)), table, sys.argv[2].encode(),
                listen=socket.socket(fileno=int(sys.argv[3])), checkpoint=sys.argv[4],
                trace=sys.argv[5])
    await node.start()
    for k in range(5):
        node.broadcast(f"kept {k}")
    await asyncio.sleep(0)  # the turn is over: the lot was taken (written, then sent)
    for k in range(7):
        node.broadcast(f"lost {k}")
    os._exit(0)  # the process dies before this turn ends

asyncio.run(main())
"""


def test_a_crash_before_the_turn_ends_loses_the_lot_as_if_never_sent(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt, trace = tmp_path / "c0", tmp_path / "t0.jsonl"
    addresses = ",".join(table.entries()[p] for p in range(3))
    fd = socks[0].fileno()
    subprocess.run(
        [sys.executable, "-c", CRASH, addresses, KEY.decode(), str(fd), str(ckpt), str(trace)],
        pass_fds=(fd,),
        check=True,
        timeout=120,
    )
    written = [(e.kind, e.payload) for e in live_events(trace)]
    assert written == [(kind, f"kept {k}") for kind in ("send", "deliver") for k in range(5)]

    async def again() -> Node:
        # the peers are away: the restart hears nobody for the handshake's time
        node = Node(
            _stack("cbcast", 0),
            table,
            KEY,
            listen=socks[0],
            checkpoint=ckpt,
            trace=trace,
            handshake_timeout=0.5,
        )
        assert (node.stats.sent, node.endpoint.sent_count) == (5, 5)  # the lot never was
        await node.start()
        assert node.broadcast("after the crash") == MessageId(0, 6)
        await node.close()
        return node

    asyncio.run(again())
    events = read_jsonl(trace)
    sends = [(e.message, e.payload) for e in events if e.kind == "send"]
    assert sends == [
        *((MessageId(0, k + 1), f"kept {k}") for k in range(5)),
        (MessageId(0, 6), "after the crash"),
    ]
    assert len({e.message for e in events if e.kind == "deliver"}) == 6  # none twice


# -- flow control ---------------------------------------------------------------------------


def test_flow_control_bounds_what_a_turn_can_pile_up() -> None:
    """Peers away, a window of two packets per peer: an application that sends while
    ``can_send()`` fills each window with at most ``LOT_LIMIT`` messages a packet; one
    that sends on regardless is kept to one packet per message, as before batching."""
    socks = listening_sockets(3)

    async def main() -> tuple[int, int, int]:
        node = Node(_stack("cbcast", 0, window=2), table_of(socks), KEY, listen=socks[0])
        await node.start()
        sent = 0
        while node.can_send() and sent < 100_000:  # the bound is the test's safety net
            node.broadcast("x")
            sent += 1
        kept = node.endpoint.layers[0].retained()
        for _ in range(10):
            node.broadcast("on regardless")
        more = node.endpoint.layers[0].retained()
        await node.close()
        return sent, kept, more

    sent, kept, more = asyncio.run(main())
    assert sent == 2 * LOT_LIMIT  # two lots, each a packet to each peer
    assert kept == 2 * 2
    assert more == kept + 2 * 10


def test_a_lot_is_taken_before_anything_else_happens(tmp_path: Path) -> None:
    """A frame that arrives while a lot waits (here: lingering) is a step after it: the
    trace's sends come before the receive, in the order the calls were made."""

    async def main() -> list[int]:
        got: list[list[Message]] = [[], [], []]
        socks = listening_sockets(3)
        table = table_of(socks)
        steps: list[int] = []  # P0's step count as it hands each message over

        def delivered(m: Message) -> None:
            got[0].append(m)
            steps.append(nodes[0].stats.steps)

        nodes = [
            Node(
                _stack("cbcast", p),
                table,
                KEY,
                listen=socks[p],
                on_deliver=delivered if p == 0 else got[p].append,
                linger=3600.0 if p == 0 else 0.0,
                trace=tmp_path / f"t{p}.jsonl",
            )
            for p in range(3)
        ]
        for node in nodes:
            await node.start()
        await _until(lambda: all(node.stats.connected == 2 for node in nodes))
        before = nodes[0].stats.steps
        nodes[0].broadcast("waiting")
        nodes[1].broadcast("arrives")
        await _until(lambda: any(m.payload == "arrives" for m in got[0]))
        nodes[0].flush()
        await _until(lambda: all(len(g) == 2 for g in got))
        for node in nodes:
            await node.close()
        return [s - before for s in steps]

    # the lot and the frame are one step: one journal write, one write per peer
    assert asyncio.run(main()) == [1, 1]
    events = read_jsonl(tmp_path / "t0.jsonl")
    rows = [(e.kind, e.payload) for e in events]
    assert rows[:2] == [("send", "waiting"), ("deliver", "waiting")]
    assert rows.index(("receive", None)) > 1
    assert [e.seq for e in events] == list(range(1, len(events) + 1))  # numbered in order
    report = check(
        [e for p in range(3) for e in read_jsonl(tmp_path / f"t{p}.jsonl")],
        ["integrity", "fifo", "causal", "liveness"],
    )
    assert report.ok, report.summary()


class _NoBatches(CBCAST):
    """Breaks the batch form's contract: refuses, as a batch, what ``broadcast`` takes."""

    def broadcast_many(self, payloads: Any) -> Any:
        raise LocalError("no batches today")


def test_an_endpoint_that_refuses_a_lot_after_the_calls_is_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    socks = listening_sockets(3)

    async def main() -> tuple[list[MessageId], list[Message], Any, int]:
        got: list[Message] = []
        node = Node(
            Stack(Reliable(0, 3), _NoBatches(0, 3)),
            table_of(socks),
            KEY,
            listen=socks[0],
            on_deliver=got.append,
        )
        await node.start()
        mids = [node.broadcast(k) for k in range(3)]
        await asyncio.sleep(0)
        stats = node.stats.to_dict()
        alone = node.broadcast("alone")  # a lot of one is a plain broadcast
        await asyncio.sleep(0)
        await node.close()
        return [*mids, alone], got, stats, node.endpoint.sent_count

    mids, got, stats, count = asyncio.run(main())
    assert mids == [MessageId(0, 1), MessageId(0, 2), MessageId(0, 3), MessageId(0, 1)]
    assert (stats["sent"], stats["unsent"]) == (0, 3)
    assert [(m.id, m.payload) for m in got] == [(MessageId(0, 1), "alone")] and count == 1
    assert "refused 3 broadcasts as a batch" in caplog.text


@pytest.mark.slow
def test_a_process_killed_while_it_sends_in_lots_loses_nothing_and_hands_nothing_twice(
    tmp_path: Path,
) -> None:
    """Real processes sending 16 messages a turn (lots of 16); one is killed (SIGKILL)
    mid-run and restarted from its checkpoint: every message is delivered once at every
    process, no id is sent twice, and ``mailroom check`` finds the traces clean."""
    count = 300
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--expect",
        str(3 * count),
        "--rto",
        "0.2",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        trace = g.path("trace", 1)
        wait_for(
            lambda: trace.exists() and trace.read_text().count('"deliver"') >= 100,
            60,
            "P1 to deliver 100 messages",
        )
        g.kill(1)
        g.start(1, ["--checkpoint", str(g.path("checkpoint", 1))])
        g.wait_done(120)
        g.stop()
        events = g.trace()
        sends = [(e.message, e.payload) for e in events if e.kind == "send"]
        assert len(sends) == len({m for m, _ in sends}) == 3 * count
        delivered = [(e.process, e.message) for e in events if e.kind == "deliver"]
        assert len(delivered) == len(set(delivered)) == 9 * count
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.parametrize("gap", [3600.0, 0.0])
def test_a_lazy_packet_waits_until_due_and_a_later_one_replaces_it(gap: float) -> None:
    """On a node that gathers its sends, a lazy packet (an ack) waits for ``lazy_wait``
    (a timer, not a write): a later one of its key replaces it, data to that peer goes
    at the end of the callback without it, and a packet that is not lazy with its key
    replaces it too. ``lazy_wait=0``: every packet goes at the end of the callback."""
    socks = listening_sockets(3)

    async def main() -> list[Any]:
        node = Node(_stack("cbcast", 0), table_of(socks), KEY, listen=socks[0], lazy_wait=gap)
        link = Link(node.transport, 1)  # not connected: only when it would write is seen
        link.push(b"ack1", None, fr.CONTROL, "a", True)  # lazy: an acknowledgement
        link.push(b"ack2", None, fr.CONTROL, "a", True)
        link.flush_soon()
        held = [len(link.lazy), len(link.outbox), link._held is not None, link._flush_pending]
        link.push(b"data", MessageId(0, 1), fr.BROADCAST)
        link.flush_soon()
        with_data = [len(link.lazy), len(link.outbox), link._flush_pending]
        link.push(b"report", None, fr.CONTROL, "a", False)  # the same key, not lazy
        replaced = [len(link.lazy), node.stats.superseded]
        await node.close()
        return [held, with_data, replaced]

    held, with_data, replaced = asyncio.run(main())
    for s in socks:
        s.close()
    if gap > 0:
        assert held == [1, 0, True, False]  # one ack held, on a timer
        assert with_data == [1, 1, True]  # data goes at once, without it
        assert replaced == [0, 2]  # ack2 replaced ack1; the report replaced ack2
    else:
        assert held == [0, 2, False, True] and with_data == [0, 3, True]
    assert NodeConfig().lazy_wait > 0  # on by default


def test_held_lazy_packets_ride_a_write_once_due_and_go_alone_only_later() -> None:
    """Lazy packets are due with a write ``lazy_wait`` after the first was held, and go
    alone only ``lazy_alone`` after it (never sooner than ``lazy_wait``): a link with
    data to write carries them, a link with none writes them rarely."""
    hold = LazyHold()
    hold.add((b"ack1", None, fr.CONTROL), "a", 10.0, 0.005, 0.05)
    hold.add((b"ack2", None, fr.CONTROL), "a", 10.003, 0.005, 0.05)  # the first sets the times
    assert (hold.due, hold.alone) == (10.005, 10.05)
    assert hold.take(10.004) == []  # not due: a write now goes without it
    assert hold.take(10.006) == [(b"ack2", None, fr.CONTROL)]  # due: it rides the write
    assert (hold.due, hold.alone) == (math.inf, math.inf)
    hold.add((b"r", None, fr.CONTROL), "b", 0.0, 0.5, 0.05)
    assert hold.alone == 0.5  # never alone before it is due
    socks = listening_sockets(3)

    async def main() -> float:
        node = Node(
            _stack("cbcast", 0),
            table_of(socks),
            KEY,
            listen=socks[0],
            lazy_wait=0.005,
            lazy_alone=3600,
        )
        link = Link(node.transport, 1)
        link.push(b"ack", None, fr.CONTROL, "a", True)
        link.flush_soon()
        assert link._held is not None
        wait = link._held.when() - asyncio.get_running_loop().time()
        await node.close()
        return wait

    wait = asyncio.run(main())
    for s in socks:
        s.close()
    assert wait > 3000  # the timer that writes it alone: lazy_alone, not lazy_wait
    assert NodeConfig().lazy_alone > NodeConfig().lazy_wait > 0


def test_a_control_packet_that_is_not_lazy_is_written_at_once() -> None:
    """Only lazy packets wait: a proposal, a heartbeat or a report a delivery waits on is
    written at the end of the callback."""
    socks = listening_sockets(3)

    async def main() -> list[bool]:
        node = Node(_stack("cbcast", 0), table_of(socks), KEY, listen=socks[0], lazy_wait=3600)
        link = Link(node.transport, 1)
        link.push(b"report", None, fr.CONTROL, None, False)
        link.flush_soon()
        result = [link._flush_pending, link._held is None]
        await node.close()
        return result

    soon, nothing_held = asyncio.run(main())
    for s in socks:
        s.close()
    assert soon and nothing_held


def test_a_lazy_packet_to_a_slow_link_still_gets_its_timer() -> None:
    """A link staged slow (``delays``) queues its packets late, from a timer of its own:
    a lazy one then arms the hold's timer too, so that it goes without a later write."""
    socks = listening_sockets(3)

    async def main() -> list[Any]:
        node = Node(
            _stack("cbcast", 0),
            table_of(socks),
            KEY,
            listen=socks[0],
            lazy_wait=3600,
            delays={1: 0.001},
        )
        link = Link(node.transport, 1)
        link.push(b"ack", None, fr.CONTROL, "a", True)
        before = [len(link.lazy), link._held is None]  # still on its way to the outbox
        await asyncio.sleep(0.05)
        after = [len(link.lazy), link._held is not None]
        await node.close()
        return [before, after]

    before, after = asyncio.run(main())
    for s in socks:
        s.close()
    assert before == [0, True] and after == [1, True]


@pytest.mark.parametrize("gap", [3600.0, 0.0])
def test_a_stream_arrives_whole_with_acks_held_an_hour(gap: float) -> None:
    """P0 sends 400 messages, one per turn, to P1 over Reliable (a window of 64): with
    lazy packets held for an hour, P1's acks go only when half the window waits on them
    (urgent), at most one per 32 messages, and the window never closes on them; with
    ``lazy_wait=0``, about one ack per step."""

    async def main() -> tuple[list[Any], int]:
        got: list[list[Message]] = [[], [], []]
        nodes = await _started("fifo", got, lazy_wait=gap)
        before = nodes[1].stats.frames_out
        for k in range(400):
            nodes[0].send(k, to=1)
            await asyncio.sleep(0)
        await _until(lambda: len(got[1]) == 400)
        written = nodes[1].stats.frames_out - before
        for node in nodes:
            await node.close()
        return [m.payload for m in got[1]], written

    payloads, written = asyncio.run(main())
    assert payloads == list(range(400))
    if gap > 0:
        # urgent acks only: one per 32 received at most (a read may bring several)
        assert 400 // 64 <= written <= 400 // 32 + 3
    else:
        assert written > 400 // 8
