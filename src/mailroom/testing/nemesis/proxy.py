"""A fault-injecting TCP proxy: slow links without ``tc netem``.

One proxy process runs in each member's namespace and carries that member's
outgoing connections (an nftables redirect sends them to it; see
``network.Network.rules``). For each link it listens on one local port, opens
the real connection from the member's own address (so the peer sees the right
host) with the mark that the redirect skips, and copies bytes both ways. Each
chunk is held back by the link's current ``delay`` plus a uniform ``jitter``,
never overtaking the chunk before it (TCP's order is kept). The settings are a
JSON file, ``{"<peer>": {"delay": s, "jitter": s}}``, re-read when it changes,
so the harness makes a link slow or fast again by rewriting it.

    python -m mailroom.testing.nemesis proxy --source 10.77.0.10 \\
        --config links0.json --link 1=20001=10.77.0.11:7000 --link 2=20002=10.77.0.12:7000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import socket
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mailroom.testing.nemesis.network import PROXY_MARK

#: How often the settings file is looked at (s).
POLL = 0.05
#: Bytes read from a socket at a time.
CHUNK = 1 << 16


class Links:
    """The current delay and jitter of each link, from the settings file."""

    def __init__(self, path: Path, seed: int = 0) -> None:
        self.path = path
        self.settings: dict[str, dict[str, float]] = {}
        self.stamp: float | None = None
        self.random = random.Random(seed)

    def reload(self) -> None:
        try:
            stamp = self.path.stat().st_mtime
        except OSError:
            return
        if stamp == self.stamp:
            return
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return  # half written: read it next time
        if isinstance(data, dict):
            self.stamp = stamp
            self.settings = {str(k): v for k, v in data.items() if isinstance(v, dict)}

    def hold(self, peer: str) -> float:
        """How long the next chunk on the link to ``peer`` waits (s)."""
        s = self.settings.get(peer, {})
        delay = float(s.get("delay", 0.0))
        jitter = float(s.get("jitter", 0.0))
        return max(0.0, delay + (self.random.uniform(0, jitter) if jitter > 0 else 0.0))


async def _copy(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, links: Links, peer: str
) -> None:
    """Copy ``reader`` to ``writer``, each chunk released at its hold time, in order."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def release() -> None:
        while True:
            at, data = await queue.get()
            if not data:
                break
            wait = at - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(data)
            await writer.drain()

    sender = asyncio.create_task(release())
    last = 0.0
    try:
        while True:
            data = await reader.read(CHUNK)
            last = max(last, time.monotonic() + links.hold(peer))
            queue.put_nowait((last, data))
            if not data:
                break
        await sender
    except (OSError, asyncio.IncompleteReadError):
        pass
    finally:
        sender.cancel()
        with contextlib.suppress(Exception):
            writer.close()


async def _serve_link(
    port: int, target: tuple[str, int], source: str, links: Links, peer: str
) -> asyncio.Server:
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, PROXY_MARK)
            sock.bind((source, 0))
            await asyncio.get_running_loop().sock_connect(sock, target)
            up_reader, up_writer = await asyncio.open_connection(sock=sock)
        except OSError:
            sock.close()
            writer.close()
            return
        await asyncio.gather(
            _copy(reader, up_writer, links, peer), _copy(up_reader, writer, links, peer)
        )

    return await asyncio.start_server(accept, "0.0.0.0", port, reuse_address=True)


def parse_link(text: str) -> tuple[str, int, str, int]:
    """``"1=20001=10.77.0.11:7000"`` as (peer, local port, host, port)."""
    peer, _, rest = text.partition("=")
    local, _, remote = rest.partition("=")
    host, _, port = remote.rpartition(":")
    return peer, int(local), host, int(port)


def link_arg(peer: int, local: int, host: str, port: int) -> str:
    """The ``--link`` argument that ``parse_link`` reads."""
    return f"{peer}={local}={host}:{port}"


async def serve(args: argparse.Namespace) -> None:
    links = Links(Path(args.config), args.seed)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    servers = []
    for item in args.link:
        peer, local, host, port = parse_link(item)
        servers.append(await _serve_link(local, (host, port), args.source, links, peer))
    ready = Path(args.config + ".ready")
    ready.write_text("ok")
    while not stop.is_set():
        links.reload()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), POLL)
    for s in servers:
        s.close()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m mailroom.testing.nemesis proxy")
    p.add_argument("--source", required=True, help="the member's own address")
    p.add_argument("--config", required=True, help="JSON settings file, re-read on change")
    p.add_argument(
        "--link",
        action="append",
        default=[],
        metavar="PEER=PORT=HOST:PORT",
        help="carry local PORT to HOST:PORT (the link to member PEER)",
    )
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    asyncio.run(serve(args))
    return 0


def settings_line(delays: dict[int, tuple[float, float]]) -> str:
    """The settings file's text for ``{peer: (delay, jitter)}``."""
    data: dict[str, Any] = {str(p): {"delay": d, "jitter": j} for p, (d, j) in delays.items()}
    return json.dumps(data, sort_keys=True)


__all__ = ["Links", "link_arg", "main", "parse_link", "settings_line"]
