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
from mailroom.core.errors import MailroomError, RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.wire import carried_message_id, is_packet
from mailroom.net import frames as fr
from mailroom.net import handshake as hs

if TYPE_CHECKING:
    from mailroom.net.transport import Link, Transport

#: A frame's packets, decoded (``frames.Batch``; importable from here too).
Batch = fr.Batch


class Mislabeled(MailroomError):
    """An authentic frame's packet that carries another message than its header says."""


#: What asking a packet class's ``carries()`` raises when the packet's fields are too
#: malformed to name a message (``carried_message_id`` turns these into RemoteError;
#: a ``carries()`` that asks a nested packet raises that RemoteError itself).
_UNNAMED = (TypeError, LookupError, ValueError, RemoteError)


def _carrying(ids: list[MessageId | None]) -> str:
    """What a refused packet carries, for the log: each layer's id, outermost first."""
    if len(ids) == 1:
        return f"its packet carries {ids[0]}"
    return f"the layers of its packet carry {', '.join(map(str, ids))}"


def layer_ids(packet: object) -> list[MessageId | None] | None:
    """The message id each layer of ``packet`` names, outermost first: its own
    ``carries()`` (None: a layer without one, a control packet), then, while its
    ``payload`` is a packet (and its class does not rename that packet's message,
    ``names_its_message``), that packet's; a layer whose ``carries()`` fails (fields
    too malformed to name a message) is left out, and None if every layer's fails.

    Which layer is the top one, whose id the sender's frame header names, the bytes
    do not say: a packet may be the application's payload as well as an upper layer's
    packet. ``Stack(Reliable, CBCAST)`` broadcasting ``"x"`` and a bare ``Reliable``
    sending the application payload ``CBCASTPacket(.., "x")`` put the same bytes on
    the wire and label them with CBCAST's id and Reliable's id. ``carried_message_id``
    answers with the innermost layer's id, so an honest frame whose application
    payload is a packet names another id than it: the receiver must accept any
    layer's."""
    ids: list[MessageId | None] = []
    named = False
    while True:
        cls = type(packet)
        carries = getattr(cls, "carries", None)
        if carries is None:
            ids.append(None)
            named = True
        else:
            try:
                ids.append(carries(packet))
                named = True
            except _UNNAMED:
                pass  # this layer names nothing well-formed; another layer may
        inner = getattr(packet, "payload", None)
        if not is_packet(inner) or getattr(cls, "names_its_message", False):
            return ids if named else None
        packet = inner


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
        batch; a frame that is garbage closes the connection, and a packet whose frame
        header names another message than it carries is refused alone."""
        batch: Batch = []
        owner = self.owner
        try:
            for kind, body in self.reader.frames(data):
                if kind == fr.DATA:
                    items = [self.opener.open(body)]
                elif kind == fr.BATCH:
                    items = self.opener.open_many(body)
                else:
                    raise fr.FrameError("garbage", f"frame type {kind} after the handshake")
                owner.stats.data_frames_in += 1
                good, refused = self._decode_all(items)  # garbage: none of the frame
                for exc in refused:  # authentic, numbered: refused, the link stays
                    owner.refuse(self.peer, str(exc))
                batch += good
        except fr.FrameError as exc:
            self.reject(exc)
        finally:
            if batch:
                owner.received(self.peer, batch)

    def _decode_all(self, items: list[fr.Data]) -> tuple[Batch, list[Mislabeled]]:
        """Every packet of one frame decoded and its header's message id checked against
        the packet: the packets that pass, and why each other one is refused
        (``Mislabeled``: another id than any layer of its packet names). FrameError
        (garbage) if any packet is undecodable, names no well-formed id or is labelled
        with an impossible one: then the whole frame is garbage.

        A mislabelled packet costs only itself: the frame is authentic, so its other,
        correctly labelled packets are what this peer sent (it could have sent them in
        frames of their own), and they are delivered now rather than by retransmission."""
        n = self.owner.peers.n
        out: Batch = []
        refused: list[Mislabeled] = []
        for item in items:
            mid = item.message_id
            if mid is not None and not (0 <= mid.origin < n and mid.seq >= 1):
                raise fr.FrameError("garbage", f"frame names impossible message id {mid}")
            try:
                packet = decode(item.packet)
            except RemoteError as exc:
                raise fr.FrameError("garbage", f"undecodable packet: {exc}") from None
            try:
                carried = carried_message_id(packet)
            except _UNNAMED as exc:
                unnamed: Exception | None = exc
            else:
                # the common case: the header names the innermost layer's id (compared
                # field by field: this runs for every packet received)
                if carried is None or mid is None:
                    same = carried is mid
                else:
                    same = carried.origin == mid.origin and carried.seq == mid.seq
                if same:
                    out.append((packet, item))
                    continue
                unnamed = None
            # the packet, not the header, says what it carries: the header must name
            # the id of one of its layers (the application's payload may be a packet)
            ids = layer_ids(packet)
            if ids is None:
                raise fr.FrameError("garbage", f"undecodable packet: {unnamed}")
            if mid in ids:  # None: a control packet, as a layer without carries()
                out.append((packet, item))
            else:
                refused.append(Mislabeled(f"frame names message id {mid}, {_carrying(ids)}"))
        return out, refused

    def reject(self, exc: fr.FrameError) -> None:
        owner = self.owner
        owner.stats.add(exc.reason)
        owner.quiet(
            logging.WARNING,
            "P%d: closing connection from P%d: %s: %s",
            owner.pid,
            self.peer,
            exc.reason,
            exc,
        )
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
            owner.quiet(
                logging.WARNING,
                "P%d: P%d did not complete the handshake within %s s",
                owner.pid,
                self.link.peer,
                owner.handshake_seconds(),
            )
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
                    unsigned = hs.Claim(
                        owner.pid, peer, owner.digest, owner.encrypt, os.urandom(fr.NONCE_SIZE), b""
                    )
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


__all__ = ["Batch", "Inbound", "Mislabeled", "Outbound", "layer_ids"]
