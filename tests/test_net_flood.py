"""A keyless flood cannot keep a known member out (real OS processes, slow).

A flood generator process (``tests/flood.py``) opens 5,000 connections a second to
a member's port from 127.0.0.1, the address the members use too: half of them say
nothing, half send a CLAIM as the member about to restart, which cannot prove the
key. Meanwhile that member is killed and restarted from its checkpoint. What is
asserted is what happened: the member's link is back (the flooded member
authenticated it), nobody was excluded (every trace holds view 1 only), the
group delivered everything and its traces check clean, and the counts show the
flood was there (accepted, refused, pushed out). The times are printed for the
record (``-s``), not asserted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from mailroom.net import frames as fr
from mailroom.net import handshake as hs

from .net_support import Group, group, live_events, wait_for

pytestmark = pytest.mark.slow

FLOOD = Path(__file__).with_name("flood.py")
RATE = 5000


def _stamps(log: Path, text: str) -> list[float]:
    """When each line of ``log`` that contains ``text`` was logged (its timestamp)."""
    out = []
    for line in log.read_text().splitlines():
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", line)
        if m and text in line:
            out.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp())
    return out


def _settled(g: Group, count: int) -> bool:
    """Every member sent ``count`` and delivered every message sent."""
    traces = [live_events(g.path("trace", p)) for p in range(g.n)]
    sent = {e.message for t in traces for e in t if e.kind == "send"}
    return len(sent) == g.n * count and all(
        {e.message for e in t if e.kind == "deliver"} == sent for t in traces
    )


def _flood(g: Group, target: int, claimer: int) -> tuple[subprocess.Popen[bytes], Path]:
    """The flood at ``target``: every other connection claims to be ``claimer``."""
    digest = fr.table_digest(g.table.entries())
    claim = hs.Claim(claimer, target, digest, False, os.urandom(16), os.urandom(32),
                     os.urandom(32))  # fmt: skip
    out = g.folder / "flood.json"
    port = g.socks[target].getsockname()[1]
    cmd = [sys.executable, str(FLOOD), "--port", str(port), "--rate", str(RATE),
           "--seconds", "90", "--send-hex", claim.frame().hex(), "--every", "2",
           "--out", str(out)]  # fmt: skip
    return subprocess.Popen(cmd), out


def test_a_member_restarted_under_a_keyless_flood_is_back_and_nobody_is_excluded(
    tmp_path: Path,
) -> None:
    count = 300
    args = ["--protocol", "cbcast", "--members", "0,1,2", "--count", str(count),
            "--interval", "0.03", "--heartbeat", "0.5", "--suspect-after", "5", "-v"]  # fmt: skip
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        wait_for(lambda: all(len(_stamps(g.path("log", p), "connected")) >= 4 for p in range(3)),
                 60, "every link up")  # fmt: skip
        flood, counts = _flood(g, target=0, claimer=2)
        try:
            wait_for(lambda: "closing connection from 127.0.0.1" in g.path("log", 0).read_text(),
                     60, "the flood to reach P0")  # fmt: skip
            g.kill(2)
            restarted = time.time()
            g.start(2, ["--checkpoint", str(g.path("checkpoint", 2))])

            def back() -> bool:
                return any(t > restarted for t in _stamps(g.path("log", 0), "P0: P2 connected"))

            wait_for(back, 120, "P0 to take P2's link back")
            wait_for(lambda: _settled(g, count), 180, "the group to deliver everything")
        finally:
            flood.send_signal(signal.SIGTERM)
            flood.wait(30)
        g.stop()
        flooded = json.loads(counts.read_text())
        stats = g.stats(0)
        listening = min(t for t in _stamps(g.path("log", 2), "listening") if t > restarted)
        link = min(t for t in _stamps(g.path("log", 0), "P0: P2 connected") if t > restarted)
        print(f"\nflood {flooded}; P0 {stats}")
        print(
            f"P2 restarted; listening after {listening - restarted:.2f} s, its link to P0 "
            f"back after {link - restarted:.2f} s, {link - listening:.2f} s after listening"
        )

        # Nobody was excluded: every member's trace installs view 1 only.
        for pid in range(3):
            views = [e for e in live_events(g.path("trace", pid)) if e.kind == "view"]
            assert [v.message.seq for v in views] == [1], f"P{pid} installed {views}"
        # The flood was there, was refused or pushed out, and never authenticated.
        assert flooded["opened"] >= RATE  # a second's worth at least
        assert stats["accepted"] >= flooded["opened"] // 4
        assert stats["bad_mac"] >= 1 and stats["evicted"] + stats["timeouts"] >= 1
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
