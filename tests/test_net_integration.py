"""mailroom.net with real OS processes on 127.0.0.1.

- causal broadcast (Stack(Reliable, CBCAST)) among 3 processes: the merged
  traces pass the reference checkers for integrity, FIFO, causal and liveness;
- total order (Stack(Reliable, Skeen)) among 4 processes: integrity, total
  and liveness;
- a process killed (SIGKILL) mid-run and restarted from its checkpoint: nothing
  lost, nothing delivered twice, still causal;
- frames a test forges or replays at a running process are rejected and
  counted, and the run still completes.

Every run is bounded: a handful of messages, timeouts only as safety nets, and
every process killed in ``finally``.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mailroom.core.codec import encode
from mailroom.net import frames as fr
from mailroom.protocols import CBCASTPacket, ReliableAck, ReliablePacket
from mailroom.trace import check

from .net_support import RawClient, group, wait_for

pytestmark = pytest.mark.slow


def test_causal_broadcast_among_three_processes(tmp_path: Path) -> None:
    count = 25
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
            "0.002",
        ],
    ) as g:
        g.start_all()
        g.wait_done(60)
        g.stop()
        report = check(g.trace(), ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
        assert sum(e.kind == "deliver" for e in g.trace()) == 9 * count
        assert all(g.stats(pid)["bad_mac"] == 0 for pid in range(3))
        # The traces say what wrote them: `mailroom check` with no options checks what
        # CBCAST promises (not total order), and finds it kept.
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
        assert "promises integrity, fifo, causal, liveness" in checked.stdout


def test_total_order_among_four_processes(tmp_path: Path) -> None:
    count = 15
    with group(
        tmp_path,
        4,
        [
            "--protocol",
            "skeen",
            "--count",
            str(count),
            "--expect",
            str(4 * count),
            "--interval",
            "0.002",
        ],
    ) as g:
        g.start_all()
        g.wait_done(60)
        g.stop()
        report = check(g.trace(), ["integrity", "total", "liveness"])
        assert report.ok, report.summary()
        assert sum(e.kind == "deliver" for e in g.trace()) == 16 * count


def test_killed_process_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    count = 40
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
            "0.02",
            "--rto",
            "0.2",
        ],
    ) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        # Kill P1 once it has delivered a few messages, while everyone is still sending.
        wait_for(lambda: _delivered(g.path("trace", 1)) >= 10, 30, "P1 to deliver 10 messages")
        g.kill(1)
        assert not g.path("done", 1).exists()
        g.start(1, ["--checkpoint", str(g.path("checkpoint", 1))])
        g.wait_done(60)
        g.stop()
        events = g.trace()
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
        sends = [e for e in events if e.kind == "send"]
        assert len(sends) == 3 * count  # P1 did not send again what it had sent
        assert sum(e.kind == "deliver" for e in events) == 9 * count
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr


def _delivered(path: Path) -> int:
    if not path.exists():
        return 0
    return path.read_text().count('"kind":"deliver"')


def test_forged_and_replayed_frames_are_rejected(tmp_path: Path) -> None:
    count = 30
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
            "0.3",
            "--rto",
            "0.2",
        ],
    ) as g:
        g.start_all()
        port = g.socks[0].getsockname()[1]
        # Attack once the group is up: a member's genuine reconnection closes any older
        # connection of the same pid, which would race with the attacks below.
        wait_for(lambda: _delivered(g.path("trace", 0)) >= 1, 30, "P0 to deliver")
        # A forged message: a packet P0 would deliver, MAC'd with the wrong key.
        fake = CBCASTPacket(2, (0, 0, 1), "forged")
        forged = ReliablePacket(2, 0, 1, 1, 0, fake)
        c = RawClient(port)
        c.hello(2, 0, g.table)
        bad = fr.Sealer.keyed(b"not-this-connection's-session-key", encrypt=False)
        c.send(bad.seal(encode(forged), None, fr.BROADCAST))
        assert c.closed_by_peer()
        # Each attack as P2 closes the genuine P2's link, which comes back 50 ms later
        # and closes the attacker's connection in turn: let it come back first.
        time.sleep(0.3)
        # A replay: a valid frame (a harmless ack), then the same bytes again.
        c = RawClient(port)
        sealer = c.hello(2, 0, g.table)
        frame = sealer.seal(encode(ReliableAck(2, 0, 0)), None, fr.CONTROL)
        c.send(frame + frame)
        assert c.closed_by_peer()
        # Replayed on a new connection: the session key differs, so the MAC fails.
        time.sleep(0.3)
        c = RawClient(port)
        c.hello(2, 0, g.table)
        c.send(frame)
        assert c.closed_by_peer()
        # Garbage, and a pid that is not in the table.
        c = RawClient(port)
        c.send(b"\x00\x00\x00\x09hello there")
        assert c.closed_by_peer()
        c = RawClient(port)
        c.hello(7, 0, g.table)
        assert c.closed_by_peer()
        g.wait_done(60)
        g.stop()
        stats = g.stats(0)
        assert stats["bad_mac"] == 2
        assert stats["replayed"] == 1
        assert stats["garbage"] == 1
        assert stats["unknown_peer"] == 1
        events = g.trace()
        assert not any(e.payload == "forged" for e in events)
        report = check(events, ["integrity", "fifo", "causal", "liveness"])
        assert report.ok, report.summary()
