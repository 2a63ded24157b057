"""A restarted process never reuses message ids its peers have already seen from it.

Peers know what they acknowledged: each CONFIRM tells the connecting process the
highest of its ids the acceptor has seen (kept in the acceptor's checkpoint). A
process restored from an old copy of its checkpoint (the copy was made, the
process went on, was killed, and the copy put back) hears it before its first
step: a group member rejoins as its next incarnation, its ids counting on after
everything used; a plain stack refuses to start with one line. Either way the
trace keeps the events after the copy (they happened).

In one process (fast): both outcomes, the seen ids surviving a restart of the
acceptor, and a node restarted from its real checkpoint resuming as before.
With real OS processes (slow): the same stories end to end; afterwards the traces
check clean with ``mailroom check`` and no id was sent twice.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.errors import LocalError
from mailroom.core.stack import Stack
from mailroom.net import Node
from mailroom.net.membership import group_endpoint
from mailroom.net.store import log_of
from mailroom.protocols import CBCAST, Reliable

from .net_support import KEY, Group, group, listening_sockets, live_events, table_of, wait_for


def _stack(pid: int, n: int) -> Any:
    return Stack(Reliable(pid, n, rto=0.2), CBCAST(pid, n))


def _member(pid: int) -> Any:
    return group_endpoint("cbcast", pid, 3, members=[0, 1, 2], heartbeat=0.05, suspect_after=5)


async def _until(predicate: Any, timeout: float = 30.0) -> None:
    """Wait for ``predicate``; the timeout is only a safety net."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def _copy(ckpt: Path, to: Path) -> None:
    """A copy of a checkpoint: its base and its log."""
    shutil.copy(ckpt, to)
    shutil.copy(log_of(ckpt), log_of(to))


def _put_back(copy: Path, ckpt: Path) -> None:
    shutil.copy(copy, ckpt)
    shutil.copy(log_of(copy), log_of(ckpt))


def _sends(trace: Path, pid: int) -> list[tuple[int, Any]]:
    return [
        (e.message.seq, e.payload)
        for e in live_events(trace)
        if e.kind == "send" and e.process == pid
    ]


def test_a_plain_stack_behind_its_peers_refuses_to_start_with_one_line(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt, trace, copy = tmp_path / "p2.ckpt", tmp_path / "p2.jsonl", tmp_path / "copy"

    async def main() -> tuple[str, int, list[Any]]:
        nodes = [Node(_stack(p, 3), table, KEY, listen=socks[p]) for p in range(2)]
        for node in nodes:
            await node.start()

        def p2() -> Node:
            return Node(
                _stack(2, 3), table, KEY, listen=socks[2].dup(), checkpoint=ckpt, trace=trace
            )

        first = p2()
        await first.start()
        for k in range(3):
            first.broadcast(f"before the copy {k}")
        await _until(lambda: all(n.transport.seen.of(2) == 3 for n in nodes))
        await first.close()
        _copy(ckpt, copy)
        second = p2()
        await second.start()  # its peers have seen 3, it has sent 3: it resumes
        for k in range(3):
            second.broadcast(f"after the copy {k}")
        await _until(lambda: all(n.transport.seen.of(2) == 6 for n in nodes))
        await second.close()
        latest = tmp_path / "latest"
        _copy(ckpt, latest)
        _put_back(copy, ckpt)  # the old copy: 3 sent, its peers have seen 6
        old = p2()
        with pytest.raises(LocalError) as err:
            await old.start()
        sends = _sends(trace, 2)
        _put_back(latest, ckpt)  # the latest checkpoint resumes, and carries on
        again = p2()
        await again.start()
        again.broadcast("with the latest checkpoint")
        await _until(lambda: all(n.transport.seen.of(2) == 7 for n in nodes))
        await again.close()
        for node in nodes:
            await node.close()
        return str(err.value), again.stats.sent, sends

    message, sent, sends = asyncio.run(main())
    assert "\n" not in message and "behind" in message and "has seen its message 6" in message
    # The refused start kept the trace of what happened after the copy.
    assert [seq for seq, _ in sends] == [1, 2, 3, 4, 5, 6]
    assert sent == 7
    final = _sends(trace, 2)
    assert [seq for seq, _ in final] == list(range(1, 8))  # each id sent once


def test_a_group_member_behind_its_peers_rejoins_with_fresh_ids(tmp_path: Path) -> None:
    socks = listening_sockets(3)
    table = table_of(socks)
    ckpt, trace, copy = tmp_path / "p2.ckpt", tmp_path / "p2.jsonl", tmp_path / "copy"

    async def main() -> tuple[list[Any], int, int, int]:
        nodes = [Node(_member(p), table, KEY, listen=socks[p]) for p in range(2)]
        for node in nodes:
            await node.start()

        def p2() -> Node:
            return Node(
                _member(2),
                table,
                KEY,
                listen=socks[2].dup(),
                checkpoint=ckpt,
                trace=trace,
                get_state=lambda view: None,
            )

        first = p2()
        await first.start()
        await _until(lambda: first.joined)
        for k in range(3):
            first.broadcast(f"before the copy {k}")
        await _until(lambda: all(n.transport.seen.of(2) == 3 for n in nodes))
        _copy(ckpt, copy)
        for k in range(3):
            first.broadcast(f"after the copy {k}")
        await _until(lambda: all(n.transport.seen.of(2) == 6 for n in nodes))
        await first.close()
        _put_back(copy, ckpt)
        old = p2()
        incarnation = old.endpoint.group.incarnation
        await old.start()  # behind: it rejoins as its next incarnation
        await _until(lambda: old.joined and all(n.view == old.view for n in nodes))
        mid = old.broadcast("from the new incarnation")
        await _until(lambda: all(n.transport.seen.of(2) == mid.seq for n in nodes))
        for node in [*nodes, old]:
            await node.close()
        return _sends(trace, 2), mid.seq, incarnation, old.endpoint.group.incarnation

    sends, seq, before, after = asyncio.run(main())
    assert after == before + 1
    assert seq == 7  # after the six its peers had seen
    assert [s for s, _ in sends] == list(range(1, 8))  # the trace kept 4..6: each id once


def test_what_a_node_has_seen_survives_its_restart(tmp_path: Path) -> None:
    socks = listening_sockets(2)
    table = table_of(socks)
    ckpt = tmp_path / "p0.ckpt"

    async def main() -> tuple[int, int]:
        p1 = Node(_stack(1, 2), table, KEY, listen=socks[1])
        p0 = Node(_stack(0, 2), table, KEY, listen=socks[0].dup(), checkpoint=ckpt)
        for node in (p0, p1):
            await node.start()
        for k in range(5):
            p1.broadcast(k)
        await _until(lambda: p0.stats.delivered == 5)
        await p0.close()
        from_base = Node(_stack(0, 2), table, KEY, checkpoint=ckpt).transport.seen.of(1)
        back = Node(_stack(0, 2), table, KEY, listen=socks[0].dup(), checkpoint=ckpt)
        await back.start()
        p1.broadcast("more")
        await _until(lambda: back.stats.delivered == 6)
        seen = back.transport.seen.of(1)
        await back.close()
        await p1.close()
        return from_base, seen

    assert asyncio.run(main()) == (5, 6)


# -- with real processes -----------------------------------------------------------------


def _sent(g: Group, pid: int) -> int:
    return sum(e.kind == "send" for e in live_events(g.path("trace", pid)))


def _once(g: Group) -> None:
    """No process sent an id twice (with one payload or two)."""
    for pid in range(g.n):
        seqs = [seq for seq, _ in _sends(g.path("trace", pid), pid)]
        assert len(seqs) == len(set(seqs)), f"P{pid} sent an id twice"


def _copy_then_go_on(g: Group, victim: int, copied: int, more: int) -> Path:
    """Copy ``victim``'s checkpoint once it sent ``copied`` messages, kill it once it
    sent ``more``; returns where its latest checkpoint was kept, the old copy put back."""
    ckpt = g.path("checkpoint", victim)
    copy, latest = g.folder / "copy", g.folder / "latest"
    wait_for(lambda: _sent(g, victim) >= copied, 60, f"P{victim} to send {copied}")
    _copy(ckpt, copy)
    wait_for(lambda: _sent(g, victim) >= more, 60, f"P{victim} to send {more}")
    g.kill(victim)
    _copy(ckpt, latest)
    _put_back(copy, ckpt)
    return latest


@pytest.mark.slow
def test_a_plain_process_restored_from_an_old_copy_refuses_then_resumes(tmp_path: Path) -> None:
    count = 60
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--expect",
        str(3 * count),
        "--interval",
        "0.03",
        "--rto",
        "0.2",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        latest = _copy_then_go_on(g, 2, 15, 35)
        g.start(2, ["--checkpoint", str(g.path("checkpoint", 2))])
        proc = g.procs.pop(2)
        assert proc.wait(60) == 2
        last = g.path("log", 2).read_text().strip().splitlines()[-1]
        assert last.startswith("error: P2's checkpoint is behind: P") and "reuse" in last
        _put_back(latest, g.path("checkpoint", 2))
        g.start(2, ["--checkpoint", str(g.path("checkpoint", 2))])
        g.wait_done(120)
        g.stop()
        _once(g)
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr


@pytest.mark.slow
def test_a_member_restored_from_an_old_copy_rejoins_as_a_new_incarnation(tmp_path: Path) -> None:
    count = 60
    args = [
        "--protocol",
        "cbcast",
        "--count",
        str(count),
        "--interval",
        "0.03",
        "--heartbeat",
        "0.1",
        "--suspect-after",
        "1.5",
        "--rto",
        "0.2",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--members", "0,1,2", "--checkpoint", str(g.path("checkpoint", pid))])
        _copy_then_go_on(g, 2, 15, 35)
        # Restarted once the others have excluded it (a trace has no incarnations: a new
        # one admitted in the view that replaces the old would read as a survivor of the
        # old view that missed its last messages). The old copy resumes its old view;
        # without the check it would then rejoin counting on from its copy's 15 sent.
        wait_for(
            lambda: all(
                any(e.kind == "view" and e.dest == (0, 1) for e in live_events(g.path("trace", p)))
                for p in (0, 1)
            ),
            60,
            "P0 and P1 to exclude P2",
        )
        g.start(2, ["--members", "0,1,2", "--checkpoint", str(g.path("checkpoint", 2))])

        def settled() -> bool:
            traces = [live_events(g.path("trace", p)) for p in range(3)]
            views = [[e for e in t if e.kind == "view"] for t in traces]
            if not all(views) or len({v[-1].message.seq for v in views}) != 1:
                return False
            final = views[0][-1]
            sent = {e.message for t in traces for e in t if e.kind == "send"}
            done = {e.message for e in traces[0] if e.kind == "deliver" and e.view == final.view}
            mine = {
                e.message for t in traces for e in t if e.kind == "send" and e.view == final.view
            }
            return final.dest == (0, 1, 2) and len(sent) == 3 * count and mine <= done

        wait_for(settled, 180, "the group to settle with P2's new incarnation")
        g.stop()
        _once(g)
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "rejoins its group as a new incarnation" in g.path("log", 2).read_text()
        stats = json.loads(g.path("stats", 2).read_text())
        assert stats["received_view"] is not None  # it got the state at its new admission
