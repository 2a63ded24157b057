"""The two kinds of TCP connection a node has: accepted (``Inbound``, once its CLAIM
proved the key: ``admission``) and opened (``Outbound``, which runs the connector's
side of the handshake, ``handshake``).

A connection reports to its ``Transport`` through the transport's public methods
(``authenticated``, ``forget``, ``received``, ``refused_by``, ``seen_of``); it writes
no field of anyone else.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import TYPE_CHECKING, cast

from mailroom.core.codec import decode
from mailroom.core.errors import RemoteError
from mailroom.core.wire import carried_message_id
from mailroom.net import frames as fr
from mailroom.net import handshake as hs

if TYPE_CHECKING:
    from mailroom.net.transport import Link, Transport

#: A frame's packets, decoded: (packet, its frame entry).
Batch = list[tuple[object, fr.Data]]


class Mislabeled(Exception):
    """An authentic frame whose packet carries another message than its header says."""


#: Bytes one read of a connection may bring (asyncio's own read size).
READ_SIZE = 256 * 1024


class Inbound(asyncio.BufferedProtocol):
    """An accepted connection whose CLAIM proved the group key (``admission``): it
    sends the CONFIRM, then reads data frames.

    It reads into one buffer of its own, reused for every read: through
    ``data_received`` asyncio allocates its whole read size for each read, a mapping
    of its own above malloc's threshold (three more system calls per frame)."""

    def __init__(self, transport: Transport, claim: hs.Claim, secret: bytes) -> None:
        self.owner = transport
        self.peer = claim.sender
        #: The pid the connector meant to reach (``discovery.ANY``: a seed's probe).
        self.dest = claim.dest
        self.secret = secret
        self.reader = fr.FrameReader(fr.MAX_FRAME)
        self.opener = fr.Opener.keyed(hs.session(secret), claim.encrypt)
        self.transport: asyncio.Transport | None = None
        self.remote_host = ""
        self._read = memoryview(bytearray(READ_SIZE))

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where the next read goes: this connection's buffer, whatever ``sizehint``."""
        return self._read

    def buffer_updated(self, nbytes: int) -> None:
        """A read brought ``nbytes`` into the buffer: its frames, as ``data_received``."""
        self.data_received(self._read[:nbytes])

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # a stream transport, though not always an asyncio.Transport subclass (uvloop's)
        self.transport = transport = cast(asyncio.Transport, transport)
        name = transport.get_extra_info("peername")
        self.remote_host = name[0] if name else ""
        owner = self.owner
        transport.write(hs.confirm(self.secret, owner.seen_of(self.peer)))
        owner.authenticated(self)
        if owner.paused:
            transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.owner.forget(self)

    def data_received(self, data: bytes | memoryview) -> None:
        """The bytes read: every complete frame's packets go to the transport as one
        batch; a frame that is garbage closes the connection."""
        batch: Batch = []
        try:
            for kind, body in self.reader.frames(data):
                if kind == fr.DATA:
                    items = [self.opener.open(body)]
                elif kind == fr.BATCH:
                    items = self.opener.open_many(body)
                else:
                    raise fr.FrameError("garbage", f"frame type {kind} after the handshake")
                self.owner.stats.data_frames_in += 1
                try:
                    batch += self._decode_all(items)  # the whole frame, or none of it
                except Mislabeled as exc:  # authentic, numbered: refused, the link stays
                    self.owner.refuse(self.peer, str(exc))
        except fr.FrameError as exc:
            self.reject(exc)
        finally:
            if batch:
                self.owner.received(self.peer, batch)

    def _decode_all(self, items: list[fr.Data]) -> Batch:
        """Every packet of one frame decoded and its header's message id checked against
        the packet: FrameError (garbage) or Mislabeled (another id than the header's)."""
        n = self.owner.peers.n
        out: Batch = []
        for item in items:
            mid = item.message_id
            if mid is not None and not (0 <= mid.origin < n and mid.seq >= 1):
                raise fr.FrameError("garbage", f"frame names impossible message id {mid}")
            try:
                packet = decode(item.packet)
                carried = carried_message_id(packet)
            except RemoteError as exc:
                raise fr.FrameError("garbage", f"undecodable packet: {exc}") from None
            # the packet, not the header, says what it carries (compared field by field:
            # this runs for every packet received)
            if carried is None or mid is None:
                same = carried is mid
            else:
                same = carried.origin == mid.origin and carried.seq == mid.seq
            if not same:
                raise Mislabeled(f"frame names message id {mid}, its packet carries {carried}")
            out.append((packet, item))
        return out

    def reject(self, exc: fr.FrameError) -> None:
        owner = self.owner
        owner.stats.add(exc.reason)
        owner.quiet(logging.WARNING, "P%d: closing connection from P%d: %s: %s", owner.pid,
                    self.peer, exc.reason, exc)  # fmt: skip
        self.close()

    def close(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.owner.stats.closed += 1
            self.transport.close()

    def pause(self, paused: bool) -> None:
        """Stop (or resume) reading this connection."""
        if self.transport is not None and not self.transport.is_closing():
            if paused:
                self.transport.pause_reading()
            else:
                self.transport.resume_reading()


class Outbound(asyncio.Protocol):
    """A connection this process opened to send to ``link.peer``: GREET in, CLAIM out,
    CONFIRM in, then data frames out."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.reader = fr.FrameReader(fr.PREAUTH_LIMIT)
        self.transport: asyncio.Transport | None = None
        self.secret = b""
        self.sealer: fr.Sealer | None = None
        self.timeout: asyncio.TimerHandle | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's: not a subclass
        limit = self.link.owner.handshake_seconds()
        self.timeout = asyncio.get_running_loop().call_later(limit, self._expire)

    def _expire(self) -> None:
        """An acceptor that does not complete the handshake in time (a squatter that
        says nothing) is left, so the link reconnects to whoever holds the address next."""
        if self.sealer is None and self.transport is not None:
            owner = self.link.owner
            owner.stats.timeouts += 1
            owner.quiet(logging.WARNING, "P%d: P%d did not complete the handshake within "
                        "%s s", owner.pid, self.link.peer, owner.handshake_seconds())  # fmt: skip
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        owner = self.link.owner
        peer = self.link.peer
        assert self.transport is not None
        try:
            for kind, body in self.reader.frames(data):
                if self.sealer is not None:
                    raise fr.FrameError("garbage", f"P{peer} sent frame type {kind}")
                if not self.secret:
                    greeting = hs.read_greeting(kind, body, peer)
                    unsigned = hs.Claim(owner.pid, peer, owner.digest, owner.encrypt,
                                        os.urandom(fr.NONCE_SIZE), b"")  # fmt: skip
                    claim, self.secret = hs.claim(owner.key, owner.generator, greeting, unsigned)
                    self.transport.write(claim.frame())
                    continue
                seen = hs.check_confirm(self.secret, body, kind, peer)
                self.sealer = fr.Sealer.keyed(hs.session(self.secret), owner.encrypt)
                self.reader.limit = fr.MAX_FRAME
                self.link.ready(self, seen)
        except fr.FrameError as exc:
            owner.stats.add(exc.reason)
            owner.refused_by(peer, exc)
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


__all__ = ["Batch", "Inbound", "Mislabeled", "Outbound"]
