"""A causal chat room: every process runs ``Stack(Reliable, RST)`` over mailroom.net.

Type a line to say it to the room (one causal unicast to each other member), or
``@bob,carol text`` to say it to some members only. Lines are shown in causal
order at every member: a reply is never shown before what it replies to, even
when the network brings it first. While a message waits in the mail room, its
reason is shown once (``mail room: ...``).

    python -m examples.chat --pid 0 --peers examples/chat/peers.toml [--delay carol=3]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket
import sys
from collections.abc import Sequence

from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.core.stack import Stack
from mailroom.net import Node, PeerTable, load_key
from mailroom.protocols import RST, Reliable


def parse_line(line: str, me: int, peers: PeerTable) -> tuple[list[int], str]:
    """Recipients and text of a typed line; LocalError for an unknown name."""
    everyone = [p for p in range(peers.n) if p != me]
    if not line.startswith("@"):
        return everyone, line
    head, _, text = line[1:].partition(" ")
    by_name = {peers.name(p).lower(): p for p in range(peers.n)}
    to = []
    for name in head.split(","):
        key = name.strip().lower()
        if key.isdigit() and int(key) in range(peers.n):
            to.append(int(key))
        elif key in by_name:
            to.append(by_name[key])
        else:
            raise LocalError(f"nobody called {name!r} in this room")
    return [p for p in to if p != me], text.strip()


def show(message: Message, peers: PeerTable) -> str:
    payload = message.payload
    to = ", ".join(peers.name(p) for p in payload["to"])
    return f"{peers.name(message.sender)} -> {to}: {payload['text']}"


def parse_delays(items: Sequence[str], peers: PeerTable) -> dict[int, float]:
    by_name = {peers.name(p).lower(): p for p in range(peers.n)}
    delays = {}
    for item in items:
        who, _, seconds = item.partition("=")
        pid = int(who) if who.isdigit() else by_name.get(who.lower())
        if pid is None:
            raise LocalError(f"--delay {item!r}: nobody called {who!r}")
        delays[pid] = float(seconds)
    return delays


async def chat(args: argparse.Namespace) -> int:
    peers = PeerTable.load(args.peers)
    key = load_key(args.key_file or peers.key_file)
    me, n = args.pid, peers.n
    listen = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    node = Node(
        Stack(Reliable(me, n, rto=0.5, max_rto=2.0), RST(me, n)),
        peers,
        key,
        checkpoint=args.checkpoint,
        delays=parse_delays(args.delay, peers),
        listen=listen,
        on_deliver=lambda m: print(show(m, peers), flush=True),
    )
    print(f"{peers.name(me)} joined the room (P{me} of {n}).", flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)

    async def typing() -> None:
        while line := (await reader.readline()).decode():
            line = line.strip()
            if not line:
                continue
            try:
                to, text = parse_line(line, me, peers)
            except LocalError as exc:
                print(f"! {exc}", flush=True)
                continue
            for p in to:
                node.send({"text": text, "to": to}, to=p)
            print(f"{peers.name(me)} -> {', '.join(peers.name(p) for p in to)}: {text}", flush=True)

    async def mail_room() -> None:
        told: set[str] = set()
        while True:
            for p in node.endpoint.pending():
                note = p.explain()
                if note not in told:
                    told.add(note)
                    print(f"mail room: {note}", flush=True)
            await asyncio.sleep(0.05)

    await node.start()
    tasks = [asyncio.create_task(typing()), asyncio.create_task(mail_room())]
    await stop.wait()
    for t in tasks:
        t.cancel()
    await node.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m examples.chat", description=__doc__.split("\n")[0])
    p.add_argument(
        "--pid", type=int, required=True, help="your id in the room: a key of the peer table"
    )
    p.add_argument(
        "--peers",
        required=True,
        metavar="PEERS.TOML",
        help="the peer table (examples/chat/peers.toml): name and address of every member",
    )
    p.add_argument("--key-file", help="group key file (default: key_file in the peer table)")
    p.add_argument("--checkpoint", help="checkpoint file: resume from it, keep it current")
    p.add_argument(
        "--delay",
        action="append",
        default=[],
        metavar="NAME=SECONDS",
        help="hold what you send to NAME back (a slow link), e.g. carol=3",
    )
    p.add_argument("--listen-fd", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    try:
        return asyncio.run(chat(args))
    except LocalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
