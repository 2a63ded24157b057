"""A node's network side: it listens, keeps a connection to every peer, and moves
frames (see ``frames`` for the format and the handshake, ``connections`` for the
two ends of a connection).

Rules, in words:

- Each process listens on its peer-table address and keeps one outgoing
  connection to every other peer (a ``Link``), reconnecting (with a short,
  growing pause) whenever it breaks or the peer is not up yet. It sends only on
  connections it opened and receives only on connections it accepted.
- Accepted connections are held by ``admission`` until their first frame proves
  the group key (at most ``max_unauthenticated`` at once, fairly by source
  address); only then do they become ``Inbound`` connections. Rejected
  connections are logged at most ``LOG_BURST`` times per ``LOG_WINDOW`` seconds; a
  peer of an earlier release is named once, with the reason.
- The group key is at least ``MIN_KEY`` (32) bytes: a shorter one is refused.
- Frames to a peer that is not connected wait in its outbox (at most
  ``outbox_limit``; beyond that the oldest are dropped and counted). ``delays``
  holds frames to a peer back for a while, to stage a slow link.
- The packets for one peer that pile up while the event loop is busy go out in
  one write, as one ``BATCH`` frame (one counter, one MAC).
- A control packet that a later one makes useless (``latest_key``: a reliable
  layer's cumulative acknowledgement, a member's Stability report) is not written
  if the later one waits in the same outbox: the steps of one busy turn write one
  acknowledgement and one report per peer, not one per step (``superseded``).
- With ``lazy_wait`` (a node that gathers its sends), lazy packets (``Transmit.lazy``:
  a reliable layer's acknowledgements, a group member's reports that no delivery
  waits on) go to a peer at most once per ``lazy_wait``, the latest of each key, with
  the first write once they are due, or alone once ``lazy_alone`` passed without one
  (``lazy``), each encoded only then (most are superseded before they go); every
  other packet
  (data, a report a delivery waits on, a heartbeat) is written at the end of the
  callback.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import math
import socket
import time
from collections.abc import Hashable, Iterable
from typing import Protocol

from mailroom.core.codec import encode
from mailroom.core.messages import MessageId
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.net import pake
from mailroom.net.admission import Admission
from mailroom.net.config import check_key
from mailroom.net.connections import Inbound, Outbound
from mailroom.net.discovery import ANY, Address, Directory
from mailroom.net.frames import Batch
from mailroom.net.lazy import LazyHold
from mailroom.net.seen import Seen
from mailroom.net.settings import NodeConfig
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Send as Send

log = logging.getLogger("mailroom.net")


def _bytes(packet: object) -> bytes:
    """A queued packet's bytes (a lazy packet is encoded here, when it goes)."""
    return packet if type(packet) is bytes else encode(packet)


class Link:
    """The outgoing side to one peer: its outbox and the task that keeps it connected
    (to ``seed``, for a connection to whoever listens there: ``peer`` is ``ANY``)."""

    def __init__(self, owner: Transport, peer: int, seed: Address | None = None) -> None:
        self.owner = owner
        self.peer = peer
        self.seed = seed
        #: a seed's link connects when it has something to say, and hangs up once said
        self._said = asyncio.Event()
        self.outbox: collections.deque[tuple[bytes, MessageId | None, int]] = collections.deque()
        #: packets ever queued, and (number, ``latest_key``) of each keyed one in the outbox
        self._pushed = 0
        self._keyed: collections.deque[tuple[int, Hashable]] = collections.deque()
        self.conn: Outbound | None = None
        self.delay = owner.config.delays.get(peer, 0.0)
        self.task: asyncio.Task[None] | None = None
        self._flush_pending = False
        #: lazy packets (with ``lazy_wait``): they go at most once per ``lazy_wait``,
        #: with the next write once due, or alone then (the timer)
        self.lazy = LazyHold()
        self._held: asyncio.TimerHandle | None = None

    def push(
        self,
        packet: object,
        mid: MessageId | None,
        carries: int,
        latest: Hashable | None = None,
        lazy: bool = False,
    ) -> None:
        if self.delay > 0:
            loop = asyncio.get_running_loop()
            loop.call_later(self.delay, self._push_now, packet, mid, carries, latest, lazy)
        else:
            self._push_now(packet, mid, carries, latest, lazy)

    def _push_now(
        self,
        packet: object,
        mid: MessageId | None,
        carries: int,
        latest: Hashable | None,
        lazy: bool,
    ) -> None:
        self._said.set()
        if lazy and carries == fr.CONTROL and self.owner.lazy_wait > 0:
            self._hold(packet, mid, carries, latest)
        else:
            self._queue(_bytes(packet), mid, carries, latest)
        if self.delay > 0:  # pushed late, by a timer of its own: nobody else flushes
            self.flush_soon()

    def _hold(
        self, packet: object, mid: MessageId | None, carries: int, latest: Hashable | None
    ) -> None:
        """A lazy packet: into the hold (``lazy``), replacing one of its key."""
        owner = self.owner
        hold, stats, now = self.lazy, owner.stats, time.monotonic()
        if hold.add((packet, mid, carries), latest, now, owner.lazy_wait, owner.lazy_alone):
            stats.superseded += 1
        if len(hold) > self.owner.outbox_limit:
            hold.drop_oldest()
            stats.outbox_dropped += 1

    def _queue(
        self, packet: bytes, mid: MessageId | None, carries: int, latest: Hashable | None
    ) -> None:
        """Any other packet: into the outbox, written at the end of the callback."""
        outbox, keyed, stats = self.outbox, self._keyed, self.owner.stats
        if latest is not None:
            keyed.append((self._pushed, latest))
            if self.lazy and self.lazy.drop(latest):  # this one says it, later
                stats.superseded += 1
        self._pushed += 1
        outbox.append((packet, mid, carries))
        if len(outbox) > self.owner.outbox_limit:
            outbox.popleft()
            stats.outbox_dropped += 1
            oldest = self._pushed - len(outbox)
            while keyed and keyed[0][0] < oldest:
                keyed.popleft()

    def ready(self, conn: Outbound, seen: int) -> None:
        """``conn`` completed its handshake; the peer has seen our message ids up to
        ``seen``."""
        self.conn = conn
        self.owner.stats.connected += 1
        log.info("P%d: connected to P%d", self.owner.pid, self.peer)
        if self.seed is None:
            self.owner.receiver.peer_has_seen(self.peer, seen)
        self.flush()

    def flush_soon(self) -> None:
        """Flush once the current callback is over: one write for a burst of steps (lazy
        packets alone: once they are due)."""
        if self._flush_pending:
            return
        if not self.outbox:
            self._arm_lazy()
            return
        self._flush_pending = True
        asyncio.get_running_loop().call_soon(self.flush)

    def _arm_lazy(self) -> None:
        """The timer that writes held lazy packets alone if no write took them by then
        (``lazy_alone``), if none is set."""
        if self.lazy and self._held is None:
            wait = max(0.0, self.lazy.alone - time.monotonic())
            self._held = asyncio.get_running_loop().call_later(wait, self._lazy_due)

    def _lazy_due(self) -> None:
        self._held = None
        self.lazy.due = -math.inf  # due now, whatever the clock says
        self.flush()

    def flush(self) -> None:
        self._flush_pending = False
        conn = self.conn
        if conn is None or conn.sealer is None or conn.paused or conn.transport is None:
            return
        if conn.transport.is_closing():
            return
        lazy = self.take_lazy(time.monotonic())
        if lazy and self._held is not None:
            self._held.cancel()
            self._held = None
        if not self.outbox and not lazy:
            return
        items = lazy + self.take()
        stats, sealer = self.owner.stats, conn.sealer
        stats.frames_out += len(items)
        first = sealer.counter
        conn.transport.write(sealer.seal_many(items))  # one MAC for the whole write
        stats.data_frames_out += sealer.counter - first
        if self.seed is not None:  # said: hang up (what was written is sent first)
            self._said.clear()
            conn.transport.close()
        self._arm_lazy()

    def take_lazy(self, now: float) -> list[tuple[bytes, MessageId | None, int]]:
        """The held lazy packets if they are due at ``now``, encoded now (those a later
        one superseded never were)."""
        return [(_bytes(packet), mid, carries) for packet, mid, carries in self.lazy.take(now)]

    def take(self) -> list[tuple[bytes, MessageId | None, int]]:
        """Empty the outbox: its packets in order, without those a later packet with the
        same ``latest_key`` supersedes."""
        items = list(self.outbox)
        keyed = self._keyed
        self.outbox.clear()
        self._keyed = collections.deque()
        if len(keyed) < 2:
            return items
        last = {key: number for number, key in keyed}  # the later number of a key wins
        first = self._pushed - len(items)
        stale = {number - first for number, key in keyed if last[key] != number}
        if not stale:
            return items
        self.owner.stats.superseded += len(stale)
        return [item for at, item in enumerate(items) if at not in stale]

    def clear(self) -> None:
        """Forget what waits in the outbox (lazy packets too)."""
        self.outbox.clear()
        self._keyed = collections.deque()
        self.lazy.clear()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        pause = 0.05
        while True:
            if self.seed is not None:
                await self._said.wait()
            host, port = self.seed or await self.owner.peers.wait(self.peer)  # it may move
            try:
                _, proto = await loop.create_connection(lambda: Outbound(self), host, port)
            except OSError:
                if self.seed is None:
                    self.owner.receiver.peer_has_seen(self.peer, None)  # down, or not up
                await asyncio.sleep(pause)
                pause = min(pause * 2, 1.0)
                continue
            assert isinstance(proto, Outbound)
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


class Receiver(Protocol):
    """What a transport reports to its owner (the node), as an asyncio transport
    reports to its protocol: set once, at construction."""

    def frames_arrived(self, peer: int, batch: Batch) -> None:
        """The decoded packets of the frames one read brought from ``peer`` (every
        packet of a frame checked before any is passed on)."""

    def peer_has_seen(self, peer: int, seen: int | None) -> None:
        """``peer`` says it has seen this node's ids up to ``seen`` (None: it refused
        the connection)."""


class Transport:
    """Connections to and from the peers; authenticated frames in, packets out.

    ``receiver.frames_arrived(peer, batch)`` gets the decoded packets of the frames
    that one read brought from ``peer``. ``seen`` holds the highest message id of each
    process this node has seen (told to it when it connects);
    ``receiver.peer_has_seen(peer, seen)`` hears what a peer says it has seen of this
    node's.
    """

    def __init__(
        self,
        pid: int,
        peers: Directory,
        key: bytes,
        config: NodeConfig,
        receiver: Receiver,
        stats: NetStats,
        quiet: QuietLog,
        *,
        member: bool,
        seen: Seen | None = None,
    ) -> None:
        check_key(key)
        self.pid = pid
        self.peers = peers
        self.key = key
        self.config = config
        self.digest = peers.digest
        #: The group's generator for the handshake's key exchange (``pake``).
        self.generator = pake.generator(key, self.digest)
        #: The highest message id of every process that arrived here (``seen``).
        self.seen = seen if seen is not None else Seen(peers.n)
        self.encrypt = config.encrypt
        self.outbox_limit = config.outbox_for(member)
        #: Seconds a lazy packet may wait, to go with others (0: none wait; ``lazy``);
        #: set by a node that gathers its sends.
        self.lazy_wait = 0.0
        #: Seconds after which lazy packets that no write took go alone (at least
        #: ``lazy_wait``; ``lazy``); set by a node that gathers its sends.
        self.lazy_alone = 0.0
        self.stats = stats
        self.quiet = quiet
        self.receiver = receiver
        self._admission: Admission | None = None
        self._links: dict[int, Link] = {}
        self._seeds: dict[Address, Link] = {}
        self._inbound: set[Inbound] = set()
        self._adopting: dict[asyncio.Task[object], socket.socket] = {}
        self._told: set[int] = set()  # peers named as of an earlier release
        self._paused = False
        if config.encrypt:
            fr.check_cipher()

    # -- what the connections report -------------------------------------------------------
    def handshake_seconds(self) -> float:
        return self.config.handshake_seconds()

    @property
    def paused(self) -> bool:
        """True while the node cannot write its files: accepted connections are not read."""
        return self._paused

    def adopt(self, sock: socket.socket, claim: hs.Claim, secret: bytes) -> None:
        """An accepted connection proved the key (``admission``): it becomes an
        ``Inbound`` connection, which confirms and reads data frames."""
        loop = asyncio.get_running_loop()
        task: asyncio.Task[object] = asyncio.ensure_future(
            loop.connect_accepted_socket(lambda: Inbound(self, claim, secret), sock)
        )
        self._adopting[task] = sock
        task.add_done_callback(self._adopted)

    def _adopted(self, task: asyncio.Task[object]) -> None:
        sock = self._adopting.pop(task)
        if task.cancelled() or task.exception() is not None:
            sock.close()

    def authenticated(self, conn: Inbound) -> None:
        """``conn`` proved the key: an older connection from its peer is dead (a seed's
        probe, to ``ANY``, is another connection than a member's)."""
        self.stats.authenticated += 1
        self._inbound.add(conn)
        log.info("P%d: P%d connected", self.pid, conn.peer)
        for other in [
            c
            for c in self._inbound
            if c is not conn and c.peer == conn.peer and c.dest == conn.dest
        ]:
            other.close()  # the peer restarted or reconnected

    def forget(self, conn: Inbound) -> None:
        """``conn`` closed: it no longer counts."""
        self._inbound.discard(conn)

    def refused_by(self, peer: int, exc: fr.FrameError) -> None:
        """Our connection to ``peer`` failed its handshake: log why (a peer of an earlier
        release once, with the reason; anything else at the rate limit)."""
        if hs.OLD_RELEASE in str(exc):
            if peer not in self._told:
                self._told.add(peer)
                log.warning("P%d: refused P%d: %s", self.pid, peer, exc)
            return
        self.quiet(logging.WARNING, "P%d: closing connection to P%d: %s", self.pid, peer, exc)

    def check_intro(self, i: hs.Claim, remote_host: str) -> None:
        """FrameError("refused") unless the CLAIM is meant for this process and its group."""
        if i.dest != self.pid and not (i.dest == ANY and self.peers.growable):
            raise fr.FrameError("refused", f"P{i.sender} meant to reach P{i.dest}, not us")
        if i.digest != self.digest:
            raise fr.FrameError("refused", f"P{i.sender} has a different peer table")
        if i.encrypt != self.encrypt:
            raise fr.FrameError(
                "refused", f"P{i.sender} {'does' if i.encrypt else 'does not'} encrypt"
            )
        if not self.host_matches(i.sender, remote_host):
            raise fr.FrameError(
                "refused",
                f"P{i.sender}'s table entry is {self.peers.entries()[i.sender]}, "
                f"but it connects from {remote_host}",
            )

    def host_matches(self, pid: int, remote: str) -> bool:
        """True if ``remote`` is (an address of) ``pid``'s peer-table host."""
        host = self.peers.host_of(pid)
        if host is None or host == remote:  # a growable group pins no pid to a host
            return True
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        return any(info[4][0] == remote for info in infos)

    def seen_of(self, pid: int) -> int:
        """The highest message id of ``pid``'s that arrived here."""
        return self.seen.of(pid)

    def received(self, peer: int, batch: Batch) -> None:
        self.stats.frames_in += len(batch)
        seen = self.seen
        for packet, item in batch:
            if item.message_id is not None:
                seen.saw(item.message_id, packet)
        self.receiver.frames_arrived(peer, batch)

    def refuse(self, peer: int, why: str) -> None:
        """An authentic packet was refused (mislabelled); the connection stays up."""
        self.stats.mislabeled += 1
        self.quiet(logging.WARNING, "P%d: refused a packet from P%d: %s", self.pid, peer, why)

    # -- what the node asks -----------------------------------------------------------------
    async def start(self) -> None:
        """Listen and start a link to every other peer."""
        listen = self.config.listen
        socks = [listen] if listen is not None else _bind(*self.peers.addresses[self.pid])
        self._admission = Admission(self, socks)
        self._admission.start()
        log.info("P%d: listening on %s", self.pid, ", ".join(_name(s) for s in socks))
        for peer in sorted(self.peers.addresses):  # a growable group's others: when used
            if peer != self.pid:
                self.link(peer)

    def link(self, peer: int) -> Link:
        """The link to ``peer``, started if it is the first use."""
        link = self._links.get(peer)
        if link is None:
            link = self._links[peer] = Link(self, peer)
            link.task = asyncio.create_task(link.run())
        return link

    def send(self, sends: Iterable[Send]) -> None:
        """Queue packets on their peers' links; each link writes once the callback is over."""
        links = self._links
        touched = set()
        for s in sends:
            to = s.to
            (links.get(to) or self.link(to)).push(s.packet, s.mid, s.carries, s.latest, s.lazy)
            touched.add(to)
        for to in touched:
            links[to].flush_soon()

    def flush_all(self) -> None:
        """Write what waits for every connected peer now (not once the callback is over)."""
        for link in self._links.values():
            if link.outbox:
                link.flush()

    def to_seed(self, seed: Address, data: bytes) -> None:
        """A control packet to whoever listens at ``seed`` (only the latest one waits)."""
        link = self._seeds.get(seed)
        if link is None:
            link = self._seeds[seed] = Link(self, ANY, seed)
            link.task = asyncio.create_task(link.run())
        link.clear()
        link.push(data, None, fr.CONTROL)
        link.flush_soon()

    def links(self) -> dict[int, Link]:
        """The links to members, by pid."""
        return dict(self._links)

    def drop_outbox(self, peer: int) -> None:
        """Forget the frames waiting for ``peer`` (it left the group)."""
        if peer in self._links:
            self._links[peer].clear()

    def queued(self, peer: int) -> int:
        """Frames waiting in ``peer``'s outbox."""
        link = self._links.get(peer)
        return 0 if link is None else len(link.outbox)

    def handshaking(self) -> int:
        """Accepted connections still in their handshake."""
        return len(self._admission.waiting) if self._admission is not None else 0

    def pause(self, paused: bool) -> None:
        """Stop (or resume) reading every accepted connection."""
        if paused != self._paused:
            self._paused = paused
            for conn in self._inbound:
                conn.pause(paused)

    async def close(self) -> None:
        """Write what waits, stop the links, close every connection, stop listening."""
        every = [*self._links.values(), *self._seeds.values()]
        for link in every:
            link.flush()
            if link.task is not None:
                link.task.cancel()
        for link in every:
            if link.task is not None:
                with contextlib.suppress(asyncio.CancelledError):
                    await link.task
        if self._admission is not None:
            self._admission.close()
        for task in list(self._adopting):
            task.cancel()
        for conn in list(self._inbound):
            conn.close()


def _name(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"{host}:{port}"


def _bind(host: str, port: int) -> list[socket.socket]:
    """Listening sockets on every address ``host`` names (as asyncio's servers bind)."""
    socks = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
    except OSError as exc:  # say which address ("Address already in use" alone does not)
        for sock in socks:
            sock.close()
        raise OSError(exc.errno, f"cannot listen at {host}:{port}: {exc.strerror}") from exc
    return socks


__all__ = ["Link", "Receiver", "Send", "Transport"]
