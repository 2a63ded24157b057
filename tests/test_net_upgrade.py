"""Rolling upgrades: what this release does with the files and the peers of release 0.2.0.

The fixtures in ``tests/data/release-0.2/`` were made by that release itself
(``make_fixtures.py``, run with ``git archive 11eda2d`` on the path): checkpoints
copied from running groups of three (a bare CBCAST stack, a FIFO stack, a CBCAST
group member), what that release restored from each, its traces, and the first
frame each side of its handshake sends. The rule (docs/runtime-operations.md, upgrading):

- a 0.2.0 checkpoint is restored as that release restored it: the same endpoint
  snapshot, counters and application state;
- a 0.2.0 trace has no header: ``mailroom check`` checks the five ordering
  properties and names the one its protocol never promised (total order, for
  CBCAST); with ``--properties`` naming what it promised, it checks clean;
- a peer of 0.2.0 speaks handshake 1, which answered any INTRO with an HMAC under
  the group key: it is refused on both sides with one line that names the release,
  so a group is upgraded from 0.2.0 all at once (stop, upgrade, start from the
  checkpoints); within this release, one member at a time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.net.membership import group_endpoint
from mailroom.protocols import CBCAST, Fifo, Reliable

from .net_support import listening_sockets, table_of

FIXTURES = Path(__file__).parent / "data" / "release-0.2"
#: The key of the fixtures' groups (``make_fixtures.KEY``): no secret.
KEY = b"release-0.2-fixtures-key-0123456"
KINDS = ("cbcast", "fifo", "group")


def _make(kind: str, pid: int) -> Any:
    """A fresh endpoint of ``kind`` for process ``pid`` of three, as the fixtures made."""
    if kind == "cbcast":
        return Stack(Reliable(pid, 3, rto=0.2), CBCAST(pid, 3))
    if kind == "fifo":
        return Stack(Reliable(pid, 3, rto=0.2), Fifo(pid, 3))
    return group_endpoint("cbcast", pid, 3, members=[0, 1, 2], heartbeat=0.05, suspect_after=5.0)


def _handshake() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "handshake.json").read_text())
    return data


@pytest.mark.parametrize("kind", KINDS)
def test_a_checkpoint_of_release_0_2_is_restored_as_that_release_restored_it(
    kind: str, tmp_path: Path
) -> None:
    want = json.loads((FIXTURES / kind / "restored.json").read_text())
    table = PeerTable.of({p: f"127.0.0.1:{9 + p}" for p in range(3)})  # never listened on

    async def restore(pid: int) -> dict[str, Any]:
        for name in (f"p{pid}.ckpt", f"p{pid}.ckpt.log"):
            shutil.copy(FIXTURES / kind / name, tmp_path / name)
        node = Node(_make(kind, pid), table, KEY, checkpoint=tmp_path / f"p{pid}.ckpt")
        got = {
            "snapshot": node.endpoint.snapshot(),
            "sent": node.stats.sent,
            "delivered": node.stats.delivered,
            "app": node.resumed_state,
        }
        await node.close()
        return got

    for pid in range(3):
        got = asyncio.run(restore(pid))
        assert json.loads(json.dumps(got)) == want[str(pid)], f"P{pid}"
        assert got["sent"] > 0 and got["delivered"] > 0


def _check(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "mailroom", "check", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_a_trace_of_release_0_2_checks_what_its_protocol_promised() -> None:
    traces = [str(FIXTURES / "cbcast" / f"p{p}.jsonl") for p in range(3)]
    every = _check(*traces)  # no header: the five ordering properties
    assert every.returncode == 1, every.stdout + every.stderr
    failed = [
        line.split()[0]
        for line in every.stdout.splitlines()
        if line[:1].isalpha() and line.endswith("violating deliveries")
    ]
    assert failed == ["total"], every.stdout
    promised = _check("--properties", "integrity,fifo,causal,liveness", *traces)
    assert promised.returncode == 0, promised.stdout + promised.stderr
    grouped = [str(FIXTURES / "group" / f"p{p}.jsonl") for p in range(3)]
    views = _check(
        "--properties",
        "integrity,fifo,causal,liveness,view_agreement,self_inclusion,same_view,virtual_synchrony",
        *grouped,
    )
    assert views.returncode == 0, views.stdout + views.stderr


def test_a_connector_of_release_0_2_is_refused_with_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """P1 of this release accepts; a process of 0.2.0 connects as P0 and sends its INTRO.
    (A 0.2.0 connector waits for a CHALLENGE and hangs up on the GREET as garbage, so
    its own log names the mismatch; an INTRO sent anyway is named here.)"""
    old = _handshake()
    socks = listening_sockets(3)
    table = table_of(socks)
    port = socks[1].getsockname()[1]
    socks[0].close()  # P0 is the old process: it does not listen here

    def old_connector() -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
            first = fr.FrameReader().feed(c.recv(4096))
            c.sendall(bytes.fromhex(old["intro"]))
            rest = b""
            try:
                while chunk := c.recv(4096):
                    rest += chunk
            except ConnectionError:
                pass
            return bytes([first[0][0]]) + rest

    async def main() -> tuple[bytes, int]:
        node = Node(_make("cbcast", 1), table, KEY, listen=socks[1])
        await node.start()
        got = await asyncio.to_thread(old_connector)
        await node.close()
        return got, node.stats.refused

    with caplog.at_level(logging.WARNING, logger="mailroom.net"):
        got, refused = asyncio.run(main())
    assert got == bytes([fr.GREET])  # a GREET, then the connection closed: no PROOF
    assert refused == 1
    lines = [r.getMessage() for r in caplog.records if hs.OLD_RELEASE in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0], lines


def test_an_acceptor_of_release_0_2_is_refused_and_named_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """P0 of this release connects to P1, which runs 0.2.0: it sends a CHALLENGE; P0
    sends nothing (no CLAIM: no guess to test), hangs up and logs one line, once."""
    old = _handshake()
    socks = listening_sockets(3)
    table = table_of(socks)
    old_listener = socks[1]

    def old_acceptor(times: int) -> list[bytes]:
        heard = []
        old_listener.settimeout(10)
        for _ in range(times):
            conn, _ = old_listener.accept()
            conn.settimeout(10)
            conn.sendall(bytes.fromhex(old["challenge"]))
            got = b""
            try:
                while chunk := conn.recv(4096):
                    got += chunk
            except ConnectionError:
                pass
            conn.close()
            heard.append(got)
        return heard

    async def main() -> tuple[list[bytes], int]:
        node = Node(_make("cbcast", 0), table, KEY, listen=socks[0])
        await node.start()
        heard = await asyncio.to_thread(old_acceptor, 3)  # the link retries
        await node.close()
        return heard, node.stats.refused

    with caplog.at_level(logging.WARNING, logger="mailroom.net"):
        heard, refused = asyncio.run(main())
    assert heard == [b"", b"", b""]
    assert refused >= 3
    lines = [r.getMessage() for r in caplog.records if hs.OLD_RELEASE in r.getMessage()]
    assert len(lines) == 1 and lines[0].startswith("P0: refused P1: P1 speaks"), lines


def test_the_handshake_fixture_is_what_release_0_2_sent() -> None:
    """The fixture's frames are handshake 1's: a 16-byte CHALLENGE, an INTRO from P0 to
    P1 naming the fixture's table (so the tests above replay that release's bytes)."""
    old = _handshake()
    ((kind, body),) = fr.FrameReader().feed(bytes.fromhex(old["challenge"]))
    assert kind == fr.CHALLENGE and len(body) == fr.NONCE_SIZE
    ((kind, body),) = fr.FrameReader().feed(bytes.fromhex(old["intro"]))
    assert kind == fr.INTRO
    table = {int(p): a for p, a in old["table"].items()}
    i = fr.read_intro(body, set(table))
    assert (i.sender, i.dest, i.digest) == (0, 1, fr.table_digest(table))
