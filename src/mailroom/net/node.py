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
  arrived together, a timer) is handled the same way: record the trace events,
  write the checkpoint, then put the ``Transmit`` packets on the wire and hand
  the ``Deliver`` messages to the application (a callback, or ``deliveries()``,
  an async iterator). Timers: ``tick(now)`` runs at ``next_deadline()`` on the
  event loop's clock.
- Frames that are garbage, forged (bad MAC), replayed, from an unknown pid or
  from a process whose peer-table entry does not match, and connections that
  do not authenticate within ``HANDSHAKE_TIMEOUT``, are dropped and counted
  in ``stats``; the connection they came on is closed with a logged reason. The
  endpoint and the other connections are untouched. A packet that decodes but
  that the endpoint refuses (``RemoteError``) is dropped and counted; the
  connection stays up.
- Frames to a peer that is not connected wait in its outbox (at most
  ``outbox_limit``; beyond that the oldest are dropped and counted, which the
  reliable layer repairs). ``delays`` holds frames to a peer back for a while,
  to stage a slow link.
- Of the reliable layer's acknowledgements to one peer produced in one step,
  only the last is sent: they are cumulative, so it says all the others say.
- The packets for one peer that pile up while the event loop is busy go out in
  one write, as one ``BATCH`` frame (one counter, one MAC; see ``frames``).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Action, Backpressure, Deliver, Stable, Transmit
from mailroom.core.codec import decode, encode
from mailroom.core.endpoint import Endpoint, capabilities, consumer, receive_batch, require
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.registry import restore_endpoint
from mailroom.net import frames as fr
from mailroom.net.config import PeerTable
from mailroom.net.store import TraceFile, read_checkpoint, write_atomic
from mailroom.trace.events import Event

log = logging.getLogger("mailroom.net")

#: Seconds an accepted connection has to authenticate before it is closed.
HANDSHAKE_TIMEOUT = 10.0


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
        )


class _Inbound(asyncio.Protocol):
    """An accepted connection: challenge, HELLO, then authenticated DATA frames."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.reader = fr.FrameReader()
        self.nonce = os.urandom(fr.NONCE_SIZE)
        self.opener: fr.Opener | None = None
        self.peer = -1
        self.transport: asyncio.Transport | None = None
        self.remote_host = ""
        self.timeout: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        name = transport.get_extra_info("peername")
        self.remote_host = name[0] if name else ""
        self.node.stats.accepted += 1
        self.node._inbound.add(self)
        transport.write(fr.frame(fr.CHALLENGE, self.nonce))
        loop = asyncio.get_running_loop()
        self.timeout = loop.call_later(HANDSHAKE_TIMEOUT, self._no_hello)

    def _no_hello(self) -> None:
        if self.opener is None:
            self.reject(fr.FrameError("timeouts", f"no HELLO within {HANDSHAKE_TIMEOUT} s"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.node._inbound.discard(self)
        if self.timeout is not None:
            self.timeout.cancel()

    def data_received(self, data: bytes) -> None:
        node = self.node
        batch: list[tuple[object, fr.Data]] = []
        try:
            for kind, body in self.reader.feed(data):
                if self.opener is None:
                    self._hello(kind, body)
                    continue
                if kind == fr.DATA:
                    items = [self.opener.open(body)]
                elif kind == fr.BATCH:
                    items = self.opener.open_many(body)
                else:
                    raise fr.FrameError("garbage", f"frame type {kind} after the handshake")
                for item in items:
                    try:
                        packet = decode(item.packet)
                    except RemoteError as exc:
                        raise fr.FrameError("garbage", f"undecodable packet: {exc}") from None
                    node.stats.frames_in += 1
                    batch.append((packet, item))
        except fr.FrameError as exc:
            self.reject(exc)
        finally:
            if batch:
                node._received(self.peer, batch)

    def _hello(self, kind: int, body: bytes) -> None:
        node = self.node
        if kind != fr.HELLO:
            raise fr.FrameError("garbage", f"expected HELLO, got frame type {kind}")
        h = fr.read_hello(node.key, self.nonce, body, set(node.peers.addresses))
        if h.dest != node.pid:
            raise fr.FrameError("refused", f"P{h.sender} meant to reach P{h.dest}, not us")
        if h.digest != node.digest:
            raise fr.FrameError("refused", f"P{h.sender} has a different peer table")
        if not node._host_matches(h.sender, self.remote_host):
            raise fr.FrameError(
                "refused",
                f"P{h.sender}'s table entry is {node.peers.entries()[h.sender]}, "
                f"but it connects from {self.remote_host}",
            )
        self.peer = h.sender
        self.opener = fr.Opener(node.key, self.nonce, h.sender, node.pid)
        for other in [c for c in node._inbound if c is not self and c.peer == h.sender]:
            other.close()  # the peer restarted or reconnected: the old connection is dead

    def reject(self, exc: fr.FrameError) -> None:
        stats = self.node.stats
        setattr(stats, exc.reason, getattr(stats, exc.reason) + 1)
        who = f"P{self.peer}" if self.peer >= 0 else self.remote_host
        log.warning("P%d: closing connection from %s: %s: %s", self.node.pid, who, exc.reason, exc)
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.node.stats.closed += 1
            self.transport.close()


class _Outbound(asyncio.Protocol):
    """A connection this process opened to send to ``link.peer``."""

    def __init__(self, link: _Link) -> None:
        self.link = link
        self.reader = fr.FrameReader()
        self.transport: asyncio.Transport | None = None
        self.sealer: fr.Sealer | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        node = self.link.node
        try:
            frames = self.reader.feed(data)
            for kind, body in frames:
                if kind != fr.CHALLENGE or len(body) != fr.NONCE_SIZE or self.sealer:
                    raise fr.FrameError("garbage", f"P{self.link.peer} sent frame type {kind}")
                assert self.transport is not None
                self.transport.write(
                    fr.hello(node.key, body, node.pid, self.link.peer, node.digest)
                )
                self.sealer = fr.Sealer(node.key, body, node.pid, self.link.peer)
                self.link.ready(self)
        except fr.FrameError as exc:
            node.stats.garbage += 1
            log.warning("P%d: closing connection to P%d: %s", node.pid, self.link.peer, exc)
            assert self.transport is not None
            self.transport.close()

    def pause_writing(self) -> None:
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        self.link.flush()

    def connection_lost(self, exc: Exception | None) -> None:
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


class Node:
    """Hosts ``endpoint`` for process ``endpoint.pid`` and connects it to ``peers``.

    ``checkpoint``: a file to resume from (if it exists) and to keep up to date.
    ``trace``: a JSON Lines file of this process's send/receive/deliver events.
    ``on_deliver``: called with each delivered message; otherwise read
    ``deliveries()``. ``on_stable``: called with the ids of each ``Stable`` report.
    An endpoint with explicit consumption is told the application takes each
    delivery just before it is handed over. ``app_state``: returns JSON data to
    keep in the checkpoint; after a restart, ``resumed_state`` holds what it
    returned last time.
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
        outbox_limit: int = 100_000,
        on_stable: Callable[[tuple[MessageId, ...]], None] | None = None,
    ) -> None:
        if not isinstance(endpoint, Endpoint):
            raise LocalError(f"{endpoint!r} is not an endpoint (see mailroom.core.Endpoint)")
        self.checkpoint_path = Path(checkpoint) if checkpoint is not None else None
        saved = read_checkpoint(self.checkpoint_path) if self.checkpoint_path else None
        self.resumed_state: Any = None
        if saved is not None:
            restored = restore_endpoint(saved["endpoint"])
            if (restored.pid, restored.n) != (endpoint.pid, endpoint.n):
                raise LocalError(
                    f"checkpoint {checkpoint} is of P{restored.pid} of {restored.n}, "
                    f"not P{endpoint.pid} of {endpoint.n}"
                )
            endpoint = restored
            self.resumed_state = saved.get("app")
        self.endpoint = endpoint
        #: Capabilities driven for the endpoint: consume (explicit consumption) and
        #: flow control; Stable reports go to ``on_stable``.
        self._consumer = consumer(endpoint)
        self._flow = "can_send" in capabilities(endpoint)
        self.on_stable = on_stable
        self.pid: int = endpoint.pid
        if endpoint.n != peers.n:
            raise LocalError(f"the endpoint has n={endpoint.n}, the peer table {peers.n} peers")
        self.peers = peers
        self.key = key
        self.digest = fr.table_digest(peers.entries())
        self.run_name = run
        self.on_deliver = on_deliver
        self.app_state = app_state
        self.delays = dict(delays or {})
        self.outbox_limit = outbox_limit
        self.stats = NetStats()
        if saved is not None:
            self.stats.sent = int(saved.get("sent", 0))
            self.stats.delivered = int(saved.get("delivered", 0))
        self.trace = TraceFile(Path(trace), saved["trace"] if saved else 0) if trace else None
        self._listen = listen
        self._server: asyncio.Server | None = None
        self._links: dict[int, _Link] = {}
        self._inbound: set[_Inbound] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._can_send = asyncio.Event()
        self._dest: dict[MessageId, tuple[int, ...]] = {}
        self._carries: dict[MessageId, int] = {}
        self._closed = False

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
        self._step([])

    async def close(self) -> None:
        """Stop listening, close every connection, write the last checkpoint."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self._timer.cancel()
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
        self._commit()
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

    def send(self, payload: Payload, to: int) -> MessageId:
        """Send ``payload`` to process ``to``; returns its message id."""
        return self._issue(payload, (to,), fr.UNICAST, to)

    def _issue(
        self, payload: Payload, dest: tuple[int, ...], carries: int, to: int | None
    ) -> MessageId:
        if self._closed:
            raise LocalError("the node is closed")
        ep = self.endpoint
        require(ep, "broadcast" if to is None else "unicast")
        mid = MessageId(self.pid, ep.sent_count + 1)
        actions = ep.broadcast(payload) if to is None else ep.send(payload, to=to)
        self.stats.sent += 1
        if self.trace is not None:
            self._record("send", mid, self.pid, dest, payload)
            self._carries[mid] = carries  # kept for retransmissions' frames
            if self.pid in dest:
                self._dest[mid] = dest
        self._step(actions)
        return mid

    def can_send(self) -> bool:
        return not self._flow or bool(self.endpoint.can_send())

    async def wait_can_send(self) -> None:
        """Return when the reliable layer's windows have room again."""
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
        for _, item in batch:
            if item.message_id is not None and self.trace is not None:
                dest = tuple(range(self.peers.n)) if item.carries == fr.BROADCAST else (self.pid,)
                self._dest.setdefault(item.message_id, dest)
                self._record("receive", item.message_id, item.message_id.origin, dest, None)
        # One step for the batch: the reliable layer answers it with one ack per peer.
        actions, errors = receive_batch(self.endpoint, [packet for packet, _ in batch])
        for exc in errors:
            self.stats.remote_errors += 1
            log.warning("P%d: dropped a packet from P%d: %s", self.pid, peer, exc)
        self._step(actions)

    def _loopback(self, packet: object) -> None:
        if not self._closed:
            self._step(self.endpoint.receive(packet))

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if not self._closed:
            self._step(self.endpoint.tick(self.now()))

    # -- one step: record, checkpoint, transmit, deliver, re-arm --------------------------------
    def _carries_of(self, mid: MessageId | None) -> int:
        """What a frame says it carries (the receiver's trace uses it for destinations)."""
        if mid is None:
            return fr.CONTROL
        return self._carries.get(mid, fr.UNICAST if mid.origin == self.pid else fr.BROADCAST)

    def _step(self, actions: list[Action]) -> None:
        delivered: list[Message] = []
        transmits: list[Transmit] = []
        stable: list[tuple[MessageId, ...]] = []
        loop = asyncio.get_running_loop()
        for a in actions:
            if isinstance(a, Transmit):
                if a.to == self.pid:
                    loop.call_soon(self._loopback, a.packet)
                else:
                    transmits.append(a)
            elif isinstance(a, Deliver):
                m = a.message
                delivered.append(m)
                if self.trace is not None:
                    dest = self._dest.pop(m.id, (self.pid,))
                    self._record("deliver", m.id, m.sender, dest, m.payload)
            elif isinstance(a, Stable):
                stable.append(a.messages)
            elif isinstance(a, Backpressure):
                pass  # the layer keeps the packet; can_send() says when to resume
        sends = [(t.to, encode(t.packet), t.message_id) for t in transmits]
        self.stats.delivered += len(delivered)
        if actions or (self.trace is not None and self.trace.dirty):
            self._commit()
        for to, data, mid in sends:
            self._links[to].push(data, mid, self._carries_of(mid))
        for to in {s[0] for s in sends}:
            self._links[to].flush_soon()
        follow: list[Action] = []
        for m in delivered:
            if self._consumer is not None:  # explicit consumption: the application takes m
                follow += self._consumer.consume(m.id)
            if self.on_deliver is not None:
                self.on_deliver(m)
            else:
                self._queue.put_nowait(m)
        if self.on_stable is not None:
            for messages in stable:
                self.on_stable(messages)
        if self.can_send():
            self._can_send.set()
        if follow:
            self._step(follow)
            return
        self._rearm()

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

    def _record(
        self, kind: str, mid: MessageId, sender: int, dest: tuple[int, ...], payload: Payload
    ) -> None:
        assert self.trace is not None
        self.trace.write(
            Event(
                run=self.run_name,
                process=self.pid,
                seq=self.trace.count + 1,
                kind=kind,
                message=mid,
                sender=sender,
                dest=dest,
                time=self.now(),
                payload=payload,
            )
        )

    def _commit(self) -> None:
        if self.trace is not None:
            self.trace.flush()
        if self.checkpoint_path is None:
            return
        data: dict[str, Any] = {
            "endpoint": self.endpoint.snapshot(),
            "trace": self.trace.count if self.trace is not None else 0,
            "sent": self.stats.sent,
            "delivered": self.stats.delivered,
        }
        if self.app_state is not None:
            data["app"] = self.app_state()
        write_atomic(self.checkpoint_path, data)


__all__ = ["NetStats", "Node"]
