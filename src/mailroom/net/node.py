"""The asyncio runtime: one endpoint (or Stack) per process, its peers over TCP.

Why TCP and not UDP: TCP already gives what the layers above cannot do without
(congestion and flow control, framing of large packets, no IP fragmentation),
and the kernel batches small writes, which matters more to a Python process
than the cost of a connection. TCP does not make the group reliable, though:
a connection that breaks loses what was in flight, and a process that crashes
loses what it had not written down. That is the ``Reliable`` layer's job (it
retransmits until acknowledged) together with checkpoints, so run
``Stack(Reliable(...), ...)`` when nothing may be lost.

Rules, in words:

- Each process listens on its peer-table address and keeps one outgoing
  connection to every other peer, reconnecting (with a short, growing pause)
  whenever it breaks or the peer is not up yet. It sends only on connections it
  opened and receives only on connections it accepted (see ``frames``).
- Every step of the endpoint (a send by the application, a batch of frames that
  arrived together, a timer) is handled the same way: persist, then act. The
  step's trace events and its inputs (in the checkpoint's log) are written
  first; only then do the ``Transmit`` packets go on the wire (or, to itself,
  back into the endpoint) and the ``Deliver`` messages reach the application
  (a callback, or ``deliveries()``, an async iterator). Timers: ``tick(now)``
  runs at ``next_deadline()`` on the event loop's clock.
- A write that fails (``OSError``: no space, too many open files...) acts on
  nothing: the step waits, written nowhere and seen by no one, and the node
  stalls: it stops reading its connections and running its timer,
  ``can_send()`` is False (a send raises ``Busy``), and it retries the write
  with a growing pause (``IO_RETRY`` doubling to 1 s), then acts. A process
  that dies meanwhile restarts from its checkpoint, where the step is not:
  its packets were never acknowledged, so their senders send them again.
- At most ``MAX_UNAUTHENTICATED`` accepted connections may be in their
  handshake at once; another one closes the oldest (counted in ``evicted``).
  Before the handshake completes a connection may not send a frame longer
  than the handshake's (``frames.PREAUTH_LIMIT``). Rejected connections are
  logged at most ``LOG_BURST`` times per ``LOG_WINDOW`` seconds, then counted.
- The reliable layer keeps what it sends until acknowledged; a send while it
  keeps ``max_retained`` packets (a peer down for long) raises ``Busy``.
- Frames that are garbage, forged (bad MAC), replayed, from an unknown pid or
  from a process whose peer-table entry does not match, and connections that
  do not authenticate within ``HANDSHAKE_TIMEOUT``, are dropped and counted
  in ``stats``; the connection they came on is closed with a logged reason. The
  endpoint and the other connections are untouched. A frame is all or nothing:
  every packet of a BATCH is decoded, and its header's message id checked,
  before any reaches the endpoint. A packet that decodes but that the endpoint
  refuses (``RemoteError``) is dropped and counted; the connection stays up.
- Frames to a peer that is not connected wait in its outbox (at most
  ``outbox_limit``; beyond that the oldest are dropped and counted, which the
  reliable layer repairs). A group endpoint repairs losses itself (its views run
  over ``Reliable``, its control packets are resent), and heartbeats to a dead
  member are worthless once late, so its default is a small ``GROUP_OUTBOX``.
  ``delays`` holds frames to a peer back for a while, to stage a slow link.
- A group endpoint's view changes are steps like the others: the "view" trace
  event is written with the step, then the ``ViewChange`` reaches the
  application at its place among the deliveries; a ``StateRequest`` is answered
  right after (the application's state is then exactly what was delivered
  before the view) by a step of its own, whose input (the state) is logged.
  Suspicions, leaves and joins from the host are logged inputs too, so a
  restart replays them; a restart that finds a state requested but not
  provided provides it at start. Frames for a member that left are dropped.
- Of the reliable layer's acknowledgements to one peer produced in one step,
  only the last is sent: they are cumulative, so it says all the others say.
- The packets for one peer that pile up while the event loop is busy go out in
  one write, as one ``BATCH`` frame (one counter, one MAC; see ``frames``).
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import logging
import math
import os
import socket
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import (
    Action,
    Backpressure,
    Deliver,
    Excluded,
    Stable,
    StateRequest,
    Transmit,
    View,
    ViewChange,
)
from mailroom.core.codec import decode, encode, value_size
from mailroom.core.endpoint import (
    Endpoint,
    broadcast_batch,
    capabilities,
    consumer,
    receive_batch,
    require,
)
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload, check_payload
from mailroom.core.registry import restore_endpoint
from mailroom.core.stack import Stack
from mailroom.core.wire import carried_message_id, carried_message_ids, plain, unplain
from mailroom.net import frames as fr
from mailroom.net.config import PeerTable
from mailroom.net.membership import group_of, is_member, rejoined
from mailroom.net.store import FORMAT, CheckpointLog, Saved, TraceFile, read_checkpoint
from mailroom.trace.events import Event

log = logging.getLogger("mailroom.net")

#: Seconds an accepted connection has to authenticate before it is closed.
HANDSHAKE_TIMEOUT = 10.0
#: Accepted connections allowed in their handshake at once; one more closes the oldest.
MAX_UNAUTHENTICATED = 64
#: Default bound on the packets the reliable layer keeps for unacknowledged sends.
MAX_RETAINED = 4096
#: First pause before retrying a failed checkpoint or trace write (doubles up to 1 s).
IO_RETRY = 0.05
#: Bound on the runtime's per-message tables (message ids awaiting their trace event).
ID_TABLE_LIMIT = 1 << 16
#: Default outbox bound per peer (frames waiting for a connection).
OUTBOX_LIMIT = 100_000
#: Default outbox bound per peer for group endpoints: a dead member costs no more.
GROUP_OUTBOX = 1024
#: Rejected connections logged per window; the rest are counted and summed up.
LOG_BURST = 10
LOG_WINDOW = 10.0


class Busy(LocalError):
    """The node cannot take a send now (window full, mail room full, or its files
    cannot be written); ``await node.wait_can_send()`` returns when it can."""


class QuietLog:
    """A rate-limited logger: ``LOG_BURST`` messages per ``LOG_WINDOW``, then a count."""

    def __init__(self) -> None:
        self.start = -LOG_WINDOW
        self.count = 0
        self.suppressed = 0

    def __call__(self, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.start >= LOG_WINDOW:
            if self.suppressed:
                log.warning("%d more such messages were not logged", self.suppressed)
            self.start, self.count, self.suppressed = now, 0, 0
        if self.count < LOG_BURST:
            self.count += 1
            log.log(level, msg, *args)
        else:
            self.suppressed += 1


@attrs.define
class NetStats:
    """Counters of one process's runtime (``frames_in`` / ``frames_out`` count packets,
    whether they travelled alone in a DATA frame or with others in a BATCH frame)."""

    frames_in: int = 0
    frames_out: int = 0
    sent: int = 0
    delivered: int = 0
    garbage: int = 0
    bad_mac: int = 0
    replayed: int = 0
    unknown_peer: int = 0
    refused: int = 0
    timeouts: int = 0
    remote_errors: int = 0
    outbox_dropped: int = 0
    accepted: int = 0
    connected: int = 0
    closed: int = 0
    evicted: int = 0
    io_errors: int = 0

    def to_dict(self) -> dict[str, int]:
        return attrs.asdict(self)

    @property
    def rejected(self) -> int:
        """Frames or connections refused for security or garbage."""
        return (
            self.garbage
            + self.bad_mac
            + self.replayed
            + self.unknown_peer
            + self.refused
            + self.timeouts
            + self.evicted
        )


class _Inbound(asyncio.Protocol):
    """An accepted connection: CHALLENGE, INTRO, PROOF, HELLO, then data frames."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.reader = fr.FrameReader(fr.PREAUTH_LIMIT)
        self.nonce = os.urandom(fr.NONCE_SIZE)
        self.intro: fr.Intro | None = None
        self.opener: fr.Opener | None = None
        self.peer = -1
        self.transport: asyncio.Transport | None = None
        self.remote_host = ""
        self.timeout: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        node = self.node
        self.transport = transport
        name = transport.get_extra_info("peername")
        self.remote_host = name[0] if name else ""
        node.stats.accepted += 1
        node._inbound.add(self)
        waiting = node._unauthenticated
        waiting[self] = None
        if len(waiting) > node.max_unauthenticated:
            oldest = next(iter(waiting))
            oldest.reject(fr.FrameError("evicted", "too many connections in their handshake"))
        if self.transport.is_closing():
            return
        transport.write(fr.frame(fr.CHALLENGE, self.nonce))
        loop = asyncio.get_running_loop()
        self.timeout = loop.call_later(node.handshake_timeout(), self._no_hello)
        if node._stalled is not None:
            transport.pause_reading()

    def _no_hello(self) -> None:
        if self.opener is None:
            limit = self.node.handshake_timeout()
            self.reject(fr.FrameError("timeouts", f"no HELLO within {limit} s"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.node._inbound.discard(self)
        self.node._unauthenticated.pop(self, None)
        if self.timeout is not None:
            self.timeout.cancel()

    def data_received(self, data: bytes) -> None:
        node = self.node
        batch: list[tuple[object, fr.Data]] = []
        try:
            for kind, body in self.reader.frames(data):
                if self.opener is None:
                    self._handshake(kind, body)
                    continue
                if kind == fr.DATA:
                    items = [self.opener.open(body)]
                elif kind == fr.BATCH:
                    items = self.opener.open_many(body)
                else:
                    raise fr.FrameError("garbage", f"frame type {kind} after the handshake")
                batch += self._decode_all(items)  # the whole frame, or none of it
        except fr.FrameError as exc:
            self.reject(exc)
        finally:
            if batch:
                node._received(self.peer, batch)

    def _decode_all(self, items: list[fr.Data]) -> list[tuple[object, fr.Data]]:
        """Every packet of one frame decoded and its header's message id checked against
        the packet, or FrameError."""
        n = self.node.peers.n
        out: list[tuple[object, fr.Data]] = []
        for item in items:
            mid = item.message_id
            if mid is not None and not (0 <= mid.origin < n and mid.seq >= 1):
                raise fr.FrameError("garbage", f"frame names impossible message id {mid}")
            try:
                packet = decode(item.packet)
                carried = carried_message_id(packet)
            except RemoteError as exc:
                raise fr.FrameError("garbage", f"undecodable packet: {exc}") from None
            if carried != mid:  # the packet, not the header, says what it carries
                raise fr.FrameError(
                    "garbage", f"frame names message id {mid}, its packet carries {carried}"
                )
            out.append((packet, item))
        self.node.stats.frames_in += len(out)
        return out

    def _handshake(self, kind: int, body: bytes) -> None:
        node = self.node
        if self.intro is None:
            if kind != fr.INTRO:
                raise fr.FrameError("garbage", f"expected INTRO, got frame type {kind}")
            i = fr.read_intro(body, set(node.peers.addresses))
            if i.dest != node.pid:
                raise fr.FrameError("refused", f"P{i.sender} meant to reach P{i.dest}, not us")
            if i.digest != node.digest:
                raise fr.FrameError("refused", f"P{i.sender} has a different peer table")
            if i.encrypt != node.encrypt:
                raise fr.FrameError(
                    "refused", f"P{i.sender} {'does' if i.encrypt else 'does not'} encrypt"
                )
            if not node._host_matches(i.sender, self.remote_host):
                raise fr.FrameError(
                    "refused",
                    f"P{i.sender}'s table entry is {node.peers.entries()[i.sender]}, "
                    f"but it connects from {self.remote_host}",
                )
            self.intro = i
            assert self.transport is not None
            self.transport.write(fr.proof(node.key, self.nonce, i))
            return
        if kind != fr.HELLO:
            raise fr.FrameError("garbage", f"expected HELLO, got frame type {kind}")
        i = self.intro
        fr.check_hello(node.key, self.nonce, i, body)
        self.peer = i.sender
        self.opener = fr.Opener(node.key, self.nonce, i)
        self.reader.limit = fr.MAX_FRAME
        node._unauthenticated.pop(self, None)
        for other in [c for c in node._inbound if c is not self and c.peer == i.sender]:
            other.close()  # the peer restarted or reconnected: the old connection is dead

    def reject(self, exc: fr.FrameError) -> None:
        node = self.node
        stats = node.stats
        setattr(stats, exc.reason, getattr(stats, exc.reason) + 1)
        who = f"P{self.peer}" if self.peer >= 0 else self.remote_host
        node._quiet(
            logging.WARNING,
            "P%d: closing connection from %s: %s: %s",
            node.pid,
            who,
            exc.reason,
            exc,
        )
        self.close()

    def close(self) -> None:
        self.node._unauthenticated.pop(self, None)
        if self.transport is not None and not self.transport.is_closing():
            self.node.stats.closed += 1
            self.transport.close()


class _Outbound(asyncio.Protocol):
    """A connection this process opened to send to ``link.peer``."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.reader = fr.FrameReader(fr.PREAUTH_LIMIT)
        self.transport: asyncio.Transport | None = None
        self.intro: fr.Intro | None = None
        self.challenge = b""
        self.sealer: fr.Sealer | None = None
        self.timeout: asyncio.TimerHandle | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        limit = self.link.node.handshake_timeout()
        self.timeout = asyncio.get_running_loop().call_later(limit, self._expire)

    def _expire(self) -> None:
        """An acceptor that does not complete the handshake in time (a squatter that
        says nothing) is left, so the link reconnects to whoever holds the address next."""
        if self.sealer is None and self.transport is not None:
            node = self.link.node
            node.stats.timeouts += 1
            node._quiet(logging.WARNING, "P%d: P%d did not complete the handshake within "
                        "%s s", node.pid, self.link.peer, node.handshake_timeout())  # fmt: skip
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        node = self.link.node
        peer = self.link.peer
        assert self.transport is not None
        try:
            for kind, body in self.reader.frames(data):
                if self.sealer is not None:
                    raise fr.FrameError("garbage", f"P{peer} sent frame type {kind}")
                if self.intro is None:
                    if kind != fr.CHALLENGE or len(body) != fr.NONCE_SIZE:
                        raise fr.FrameError("garbage", f"P{peer} sent frame type {kind}")
                    self.challenge = body
                    nonce = os.urandom(fr.NONCE_SIZE)
                    self.intro = fr.Intro(node.pid, peer, node.digest, node.encrypt, nonce)
                    self.transport.write(fr.intro(node.pid, peer, node.digest, nonce, node.encrypt))
                    continue
                if kind != fr.PROOF:
                    raise fr.FrameError("garbage", f"P{peer} sent frame type {kind}")
                fr.check_proof(node.key, self.challenge, self.intro, body)
                self.transport.write(fr.hello(node.key, self.challenge, self.intro))
                self.sealer = fr.Sealer(node.key, self.challenge, self.intro)
                self.link.ready(self)
        except fr.FrameError as exc:
            setattr(node.stats, exc.reason, getattr(node.stats, exc.reason) + 1)
            node._quiet(logging.WARNING, "P%d: closing connection to P%d: %s", node.pid, peer, exc)
            self.transport.close()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.link.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.timeout is not None:
            self.timeout.cancel()
        if not self.lost.done():
            self.lost.set_result(None)


class _Link:
    """The outgoing side to one peer: its outbox and the task that keeps it connected."""

    def __init__(self, node: Node, peer: int) -> None:
        self.node = node
        self.peer = peer
        self.outbox: collections.deque[tuple[bytes, MessageId | None, int]] = collections.deque()
        self.conn: _Outbound | None = None
        self.delay = node.delays.get(peer, 0.0)
        self.task: asyncio.Task[None] | None = None
        self._flush_pending = False

    def push(self, packet: bytes, mid: MessageId | None, carries: int) -> None:
        if self.delay > 0:
            loop = asyncio.get_running_loop()
            loop.call_later(self.delay, self._push_now, packet, mid, carries)
        else:
            self._push_now(packet, mid, carries)

    def _push_now(self, packet: bytes, mid: MessageId | None, carries: int) -> None:
        self.outbox.append((packet, mid, carries))
        if len(self.outbox) > self.node.outbox_limit:
            self.outbox.popleft()
            self.node.stats.outbox_dropped += 1
        if self.delay > 0:
            self.flush_soon()

    def ready(self, conn: _Outbound) -> None:
        self.conn = conn
        self.node.stats.connected += 1
        log.info("P%d: connected to P%d", self.node.pid, self.peer)
        self.flush()

    def flush_soon(self) -> None:
        """Flush once the current callback is over: one write for a burst of steps."""
        if not self._flush_pending:
            self._flush_pending = True
            asyncio.get_running_loop().call_soon(self.flush)

    def flush(self) -> None:
        self._flush_pending = False
        conn = self.conn
        if conn is None or conn.sealer is None or conn.paused or conn.transport is None:
            return
        if conn.transport.is_closing():
            return
        if not self.outbox:
            return
        items = list(self.outbox)
        self.outbox.clear()
        self.node.stats.frames_out += len(items)
        conn.transport.write(conn.sealer.seal_many(items))  # one MAC for the whole write

    async def run(self) -> None:
        host, port = self.node.peers.addresses[self.peer]
        loop = asyncio.get_running_loop()
        pause = 0.05
        while True:
            try:
                _, proto = await loop.create_connection(lambda: _Outbound(self), host, port)
            except OSError:
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            assert isinstance(proto, _Outbound)
            try:
                await proto.lost
            finally:
                if proto.transport is not None:
                    proto.transport.close()
                if self.conn is proto:
                    self.conn = None
            # A peer that hangs up before the handshake completes is refusing us:
            # back off as if it were down. Otherwise come back at once.
            pause = 0.05 if proto.sealer is not None else min(pause * 2, 1.0)
            await asyncio.sleep(pause)


#: What a step hands to the application, in stream order.
Handed = Message | ViewChange | StateRequest | Excluded


@attrs.define
class _Effect:
    """One step's consequences, held until the step is written down: then acted on."""

    ops: list[Any]
    lines: list[bytes]
    sends: list[tuple[int, bytes, MessageId | None]]
    loopback: list[object]
    #: what the application gets, in order: messages, view changes, state requests
    delivered: list[Handed]
    sent: int
    delivered_count: int
    stable: list[tuple[MessageId, ...]] = attrs.Factory(list)


#: Payload bytes (an upper estimate) that one part of a batch may carry: half a frame,
#: the rest is room for the layers' headers.
FRAME_PART = fr.MAX_FRAME // 2


def _size_estimate(payload: Payload) -> int:
    """An upper bound on ``payload``'s encoded bytes, cheap for strings and ints."""
    if type(payload) is str:
        return (len(payload) if payload.isascii() else 4 * len(payload)) + 10
    if type(payload) is int:
        return 11
    return value_size(payload)


def frame_parts(payloads: list[Payload], limit: int = FRAME_PART) -> list[list[Payload]]:
    """``payloads`` cut into consecutive parts of at most ``limit`` estimated bytes each
    (a payload larger than that alone is a part of its own)."""
    parts: list[list[Payload]] = [[]]
    size = 0
    for payload in payloads:
        cost = _size_estimate(payload)
        if parts[-1] and size + cost > limit:
            parts.append([])
            size = 0
        parts[-1].append(payload)
        size += cost
    return parts


def _received_ids(packet: object, first: MessageId) -> tuple[MessageId, ...]:
    """The messages a received packet carries (a batch: several), for the trace."""
    try:
        return carried_message_ids(packet) or (first,)
    except RemoteError:
        return (first,)


def stack_names(endpoint: Any) -> list[str]:
    """The protocol stack of ``endpoint``, bottom first: ``["Reliable", "CBCAST"]``."""
    if isinstance(endpoint, Stack):
        return [str(type(x).protocol) for x in endpoint.layers]
    return [str(type(endpoint).protocol)]


def _apply(endpoint: Any, op: Any) -> list[Action]:
    """Run one logged input on ``endpoint`` (a checkpoint log's replay). Inputs: ``["r",
    base64 packet]`` received, ``["b", payload]`` broadcast, ``["m", [payloads]]``
    broadcast as a batch, ``["s", payload, to]``
    sent, ``["t", now]`` tick, ``["c", [origin, seq] or None]`` consumed; for group
    endpoints ``["p", view, state]`` state provided, ``["j"]`` join, ``["x", pid]``
    suspect, ``["l"]`` leave."""
    kind = op[0]
    if kind == "r":
        try:
            return list(endpoint.receive(decode(base64.b64decode(op[1], validate=True))))
        except RemoteError:
            return []  # refused then too: nothing changed
    if kind == "b":
        return list(endpoint.broadcast(unplain(op[1])))
    if kind == "m":  # one broadcast_many call (a batch is logged per frame-sized part)
        return broadcast_batch(endpoint, [unplain(p) for p in op[1]])
    if kind == "s":
        return list(endpoint.send(unplain(op[1]), to=op[2]))
    if kind == "t":
        if not isinstance(op[1], (int, float)) or not math.isfinite(op[1]):
            raise ValueError(f"tick at {op[1]!r}")
        return list(endpoint.tick(float(op[1])))
    if kind == "c":  # the application consumed a delivery (explicit consumption)
        mid = MessageId(int(op[1][0]), int(op[1][1])) if op[1] is not None else None
        return list(endpoint.consume(mid))
    if kind == "p":
        return list(endpoint.provide_state(int(op[1]), unplain(op[2])))
    if kind == "j":
        return list(endpoint.join())
    if kind == "x":
        return list(endpoint.suspect(int(op[1])))
    if kind == "l":
        return list(endpoint.leave())
    raise ValueError(f"unknown input {kind!r}")


class Node:
    """Hosts ``endpoint`` for process ``endpoint.pid`` and connects it to ``peers``.

    ``checkpoint``: a file to resume from (if it exists) and to keep up to date.
    ``trace``: a JSON Lines file of this process's send/receive/deliver events.
    ``on_deliver``: called with each delivered message; otherwise read
    ``deliveries()``. ``on_stable``: called with the ids of each ``Stable`` report.
    An endpoint with explicit consumption is told the application takes each
    delivery in the step that delivers it (the consumption is logged with the step).
    ``app_state``: returns JSON data to keep in the checkpoint; after a restart,
    ``resumed_state`` holds what it returned last time.
    ``encrypt``: seal data frames with ChaCha20-Poly1305 (every member must agree).
    ``sync``: ``fsync`` the trace and the checkpoint log at every step (survives a
    machine crash, not only a process crash). ``max_retained``: sends raise ``Busy``
    while the reliable layer keeps this many unacknowledged packets (None: no bound).
    ``max_unauthenticated`` and ``handshake_timeout`` bound connections before the
    handshake completes (defaults: ``MAX_UNAUTHENTICATED``, ``HANDSHAKE_TIMEOUT``).

    A group endpoint (``Group``, or ``HeartbeatDetector`` around one; see
    ``mailroom.net.membership``) is a member of a process group: each view it installs
    is a trace event of kind "view" and the view each event happens in is traced;
    ``on_view`` gets each ``ViewChange`` at its place among the deliveries (a joiner's
    carries the transferred state), ``get_state(view)`` returns the application's
    state when a joiner needs it (taken right after the ViewChange was handed over),
    and ``on_excluded`` gets ``Excluded`` (the application drops its state). A joiner
    asks its contacts at ``start()``. ``rejoin``: contacts; a member restored from
    ``checkpoint`` joins again as its next incarnation instead of resuming its old
    view (the group has most likely excluded it meanwhile).
    """

    def __init__(
        self,
        endpoint: Any,
        peers: PeerTable,
        key: bytes,
        *,
        checkpoint: str | Path | None = None,
        trace: str | Path | None = None,
        run: str = "run",
        on_deliver: Callable[[Message], None] | None = None,
        app_state: Callable[[], Any] | None = None,
        delays: Mapping[int, float] | None = None,
        listen: socket.socket | None = None,
        outbox_limit: int | None = None,
        encrypt: bool = False,
        sync: bool = False,
        max_retained: int | None = MAX_RETAINED,
        max_unauthenticated: int = MAX_UNAUTHENTICATED,
        handshake_timeout: float | None = None,
        on_stable: Callable[[tuple[MessageId, ...]], None] | None = None,
        on_view: Callable[[ViewChange], None] | None = None,
        get_state: Callable[[int], Payload] | None = None,
        on_excluded: Callable[[Excluded], None] | None = None,
        rejoin: Collection[int] | None = None,
    ) -> None:
        if not isinstance(endpoint, Endpoint):
            raise LocalError(f"{endpoint!r} is not an endpoint (see mailroom.core.Endpoint)")
        self.checkpoint_path = Path(checkpoint) if checkpoint is not None else None
        saved = read_checkpoint(self.checkpoint_path) if self.checkpoint_path else None
        self.resumed_state: Any = None
        #: Deliveries of the last logged step, handed again at start when ``app_state``
        #: is kept: the state saved with that step predates them.
        self.redelivered: list[Message] = []
        #: A new base checkpoint is due at start (the restored endpoint was replaced).
        self._rebase = False
        #: A joiner's state requested in the last logged steps and not yet provided
        #: (the process died in between): provided at start.
        self._owed: int | None = None
        if saved is not None:
            endpoint = self._restore(saved, endpoint)
            apps = [s["app"] for s in saved.steps if "app" in s]  # logged when it changed
            self.resumed_state = apps[-1] if apps else saved.base.get("app")
            if rejoin is not None:
                endpoint = rejoined(endpoint, rejoin)
                self.redelivered = []
                self._owed = None
                self._rebase = True
        self.endpoint = endpoint
        #: Group membership: the endpoint's hooks, and the view id events happen in.
        self.member = is_member(endpoint)
        self.on_view = on_view
        self.get_state = get_state
        self.on_excluded = on_excluded
        self._view: int | None = endpoint.view.id if self.member and endpoint.joined else None
        self._fresh = saved is None
        #: Capabilities driven for the endpoint: consume (explicit consumption) and
        #: flow control; Stable reports go to ``on_stable``.
        self._consumer = consumer(endpoint)
        self._flow = "can_send" in capabilities(endpoint)
        self.on_stable = on_stable
        self.pid: int = endpoint.pid
        if endpoint.n != peers.n:
            raise LocalError(f"the endpoint has n={endpoint.n}, the peer table {peers.n} peers")
        if encrypt:
            fr._aead(bytes(32))  # LocalError now, not at the first connection
        self.peers = peers
        self.key = key
        self.digest = fr.table_digest(peers.entries())
        self.run_name = run
        self.on_deliver = on_deliver
        self.app_state = app_state
        self.delays = dict(delays or {})
        if outbox_limit is None:
            outbox_limit = GROUP_OUTBOX if self.member else OUTBOX_LIMIT
        self.outbox_limit = outbox_limit
        self.encrypt = encrypt
        self.max_retained = max_retained
        self.max_unauthenticated = max_unauthenticated
        self.stats = NetStats()
        last = saved.last if saved is not None else {}
        self.stats.sent = int(last.get("sent", 0))
        self.stats.delivered = int(last.get("delivered", 0))
        self.trace = (
            TraceFile(Path(trace), int(last.get("trace", 0)), last.get("trace_bytes"), sync=sync)
            if trace
            else None
        )
        self._ckpt = (
            CheckpointLog(self.checkpoint_path, saved, sync=sync)
            if self.checkpoint_path is not None
            else None
        )
        self._events = self.trace.count if self.trace is not None else 0
        self._app_json = json.dumps(self.resumed_state) if saved is not None else None
        self._listen = listen
        self._server: asyncio.Server | None = None
        self._links: dict[int, _Link] = {}
        self._inbound: set[_Inbound] = set()
        self._unauthenticated: dict[_Inbound, None] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._can_send = asyncio.Event()
        self._dest: dict[MessageId, tuple[int, ...]] = {}
        self._carries: dict[MessageId, int] = {}
        self._last_carries = fr.UNICAST
        self._unwritten: list[_Effect] = []
        self._stalled: OSError | None = None
        self._retry_pause = IO_RETRY
        self._retry: asyncio.TimerHandle | None = None
        self._quiet = QuietLog()
        self._closed = False
        self._fit = self._windows_fit()
        self._handshake_timeout = handshake_timeout
        everyone = tuple(range(peers.n))
        broadcasts = "broadcast" in capabilities(endpoint)
        #: A delivery whose destinations the node never saw (a group's flush recovered it).
        self._default_dest = everyone if self.member and broadcasts else None

    def handshake_timeout(self) -> float:
        """Seconds a connection has to complete its handshake (``HANDSHAKE_TIMEOUT``)."""
        return self._handshake_timeout if self._handshake_timeout else HANDSHAKE_TIMEOUT

    def _restore(self, saved: Saved, fresh: Any) -> Any:
        """The endpoint of checkpoint ``saved`` with its log replayed; LocalError if it is
        not a checkpoint of ``fresh``'s process and protocol stack."""
        where = f"checkpoint {self.checkpoint_path}"
        want = stack_names(fresh)
        named = saved.base.get("stack")
        if named is not None and named != want:
            raise LocalError(f"{where} is of protocol stack {named}, not {want}")
        try:
            restored = restore_endpoint(saved.base["endpoint"])
        except LocalError as exc:
            raise LocalError(f"{where}: {exc}") from None
        except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError) as exc:
            raise LocalError(
                f"{where}: bad endpoint snapshot: {type(exc).__name__}: {exc}"
            ) from None
        except RecursionError:
            raise LocalError(f"{where}: endpoint snapshot nested too deeply") from None
        if stack_names(restored) != want:
            raise LocalError(f"{where} is of protocol stack {stack_names(restored)}, not {want}")
        if (restored.pid, restored.n) != (fresh.pid, fresh.n):
            raise LocalError(
                f"{where} is of P{restored.pid} of {restored.n}, not P{fresh.pid} of {fresh.n}"
            )
        for k, step in enumerate(saved.steps):
            delivered: list[Message] = []
            try:
                for op in step["ops"]:
                    for a in _apply(restored, op):
                        if isinstance(a, Deliver):
                            delivered.append(a.message)
                        elif isinstance(a, StateRequest):
                            self._owed = a.view
                    if op[0] == "p":
                        self._owed = None
            except (LocalError, TypeError, ValueError, KeyError, IndexError) as exc:
                raise LocalError(f"{where}: log step {k + 1} does not replay: {exc}") from None
            self.redelivered = delivered
        return restored

    # -- life cycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Listen, connect to every peer, and arm the endpoint's timer."""
        loop = asyncio.get_running_loop()
        if self._listen is not None:
            self._server = await loop.create_server(lambda: _Inbound(self), sock=self._listen)
        else:
            host, port = self.peers.addresses[self.pid]
            self._server = await loop.create_server(
                lambda: _Inbound(self), host, port, reuse_address=True
            )
        for peer in range(self.peers.n):
            if peer != self.pid:
                link = _Link(self, peer)
                link.task = asyncio.create_task(link.run())
                self._links[peer] = link
        if self._ckpt is not None and (self._rebase or self._ckpt.wants_compaction()):
            self._compact(strict=True)  # a base to log against
        if self.app_state is not None and self.redelivered:
            self._hand(list(self.redelivered))
        if self.member:
            self._start_member()
        if self._owed is not None:
            self._provide(self._owed)
            self._owed = None
        self._rearm()

    def _start_member(self) -> None:
        """A fresh member traces its initial view; a joiner asks its contacts in."""
        ep = self.endpoint
        if self._fresh and ep.joined and self.trace is not None:
            self._step([], [], [self._view_line(ep.view.id, ep.view.members)])
        group = group_of(ep)
        if ep.view is None and group is not None and group.contacts:
            self._host_input("join", ["j"])

    async def close(self) -> None:
        """Stop listening, close every connection, write the last checkpoint."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
        if self._retry is not None:
            self._retry.cancel()
        for link in self._links.values():
            link.flush()
            if link.task is not None:
                link.task.cancel()
        for link in self._links.values():
            if link.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await link.task
        for conn in list(self._inbound):
            conn.close()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)
        written = True
        if self._unwritten:
            try:
                self._write(self._unwritten)
            except OSError as exc:
                written = False
                log.error(
                    "P%d: %d steps could not be written (%s); a restart resumes from the "
                    "checkpoint without them", self.pid, len(self._unwritten), exc,
                )  # fmt: skip
            else:  # written: the deliveries are the application's now (packets: retransmitted)
                for effect in self._unwritten:
                    self._hand(effect.delivered)
            self._unwritten = []
        if self._ckpt is not None:
            if written:  # a base of unwritten steps would make them count as done
                self._compact(strict=False)
            self._ckpt.close()
        if self.trace is not None:
            self.trace.close()
        self._queue.put_nowait(None)

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the application's side ----------------------------------------------------------
    def broadcast(self, payload: Payload) -> MessageId:
        """Broadcast ``payload`` to the group; returns its message id."""
        return self._issue(payload, tuple(range(self.peers.n)), fr.BROADCAST, None)

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[MessageId]:
        """Broadcast ``payloads`` in order as one step; returns their message ids.

        The deliveries are those of one ``broadcast`` per payload; an endpoint with
        ``broadcast_many`` (``Sequencer``) carries them in few packets. A batch whose
        payloads would not fit one frame is handed to the endpoint in parts that do.
        Every payload is checked first: a bad one is a LocalError and nothing is sent.
        """
        self._check_can_issue()
        ep = self.endpoint
        require(ep, "broadcast")
        batch = list(payloads)
        for payload in batch:
            check_payload(payload)
        if not batch:
            return []
        dest = tuple(range(self.peers.n))
        first = ep.sent_count + 1
        view = ep.sending_view if self.member else None
        parts = frame_parts(batch)
        actions: list[Action] = []
        for part in parts:
            actions += broadcast_batch(ep, part)
        mids = [MessageId(self.pid, first + k) for k in range(len(batch))]
        self.stats.sent += len(batch)
        lines: list[bytes] = []
        if self.trace is not None:
            for mid, payload in zip(mids, batch, strict=True):
                lines.append(self._line("send", mid, self.pid, dest, payload, view))
                self._remember(self._carries, mid, fr.BROADCAST)
                self._remember(self._dest, mid, dest)
            self._last_carries = fr.BROADCAST
        ops = [["m", [plain(p) for p in part]] for part in parts] if self._ckpt is not None else []
        self._step(actions, ops, lines)
        return mids

    def send(self, payload: Payload, to: int) -> MessageId:
        """Send ``payload`` to process ``to``; returns its message id."""
        return self._issue(payload, (to,), fr.UNICAST, to)

    def _check_can_issue(self) -> None:
        """LocalError if closed; Busy while stalled or while too much is unacknowledged."""
        if self._closed:
            raise LocalError("the node is closed")
        if self._stalled is not None:
            raise Busy(f"the node cannot write its files ({self._stalled}); it retries")
        if self._full():
            raise Busy(
                f"{self._retained()} packets wait for acknowledgement "
                f"(max_retained={self.max_retained})"
            )

    def _issue(
        self, payload: Payload, dest: tuple[int, ...], carries: int, to: int | None
    ) -> MessageId:
        self._check_can_issue()
        ep = self.endpoint
        require(ep, "broadcast" if to is None else "unicast")
        mid = MessageId(self.pid, ep.sent_count + 1)
        view = ep.sending_view if self.member else None
        actions = ep.broadcast(payload) if to is None else ep.send(payload, to=to)
        self.stats.sent += 1
        lines: list[bytes] = []
        if self.trace is not None:
            lines.append(self._line("send", mid, self.pid, dest, payload, view))
            self._remember(self._carries, mid, carries)  # kept for retransmissions' frames
            self._last_carries = carries
            if self.pid in dest:
                self._remember(self._dest, mid, dest)
        op = ["b", plain(payload)] if to is None else ["s", plain(payload), to]
        self._step(actions, [op] if self._ckpt is not None else [], lines)
        return mid

    def _layers(self) -> list[Any]:
        return list(self.endpoint.layers) if isinstance(self.endpoint, Stack) else [self.endpoint]

    def _retained(self) -> int:
        return sum(int(x.retained()) for x in self._layers() if hasattr(x, "retained"))

    def _windows_fit(self) -> bool:
        """True when open windows alone cannot hold ``max_retained`` packets, so the
        count is needed only once a window is full (it costs a scan per step)."""
        if self.max_retained is None:
            return True
        held = 0
        for x in self._layers():
            if hasattr(x, "retained"):
                window = getattr(x, "window", None)
                if type(window) is not int:
                    return False
                held += window * (self.peers.n - 1)
        return held < self.max_retained

    def _full(self) -> bool:
        """True when the reliable layer keeps ``max_retained`` unacknowledged packets."""
        if self.max_retained is None:
            return False
        if self._fit and self._endpoint_can_send():
            return False
        return self._retained() >= self.max_retained

    def _endpoint_can_send(self) -> bool:
        return not self._flow or bool(self.endpoint.can_send())

    def can_send(self) -> bool:
        if self._stalled is not None:
            return False
        return self._endpoint_can_send() and not self._full()

    async def wait_can_send(self) -> None:
        """Return when the node can take a send (windows open, files writable)."""
        while not self.can_send():
            self._can_send.clear()
            await self._can_send.wait()

    async def deliveries(self) -> AsyncIterator[Message]:
        """Delivered messages, in delivery order, until the node closes."""
        while (msg := await self._queue.get()) is not None:
            yield msg

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    # -- the network's side ----------------------------------------------------------------
    def _host_matches(self, pid: int, remote: str) -> bool:
        host = self.peers.addresses[pid][0]
        if host == remote:
            return True
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return any(info[4][0] == remote for info in infos)

    def _received(self, peer: int, batch: list[tuple[object, fr.Data]]) -> None:
        if self._closed:
            return
        lines: list[bytes] = []
        ops: list[Any] = []
        for packet, item in batch:
            if item.message_id is not None and self.trace is not None:
                dest = tuple(range(self.peers.n)) if item.carries == fr.BROADCAST else (self.pid,)
                for mid in _received_ids(packet, item.message_id):
                    if mid not in self._dest:
                        self._remember(self._dest, mid, dest)
                    lines.append(self._line("receive", mid, mid.origin, dest, None, self._view))
            if self._ckpt is not None:  # a refused packet is refused again on replay
                ops.append(["r", base64.b64encode(item.packet).decode()])
        # One step for the batch: the reliable layer answers it with one ack per peer.
        actions, errors = receive_batch(self.endpoint, [packet for packet, _ in batch])
        for exc in errors:
            self.stats.remote_errors += 1
            self._quiet(logging.WARNING, "P%d: dropped a packet from P%d: %s", self.pid,
                        peer, exc)  # fmt: skip
        self._step(actions, ops, lines)

    def _loopback(self, packet: object) -> None:
        if not self._closed:
            ops = [["r", base64.b64encode(encode(packet)).decode()]] if self._ckpt else []
            self._step(self.endpoint.receive(packet), ops, [])

    # -- group membership: the host's inputs -------------------------------------------
    @property
    def view(self) -> View | None:
        """The view a group endpoint has installed (None while joining, or not a group)."""
        view = self.endpoint.view if self.member else None
        return view if isinstance(view, View) else None

    @property
    def joined(self) -> bool:
        """True once a group endpoint has installed a view and has the application state."""
        return bool(self.member and self.endpoint.joined)

    def suspect(self, pid: int) -> None:
        """An outside failure detector suspects member ``pid`` (logged, so a restart
        replays it)."""
        self._host_input("suspect", ["x", pid], pid)

    def leave(self) -> None:
        """Leave the group: the next view excludes this process (then ``on_excluded``)."""
        self._host_input("leave", ["l"])

    def _host_input(self, name: str, op: list[Any], *args: int) -> None:
        if not self.member:
            raise LocalError(f"{name}: the node does not host a group endpoint")
        if self._closed:
            raise LocalError("the node is closed")
        if self._stalled is not None:
            raise Busy(f"the node cannot write its files ({self._stalled}); it retries")
        actions = getattr(self.endpoint, name)(*args)
        self._step(actions, [op] if self._ckpt is not None else [], [])

    def _provide(self, view: int) -> None:
        """Answer a StateRequest with the application's state, as a step of its own."""
        state = self.get_state(view) if self.get_state is not None else None
        try:
            actions = self.endpoint.provide_state(view, state)
        except LocalError as exc:  # the view changed again meanwhile: no joiner waits
            self._quiet(logging.WARNING, "P%d: state for view %d not sent: %s", self.pid,
                        view, exc)  # fmt: skip
            return
        ops = [["p", view, plain(state)]] if self._ckpt is not None else []
        self._step(actions, ops, [])

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if not self._closed and self._stalled is None:
            now = self.now()
            self._step(self.endpoint.tick(now), [["t", now]] if self._ckpt else [], [])

    # -- one step: record, persist, then act --------------------------------------------
    def _carries_of(self, mid: MessageId | None) -> int:
        """What a frame says it carries (the receiver's trace uses it for destinations)."""
        if mid is None:
            return fr.CONTROL
        if mid.origin != self.pid:
            return fr.BROADCAST
        return self._carries.get(mid, self._last_carries)  # forgotten: as the latest send

    @staticmethod
    def _remember(table: dict[MessageId, Any], mid: MessageId, value: Any) -> None:
        """Add to a per-message table, forgetting its oldest entry beyond ID_TABLE_LIMIT."""
        table[mid] = value
        if len(table) > ID_TABLE_LIMIT:
            del table[next(iter(table))]

    def _step(self, actions: list[Action], ops: list[Any], lines: list[bytes]) -> None:
        delivered: list[Handed] = []
        count = 0
        transmits: list[Transmit] = []
        loopback: list[object] = []
        stable: list[tuple[MessageId, ...]] = []
        if self._consumer is not None:
            actions = list(actions)  # grows below: a consumption may answer with actions
        for a in actions:
            if isinstance(a, Transmit):
                if a.to == self.pid:
                    loopback.append(a.packet)
                else:
                    transmits.append(a)
            elif isinstance(a, Deliver):
                m = a.message
                delivered.append(m)
                count += 1
                if self.trace is not None:
                    dest = self._dest.pop(m.id, self._default_dest or (self.pid,))
                    lines.append(self._line("deliver", m.id, m.sender, dest, m.payload, self._view))
                if self._consumer is not None:  # the application takes m in this step
                    actions += self._consumer.consume(m.id)
                    if self._ckpt is not None:
                        ops.append(["c", [m.id.origin, m.id.seq]])
            elif isinstance(a, Stable):
                stable.append(a.messages)
            elif isinstance(a, Backpressure):
                pass  # the layer keeps the packet; can_send() says when to resume
            elif isinstance(a, ViewChange):
                self._view = a.view.id  # later deliveries happen in this view
                delivered.append(a)
                if self.trace is not None:
                    lines.append(self._view_line(a.view.id, a.view.members))
            elif isinstance(a, StateRequest | Excluded):
                if isinstance(a, Excluded):
                    self._view = None
                delivered.append(a)  # a StateRequest is answered once the app is here
        sends = [(t.to, encode(t.packet), t.message_id) for t in transmits]
        self.stats.delivered += count
        effect = _Effect(
            ops,
            lines,
            sends,
            loopback,
            delivered,
            self.stats.sent,
            self.stats.delivered,
            stable,
        )
        self._unwritten.append(effect)
        if self._stalled is None:
            self._persist_then_act()

    def _persist_then_act(self) -> None:
        """Write every unwritten step, then act on them in order; on OSError, stall."""
        self._retry = None
        if self._closed:
            return
        try:
            self._write(self._unwritten)
        except OSError as exc:
            self.stats.io_errors += 1
            self._stall(exc)
            return
        effects, self._unwritten = self._unwritten, []
        if self._stalled is not None:
            log.warning("P%d: files written again after %s; resuming", self.pid, self._stalled)
            self._stalled = None
            self._retry_pause = IO_RETRY
            for conn in self._inbound:
                if conn.transport is not None and not conn.transport.is_closing():
                    conn.transport.resume_reading()
        for effect in effects:
            self._act(effect)
        if self._ckpt is not None and self._ckpt.wants_compaction():
            self._compact(strict=False)
        if self.can_send():
            self._can_send.set()
        self._rearm()

    def _stall(self, exc: OSError) -> None:
        if self._stalled is None:
            for conn in self._inbound:
                if conn.transport is not None and not conn.transport.is_closing():
                    conn.transport.pause_reading()
        self._stalled = exc
        self._quiet(logging.ERROR, "P%d: cannot write its checkpoint or trace (%s); "
                    "%d steps wait, retrying in %.2f s", self.pid, exc, len(self._unwritten),
                    self._retry_pause)  # fmt: skip
        loop = asyncio.get_running_loop()
        self._retry = loop.call_later(self._retry_pause, self._persist_then_act)
        self._retry_pause = min(self._retry_pause * 2, 1.0)

    def _write(self, effects: list[_Effect]) -> None:
        """Persist: the trace lines, then the checkpoint log's records (OSError: neither
        counts as written, and a retry writes both again from the same offsets)."""
        trace, ckpt = self.trace, self._ckpt
        if trace is None and ckpt is None:
            return
        end, count = (trace.end, trace.count) if trace is not None else (0, 0)
        records: list[dict[str, Any]] = []
        for e in effects:
            end += sum(len(line) for line in e.lines)
            count += len(e.lines)
            records.append({"ops": e.ops, "trace": count, "trace_bytes": end, "sent": e.sent,
                            "delivered": e.delivered_count})  # fmt: skip
        if trace is not None:
            staged = trace.stage([line for e in effects for line in e.lines])
        if ckpt is not None:
            if self.app_state is not None:
                text = json.dumps(self.app_state(), allow_nan=False)
                if text != self._app_json:
                    records[-1]["app"] = json.loads(text)
                    self._app_json = text
            try:
                ckpt.append(records)
            except OSError:
                self._app_json = None  # write it again with the retry
                if trace is not None:
                    trace.rollback()  # no event in the trace that the checkpoint lacks
                raise
        if trace is not None:
            trace.confirm(*staged)

    def _act(self, e: _Effect) -> None:
        loop = asyncio.get_running_loop()
        for packet in e.loopback:
            loop.call_soon(self._loopback, packet)
        for item in e.delivered:
            if isinstance(item, ViewChange):
                for gone in item.left:  # frames of the old view are of no use to it
                    if gone in self._links:
                        self._links[gone].outbox.clear()
        for to, data, mid in e.sends:
            self._links[to].push(data, mid, self._carries_of(mid))
        for to in {s[0] for s in e.sends}:
            self._links[to].flush_soon()
        self._hand(e.delivered)
        if self.on_stable is not None:
            for messages in e.stable:
                self.on_stable(messages)

    def _hand(self, delivered: list[Handed]) -> None:
        for m in delivered:
            if type(m) is Message:
                if self.on_deliver is not None:
                    self.on_deliver(m)
                else:
                    self._queue.put_nowait(m)
            elif isinstance(m, ViewChange):
                if self.on_view is not None:
                    self.on_view(m)
            elif isinstance(m, StateRequest):
                if not self._closed:
                    self._provide(m.view)
            elif isinstance(m, Excluded):
                if self.on_excluded is not None:
                    self.on_excluded(m)
            elif self.on_deliver is not None:
                self.on_deliver(m)
            else:
                self._queue.put_nowait(m)

    def _compact(self, *, strict: bool) -> None:
        """Write a new base checkpoint; a failure only delays it (unless ``strict``)."""
        assert self._ckpt is not None
        base: dict[str, Any] = {
            "format": FORMAT,
            "stack": stack_names(self.endpoint),
            "endpoint": self.endpoint.snapshot(),
            "trace": self.trace.count if self.trace is not None else 0,
            "trace_bytes": self.trace.end if self.trace is not None else 0,
            "sent": self.stats.sent,
            "delivered": self.stats.delivered,
        }
        if self.app_state is not None:
            base["app"] = self.app_state()
        try:
            self._ckpt.compact(base)
        except OSError as exc:
            if strict:
                raise LocalError(f"cannot write checkpoint {self.checkpoint_path}: {exc}") from None
            self.stats.io_errors += 1
            self._quiet(logging.WARNING, "P%d: checkpoint compaction failed (%s); the log "
                        "keeps growing until it succeeds", self.pid, exc)  # fmt: skip
        else:
            self._app_json = json.dumps(base.get("app"))

    def _rearm(self) -> None:
        deadline = self.endpoint.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    def _view_line(self, view: int, members: tuple[int, ...]) -> bytes:
        """The trace event of installing view ``view`` (``message`` is [0, view id])."""
        return self._line("view", MessageId(0, view), self.pid, members, None, view)

    def _line(
        self,
        kind: str,
        mid: MessageId,
        sender: int,
        dest: tuple[int, ...],
        payload: Payload,
        view: int | None = None,
    ) -> bytes:
        """One trace event as a JSON Lines line (``seq`` counts the events made so far)."""
        assert self.trace is not None
        self._events += 1
        seq = self._events
        event = Event(
            run=self.run_name,
            process=self.pid,
            seq=seq,
            kind=kind,
            message=mid,
            sender=sender,
            dest=dest,
            time=self.now(),
            payload=payload,
            view=view,
        )
        return (json.dumps(event.to_dict(), separators=(",", ":")) + "\n").encode()


__all__ = ["Busy", "NetStats", "Node", "stack_names"]
