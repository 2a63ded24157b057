"""A keyless flood cannot keep a known member out.

In one process (fast): a flood of idle connections from 127.0.0.2 pushes out its
own connections, not a member's from 127.0.0.1, and the member's link comes up
while the flood runs.

With real OS processes (slow):
A flood generator process (``tests/flood.py``) opens 5,000 connections a second to
a member's port from 127.0.0.1, the address the members use too: half of them say
nothing, half send a CLAIM as the member about to restart, which cannot prove the
key. That member is killed and restarted from its checkpoint once before the flood
(the time without the churn) and once during it. What is asserted is what
happened: the member's link came back while the flood still ran (the flooded
member authenticated it), nobody was excluded (every trace holds view 1 only), the
group delivered everything and its traces check clean, and the counts show the
flood was there (accepted, refused, pushed out). The times are printed for the
record (``-s``, and ``figures.json`` in the test's folder), not asserted.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.stack import Stack
from mailroom.net import Node
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.protocols import CBCAST, Reliable

from .net_support import (
    KEY,
    Group,
    RawClient,
    group,
    listening_sockets,
    live_events,
    table_of,
    wait_for,
)

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
    claim = hs.Claim(claimer, target, digest, False, os.urandom(16), os.urandom(32), os.urandom(32))
    out = g.folder / "flood.json"
    port = g.socks[target].getsockname()[1]
    cmd = [
        sys.executable,
        str(FLOOD),
        "--port",
        str(port),
        "--rate",
        str(RATE),
        "--seconds",
        "90",
        "--send-hex",
        claim.frame().hex(),
        "--every",
        "2",
        "--out",
        str(out),
    ]
    return subprocess.Popen(cmd), out


def _idle_flood(port: int, stop: threading.Event) -> int:
    """Idle connections from 127.0.0.2 to ``port`` until ``stop`` (200 held at most, the
    oldest reset; at most 100,000); how many were opened."""
    held: collections.deque[socket.socket] = collections.deque()
    opened = 0
    while not stop.is_set() and opened < 100_000:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.bind(("127.0.0.2", 0))
        s.setblocking(False)
        if s.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS):
            opened += 1
        held.append(s)
        if len(held) > 200:
            held.popleft().close()
        if opened % 20 == 0:
            time.sleep(0.001)
    for s in held:
        s.close()
    return opened


def test_a_flood_from_one_address_pushes_out_its_own_connections_not_a_members() -> None:
    """A member's connection from 127.0.0.1 waits in its handshake (the member is slow
    to send its CLAIM) while idle connections from 127.0.0.2 turn the pool of 8 over
    more than ten times: it is not pushed out, and its CLAIM is confirmed."""
    socks = listening_sockets(2)
    table = table_of(socks)
    port = socks[0].getsockname()[1]
    stop = threading.Event()

    async def main() -> tuple[bool, int, int, int]:
        stack = Stack(Reliable(0, 2, rto=0.2), CBCAST(0, 2))
        p0 = Node(stack, table, KEY, listen=socks[0], max_unauthenticated=8)
        await p0.start()
        member = await asyncio.to_thread(RawClient, port)  # P1, from 127.0.0.1: GREET read
        flood = asyncio.ensure_future(asyncio.to_thread(_idle_flood, port, stop))
        try:
            await _until(lambda: p0.stats.evicted >= 100)
            await asyncio.to_thread(member.hello, 1, 0, table)
            confirmed = hasattr(member, "seen")
            during = not flood.done()
        finally:
            stop.set()
            opened = await flood
        member.close()
        await p0.close()
        socks[1].close()
        return confirmed and during, opened, p0.stats.evicted, p0.stats.authenticated

    confirmed, opened, evicted, authenticated = asyncio.run(main())
    print(f"\nflood of {opened} idle connections: {evicted} pushed out, the member admitted")
    assert confirmed  # while the flood ran
    assert authenticated == 1  # the member; nothing of the flood
    assert evicted >= 100


async def _until(predicate: Any, timeout: float = 60.0) -> None:
    """Wait for ``predicate``; the timeout is only a safety net."""
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


def _restart(g: Group, pid: int, to: int) -> tuple[float, float, float]:
    """Kill ``pid`` and start it again from its checkpoint; (when it was restarted, when
    it listened again, when its link to ``to`` was back: ``to`` authenticated it)."""
    g.kill(pid)
    restarted = time.time()
    g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])

    def after(text: str) -> list[float]:
        return [t for t in _stamps(g.path("log", pid), text) if t > restarted]

    wait_for(lambda: after(f"P{pid}: connected to P{to}"), 120, f"P{pid}'s link to P{to}")
    listening = min(after("listening on"))
    return restarted, listening, min(after(f"P{pid}: connected to P{to}"))


@pytest.mark.slow
def test_a_member_restarted_under_a_keyless_flood_is_back_and_nobody_is_excluded(
    tmp_path: Path,
) -> None:
    count = 300
    args = [
        "--protocol",
        "cbcast",
        "--members",
        "0,1,2",
        "--count",
        str(count),
        "--interval",
        "0.03",
        "--heartbeat",
        "0.5",
        "--suspect-after",
        "5",
        "-v",
    ]
    with group(tmp_path, 3, args) as g:
        for pid in range(3):
            g.start(pid, ["--checkpoint", str(g.path("checkpoint", pid))])
        wait_for(
            lambda: all(len(_stamps(g.path("log", p), "connected")) >= 4 for p in range(3)),
            60,
            "every link up",
        )
        calm = _restart(g, 2, 0)  # the times without the churn
        flood, counts = _flood(g, target=0, claimer=2)
        try:
            wait_for(
                lambda: "closing connection from 127.0.0.1" in g.path("log", 0).read_text(),
                60,
                "the flood to reach P0",
            )
            churn = _restart(g, 2, 0)
            flooding = flood.poll() is None  # the link came back while the flood ran
            wait_for(lambda: _settled(g, count), 180, "the group to deliver everything")
        finally:
            flood.send_signal(signal.SIGTERM)
            flood.wait(30)
        g.stop()
        flooded = json.loads(counts.read_text())
        stats = g.stats(0)
        figures = {
            "calm": round(calm[2] - calm[0], 3),
            "flood": round(churn[2] - churn[0], 3),
            "calm_after_listening": round(calm[2] - calm[1], 3),
            "flood_after_listening": round(churn[2] - churn[1], 3),
            "load": os.getloadavg()[0],
            "flooder": flooded,
            "P0": stats,
        }
        (tmp_path / "figures.json").write_text(json.dumps(figures))
        print(
            f"\nP2's link to P0 back {figures['calm']} s after its restart without the "
            f"flood, {figures['flood']} s with {RATE} keyless connections/s; "
            f"{figures['calm_after_listening']} s and {figures['flood_after_listening']} s "
            "after it listened "
            f"(load average {figures['load']:.2f}); flood {flooded}; P0 {stats}"
        )

        assert flooding
        # Nobody was excluded, the restarted member included: every trace installs
        # view 1 only.
        for pid in range(3):
            views = [e for e in live_events(g.path("trace", pid)) if e.kind == "view"]
            assert [v.message.seq for v in views] == [1], f"P{pid} installed {views}"
        # The flood was there, was refused or pushed out, and never authenticated.
        assert flooded["opened"] >= RATE  # a second's worth at least
        assert stats["accepted"] >= flooded["opened"] // 4
        assert stats["bad_mac"] >= 1 and stats["evicted"] + stats["timeouts"] >= 1
        checked = g.check()
        assert checked.returncode == 0, checked.stdout + checked.stderr
