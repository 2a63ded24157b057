"""What a running node says about itself: ``node_status(node)`` as JSON data, the text
``mailroom status`` prints, and the status endpoint that serves it.

The status holds the node's group view (members and their incarnations, the
coordinator, where the flush stands, suspicions, whether it waits for a majority),
its links (address, connected, frames waiting), the messages its endpoint holds,
the reliable layer's retransmissions and unacknowledged packets, the size of its
checkpoint files, its delivery lag (``Service.lag``) and its counters. It holds no
payload and nothing of the key.

The status endpoint is HTTP (``GET /status``, JSON) on a loopback address only
(docs/security.md, "Threat model"): it refuses to listen anywhere else and closes
connections that do not come from a loopback address.

``serve`` (which the metrics use too, on any address) holds at most ``MAX_CLIENTS``
connections. One that has not sent its complete request within ``REQUEST_TIMEOUT``
is closed, and when every slot is taken a new connection sheds one still waiting for
its request: the oldest that has begun it and stalled or has been silent for
``SILENT_GRACE``, else the oldest (or, if every slot holds a request being answered,
the new one is answered 503 at once). Idle or slow connections (slowloris) cannot keep
real requests out, even when the attacker reconnects the moment it is shed. A complete
request is always answered; its slot is freed once the answer is sent (or after
``WRITE_TIMEOUT`` if the client does not read it).
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from mailroom._build import BUILD
from mailroom.core.errors import LocalError
from mailroom.core.stack import Stack
from mailroom.net.config import parse_address
from mailroom.net.membership import group_of
from mailroom.net.status_text import render as render
from mailroom.net.store import log_of

if TYPE_CHECKING:
    from mailroom.net.node import Node

#: The longest request head the endpoints read (bytes); a longer one is closed.
MAX_REQUEST = 8192
#: Seconds a connection has to send its complete request head; a slower one is closed,
#: so that idle connections cannot hold the slots.
REQUEST_TIMEOUT = 2.0
#: Seconds an answer may take to be sent (a client that does not read it is cut off).
WRITE_TIMEOUT = 5.0
#: Connections held at once. When all are taken, a new one sheds a connection that has
#: not sent a complete request (``_Slots.admit`` says which), or (none) is answered 503
#: and closed at once.
MAX_CLIENTS = 16
#: Seconds a new connection may stay silent before it may be shed like the stalled ones:
#: until then, a connection that has begun its request and not finished it goes first.
#: An attacker whose shed connections come back at once would otherwise shed the next
#: oldest with each comeback, and reach a real client that connected and has not been
#: given the CPU to send its request yet.
SILENT_GRACE = 0.5


def _layers(endpoint: Any) -> list[Any]:
    """The layers of the endpoint's ordering protocol (of its current view, for a group)."""
    group = group_of(endpoint)
    inner = endpoint if group is None else group.inner
    if inner is None:
        return []
    return list(inner.layers) if isinstance(inner, Stack) else [inner]


def _file_size(path: Any) -> int:
    try:
        return int(path.stat().st_size)
    except OSError:
        return 0


def node_status(node: Node) -> dict[str, Any]:
    """The node's status as JSON data (what ``GET /status`` returns)."""
    now = node.now()
    node.flush()  # the sends this turn holds back count
    ep = node.endpoint
    layers = _layers(ep)
    group = node.service.group_status()
    entries = node.directory.entries()
    links = []
    for peer, link in sorted(node.transport.links().items()):
        conn = link.conn
        up = conn is not None and conn.sealer is not None
        links.append(
            {
                "peer": peer,
                "address": entries.get(peer),
                "connected": up,
                "queued": len(link.outbox),
            }
        )
    path = node.checkpoint_path
    size = 0 if path is None else _file_size(path) + _file_size(log_of(path))
    discovery = node.service.discovery
    return {
        "pid": node.pid,
        "build": BUILD,
        "group": None if group is None else group.data(),
        "summary": None if group is None else group.summary(now),
        "growable": node.directory.growable,
        "size": node.directory.n,
        "addresses": {str(p): a for p, a in entries.items()},
        "links": links,
        "held": int(ep.buffered()),
        "retransmissions": sum(int(getattr(x, "retransmissions", 0)) for x in layers),
        "unacknowledged": sum(int(x.retained()) for x in layers if hasattr(x, "retained")),
        "in_flight": node.in_flight,
        "checkpoint_bytes": size,
        "delivery_lag": round(node.service.lag(now), 3),
        "quorum_lines": node.service.quorum_lines,
        "probes_sent": 0 if discovery is None else discovery.probes_sent,
        "stats": node.stats.to_dict(),
    }


# -- the endpoints ----------------------------------------------------------------------------
Route = Callable[[], tuple[bytes, str]]


def is_loopback(host: str) -> bool:
    """``host`` names only loopback addresses."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


class _Slots:
    """The connections an endpoint holds: those still waiting for their request
    (oldest first: the ones that may be shed) and those whose request is being
    answered."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.waiting: dict[_Connection, None] = {}  # insertion order: oldest first
        self.answering: set[_Connection] = set()

    def admit(self, conn: _Connection, now: float) -> bool:
        """Give ``conn`` a slot (at loop time ``now``), shedding a waiting connection if
        all are taken; False if every slot holds a request being answered.

        The one shed is the oldest that has begun its request and not finished it, or has
        been silent for ``SILENT_GRACE``; failing that (every waiting connection is new
        and silent), the oldest."""
        if len(self.waiting) + len(self.answering) >= self.limit:
            if not self.waiting:
                return False
            stalled = (c for c in self.waiting if c.stalled(now))
            victim = next(stalled, None) or next(iter(self.waiting))
            victim.shed()
        self.waiting[conn] = None
        return True

    def answer(self, conn: _Connection) -> None:
        """``conn`` sent its complete request: it can no longer be shed."""
        self.waiting.pop(conn, None)
        self.answering.add(conn)

    def free(self, conn: _Connection) -> None:
        """``conn`` is closed (or being closed): its slot is free."""
        self.waiting.pop(conn, None)
        self.answering.discard(conn)


class _Connection(asyncio.Protocol):
    """One client of an endpoint: reads one request head (at most ``MAX_REQUEST`` bytes
    within ``REQUEST_TIMEOUT`` seconds), answers it and closes.

    A protocol rather than a stream handler so that a request is known to be complete
    the moment its last byte is read: a connection whose request has arrived is never
    the one shed."""

    def __init__(self, routes: dict[str, Route], slots: _Slots, loopback: bool) -> None:
        self.routes = routes
        self.slots = slots
        self.loopback = loopback
        self.head = bytearray()
        #: When it connected (loop time).
        self.since = 0.0
        self.transport: asyncio.Transport | None = None
        self.timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Refuse a peer off loopback (``loopback``), take a slot or answer 503, and start
        the clock on the request."""
        # A stream transport (uvloop's is one without deriving from asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if self.loopback and not (peer and is_loopback(str(peer[0]))):
            self.transport.abort()
            return
        loop = asyncio.get_running_loop()
        self.since = loop.time()
        if not self.slots.admit(self, self.since):
            self._send(_reply(503, b"busy\n", "text/plain"))
            return
        self.timer = loop.call_later(REQUEST_TIMEOUT, self.shed)

    def stalled(self, now: float) -> bool:
        """Whether it has begun its request and not finished it, or has been silent for
        ``SILENT_GRACE`` as of loop time ``now`` (one to shed before a new silent one)."""
        return bool(self.head) or now - self.since >= SILENT_GRACE

    def data_received(self, data: bytes) -> None:
        """Gather the request head; answer it the moment it is complete (it can no longer
        be shed), or close a head longer than ``MAX_REQUEST``."""
        if self.transport is None or self not in self.slots.waiting:
            return  # answered or shed already: what follows is ignored
        self.head += data
        end = self.head.find(b"\r\n\r\n")
        if end < 0 or end + 4 > MAX_REQUEST:
            if len(self.head) > MAX_REQUEST:
                self.shed()
            return
        self.slots.answer(self)
        self._send(_response(bytes(self.head[: end + 4]), self.routes))

    def eof_received(self) -> bool:
        """The client stopped sending: without a complete request there is nothing to do."""
        if self in self.slots.waiting:  # closed before its request was complete
            self.shed()
        return True  # keep the transport: an answer may still be being sent

    def connection_lost(self, exc: Exception | None) -> None:
        """Free the slot (the answer is sent, or the connection was cut)."""
        if self.timer is not None:
            self.timer.cancel()
        self.slots.free(self)

    def shed(self) -> None:
        """Close the connection now (too slow, too long, or shed for a newer one)."""
        self.slots.free(self)
        if self.timer is not None:
            self.timer.cancel()
        if self.transport is not None:
            self.transport.abort()

    def _send(self, answer: bytes) -> None:
        """Send ``answer`` and close once it is sent, cutting off after ``WRITE_TIMEOUT``."""
        assert self.transport is not None
        if self.timer is not None:
            self.timer.cancel()
        self.transport.write(answer)
        self.transport.close()
        self.timer = asyncio.get_running_loop().call_later(WRITE_TIMEOUT, self.transport.abort)


async def serve(address: str, routes: dict[str, Route], *, loopback: bool) -> asyncio.Server:
    """Serve ``routes`` (path -> (body, content type)) over HTTP/1.0 GET at ``address``;
    ``loopback``: listen and answer on loopback addresses only (LocalError otherwise).

    At most ``MAX_CLIENTS`` connections are held; a connection that has not sent its
    request within ``REQUEST_TIMEOUT`` is closed, and a new one sheds such a connection
    when all slots are taken (``_Slots.admit``, module docstring)."""
    host, port = listen_address(address, loopback=loopback)
    slots = _Slots(MAX_CLIENTS)
    loop = asyncio.get_running_loop()
    try:
        return await loop.create_server(lambda: _Connection(routes, slots, loopback), host, port)
    except OSError as exc:
        raise LocalError(f"cannot listen at {address}: {exc.strerror or exc}") from None


def listen_address(text: str, *, loopback: bool = False) -> tuple[str, int]:
    """``host:port`` to listen at (port 0: any free port); LocalError if it is not one, or
    (``loopback``) if the host is not a loopback address."""
    if text.endswith(":0"):
        host, port = parse_address(text[:-2] + ":1")[0], 0
    else:
        host, port = parse_address(text)
    if loopback and not is_loopback(host):
        raise LocalError(f"the status endpoint listens on a loopback address only, not {host}")
    return host, port


def _response(head: bytes, routes: dict[str, Route]) -> bytes:
    parts = head.split(b"\r\n", 1)[0].split()
    if len(parts) != 3 or parts[0] != b"GET":
        return _reply(405, b"only GET\n", "text/plain")
    route = routes.get(parts[1].decode("latin-1").split("?", 1)[0])
    if route is None:
        return _reply(404, b"not found\n", "text/plain")
    body, kind = route()
    return _reply(200, body, kind)


#: The reason phrase of each status code the endpoints answer.
REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


def _reply(code: int, body: bytes, kind: str) -> bytes:
    """An HTTP/1.0 answer that closes the connection."""
    head = (
        f"HTTP/1.0 {code} {REASONS[code]}\r\nContent-Type: {kind}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + body


def status_routes(node: Node, more: Callable[[], dict[str, Any]] | None = None) -> dict[str, Route]:
    """``/status``: ``node_status`` as JSON (with what ``more`` adds: an application's
    own part, such as a replica's)."""

    def status() -> tuple[bytes, str]:
        data = node_status(node) if more is None else {**node_status(node), **more()}
        return json.dumps(data).encode(), "application/json"

    return {"/status": status}


__all__ = ["is_loopback", "listen_address", "node_status", "render", "serve", "status_routes"]
