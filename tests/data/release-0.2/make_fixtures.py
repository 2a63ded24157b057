"""Makes the fixtures of release 0.2.0 (main at commit 11eda2d) that
``tests/test_net_upgrade.py`` reads. Run it with that release on the path, from the
repository's root:

    rm -rf /tmp/r02 && mkdir /tmp/r02 && git archive 11eda2d src | tar -x -C /tmp/r02
    PYTHONPATH=/tmp/r02/src python tests/data/release-0.2/make_fixtures.py tests/data/release-0.2

For each kind of process (``KINDS``) it runs a group of three nodes of that release
in one process over 127.0.0.1, each with a checkpoint and a trace; each node
broadcasts, and once everything is delivered the three nodes' files are copied
while they run (a base and a log of steps, as a kill would leave them) into
``KIND/`` (``p0.ckpt``, ``p0.ckpt.log``, ``p0.jsonl``, ...). ``KIND/restored.json``
says what that release restores from each copy: the endpoint's snapshot, the
counters and the application's state. ``handshake.json`` holds the first frame
each side of that release's handshake sends (an acceptor's CHALLENGE, a
connector's INTRO), for the peer table it names. It refuses to run under a later
release (one with ``mailroom.net.handshake``). The group key is ``KEY``: the
fixtures are no secret.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import mailroom
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable
from mailroom.net.membership import group_endpoint
from mailroom.protocols import CBCAST, Fifo, Reliable

KEY = b"release-0.2-fixtures-key-0123456"
KINDS = ("cbcast", "fifo", "group")
BROADCASTS = 4


def make(kind: str, pid: int) -> Any:
    """A fresh endpoint of ``kind`` for process ``pid`` of three."""
    if kind == "cbcast":
        return Stack(Reliable(pid, 3, rto=0.2), CBCAST(pid, 3))
    if kind == "fifo":
        return Stack(Reliable(pid, 3, rto=0.2), Fifo(pid, 3))
    return group_endpoint("cbcast", pid, 3, members=[0, 1, 2], heartbeat=0.05, suspect_after=5.0)


def sockets() -> tuple[list[socket.socket], PeerTable]:
    socks = []
    for _ in range(3):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        socks.append(s)
    table = PeerTable.of({p: f"127.0.0.1:{s.getsockname()[1]}" for p, s in enumerate(socks)})
    return socks, table


async def until(predicate: Any, seconds: float = 30.0) -> None:
    async with asyncio.timeout(seconds):
        while not predicate():
            await asyncio.sleep(0.01)


async def run_kind(kind: str, out: Path, scratch: Path) -> None:
    socks, table = sockets()
    delivered: dict[int, list[Any]] = {p: [] for p in range(3)}
    nodes = []
    for p in range(3):
        hooks: dict[str, Any] = {}
        if kind == "group":
            hooks = {
                "app_state": lambda p=p: {"delivered": len(delivered[p])},
                "get_state": lambda view, p=p: len(delivered[p]),
            }
        node = Node(
            make(kind, p),
            table,
            KEY,
            listen=socks[p],
            checkpoint=scratch / f"p{p}.ckpt",
            trace=scratch / f"p{p}.jsonl",
            on_deliver=lambda m, p=p: delivered[p].append(m.payload),
            **hooks,
        )
        nodes.append(node)
    for node in nodes:
        await node.start()
    for k in range(BROADCASTS):
        for p, node in enumerate(nodes):
            if kind == "fifo":
                node.send(f"P{p} to P{(p + 1) % 3}: {k}", to=(p + 1) % 3)
            node.broadcast(f"P{p} says {k}")
    await until(
        lambda: all(
            len(d) == 3 * BROADCASTS + (BROADCASTS if kind == "fifo" else 0)
            for d in delivered.values()
        )
    )
    await asyncio.sleep(0.5)  # acknowledgements and heartbeats: steps in the logs
    folder = out / kind
    folder.mkdir(parents=True, exist_ok=True)
    for p in range(3):  # while they run: a base and a log, as a kill leaves them
        for name in (f"p{p}.ckpt", f"p{p}.ckpt.log", f"p{p}.jsonl"):
            shutil.copy(scratch / name, folder / name)
    for node in nodes:
        await node.close()
    restored = {}
    for p in range(3):  # restored from a copy of the copy (closing writes a new base)
        for name in (f"p{p}.ckpt", f"p{p}.ckpt.log"):
            shutil.copy(folder / name, scratch / f"again-{name}")
        again = Node(make(kind, p), table, KEY, checkpoint=scratch / f"again-p{p}.ckpt")
        stats = again.stats
        restored[str(p)] = {
            "snapshot": again.endpoint.snapshot(),
            "sent": stats.sent,
            "delivered": stats.delivered,
            "app": again.resumed_state,
        }
        await again.close()
    (folder / "restored.json").write_text(json.dumps(restored, indent=1, sort_keys=True) + "\n")
    for s in socks:
        s.close()


async def capture_handshake(out: Path) -> None:
    """An acceptor's CHALLENGE and a connector's INTRO, as that release sends them."""
    socks, table = sockets()
    node = Node(make("cbcast", 0), table, KEY, listen=socks[0])
    await node.start()
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", socks[0].getsockname()[1])
    challenge = await reader.readexactly(5 + 16)
    writer.close()
    socks[1].setblocking(False)
    conn, _ = await loop.sock_accept(socks[1])  # P0's link to P1: it waits for a CHALLENGE
    await loop.sock_sendall(conn, challenge[:5] + b"n" * 16)
    intro = b""
    while len(intro) < 5 + 38:
        intro += await loop.sock_recv(conn, 64)
    conn.close()
    await node.close()
    data = {
        "table": table.entries(),
        "challenge": challenge.hex(),
        "intro": intro.hex(),
        "intro_from": 0,
        "intro_to": 1,
    }
    (out / "handshake.json").write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    for s in socks:
        s.close()


async def main(out: Path) -> None:
    scratch = out / "scratch"
    for kind in KINDS:
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir(parents=True)
        await run_kind(kind, out, scratch)
    shutil.rmtree(scratch)
    await capture_handshake(out)


if __name__ == "__main__":
    if importlib.util.find_spec("mailroom.net.handshake") is not None:
        sys.exit(f"run this with release 0.2.0 (11eda2d) on the path, not {mailroom.__file__}")
    asyncio.run(main(Path(sys.argv[1])))
