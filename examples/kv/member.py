"""Run one member: its node (a safe ``Group`` under a heartbeat detector, synchronous
checkpoints), its replica of a ``ReplDict``, and the HTTP server, until SIGTERM or
SIGINT. A member restarted with its ``--checkpoint`` resumes from it and rejoins the
group as its next incarnation, catching up by state transfer.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import socket

from examples.kv.service import KvService
from mailroom.core.errors import LocalError
from mailroom.net import PeerTable, load_key
from mailroom.net.config import parse_address
from mailroom.net.membership import group_endpoint
from mailroom.replicated import AsyncReplica, HistoryFile, ReplDict


def build(args: argparse.Namespace) -> tuple[AsyncReplica, HistoryFile | None]:
    """The replica of member ``args.pid`` (its node not started yet)."""
    peers = PeerTable.load(args.peers)
    key = load_key(args.key_file or peers.key_file)
    me, n = args.pid, peers.n
    if me not in range(n):
        raise LocalError(f"--pid {me} is not in the peer table (0..{n - 1})")
    endpoint = group_endpoint(
        args.protocol,
        me,
        n,
        members=range(n),
        heartbeat=args.heartbeat,
        suspect_after=args.suspect_after,
        safe=True,
    )
    listen = socket.socket(fileno=args.listen_fd) if args.listen_fd is not None else None
    history = HistoryFile(args.history, sync=args.sync) if args.history else None
    replica = AsyncReplica(
        ReplDict(),
        endpoint,
        peers,
        key,
        safe=True,
        history=history,
        checkpoint=args.checkpoint,
        sync=args.sync,
        rejoin=[p for p in range(n) if p != me],
        listen=listen,
    )
    return replica, history


async def http_server(service: KvService, args: argparse.Namespace) -> asyncio.Server:
    """Listen for HTTP on ``--http`` (or the inherited socket ``--http-fd``)."""
    if args.http_fd is not None:
        sock = socket.socket(fileno=args.http_fd)
        return await service.serve(None, None, sock=sock)
    host, port = parse_address(args.http)
    try:
        return await service.serve(host, port)
    except OSError as exc:
        raise LocalError(f"cannot listen for HTTP on {args.http}: {exc.strerror}") from None


async def run_member(args: argparse.Namespace) -> int:
    """Serve until SIGTERM or SIGINT, then close cleanly."""
    replica, history = build(args)
    service = KvService(
        replica,
        write_timeout=args.write_timeout,
        max_connections=args.max_connections,
        idle_timeout=args.idle_timeout,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await replica.start()
    server = await http_server(service, args)
    try:
        host, port = server.sockets[0].getsockname()[:2]
        print(f"P{args.pid} serves http://{host}:{port}", flush=True)
        await stop.wait()
    finally:
        server.close()
        await replica.close()
        if history is not None:
            history.close()
    return 0


__all__ = ["build", "http_server", "run_member"]
