"""Accepted connections until they prove the group key: cheap, bounded and fair.

Rules, in words:

- The node accepts connections itself and holds each as a bare socket until its
  first frame, a CLAIM (``handshake``), proves the group key: it writes the GREET
  at once, reads what the peer sends without making an asyncio transport, and only
  an authenticated connection becomes an ``Inbound`` protocol (``Transport.adopt``).
  A keyless connection costs an accept, a write, a read and a close.
- At most ``max_unauthenticated`` accepted connections wait for their CLAIM. One
  more closes a waiting one (``evicted``): the oldest of the source address that
  has the most waiting, so a flood from one address pushes out its own
  connections, not another address's (a member's host); and never one whose bytes
  have arrived unread: those are read, and judged, first. So a member, whose CLAIM
  is its first message, is pushed out only by a flood from its own address that
  turns the whole pool over before its CLAIM arrives (one round trip).
- A connection that has not sent its CLAIM within the handshake timeout is closed
  (``timeouts``). Connections refused or pushed out are reset, not closed
  gracefully: a flood leaves no TIME_WAIT sockets behind on the node.
- When ``accept`` fails for lack of file descriptors or memory (EMFILE, ENFILE,
  ENOBUFS, ENOMEM), accepting pauses for a second (logged, rate-limited), as
  asyncio's own servers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import socket
import struct
from typing import TYPE_CHECKING

import attrs

from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.net import pake

if TYPE_CHECKING:
    from mailroom.net.transport import Transport

#: Connections accepted at most per readiness of the listening socket.
ACCEPT_BURST = 32
#: The listening socket's backlog: a burst waits in the kernel, not dropped.
BACKLOG = 1024
#: Seconds accepting pauses after accept() ran out of file descriptors or memory.
ACCEPT_RETRY = 1.0
_OUT_OF_RESOURCES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)
_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets


@attrs.define(eq=False)
class Pending:
    """An accepted connection that has not proved the key yet."""

    sock: socket.socket
    source: str
    greeting: hs.Greeting
    pair: pake.KeyPair
    deadline: float
    reader: fr.FrameReader = attrs.Factory(lambda: fr.FrameReader(fr.PREAUTH_LIMIT))


class Waiting:
    """The connections waiting for their CLAIM, in arrival order, by source address."""

    def __init__(self) -> None:
        self._all: dict[Pending, None] = {}
        self._by_source: dict[str, dict[Pending, None]] = {}

    def __len__(self) -> int:
        return len(self._all)

    def __contains__(self, p: Pending) -> bool:
        return p in self._all

    def all(self) -> list[Pending]:
        return list(self._all)

    def add(self, p: Pending) -> None:
        self._all[p] = None
        self._by_source.setdefault(p.source, {})[p] = None

    def remove(self, p: Pending) -> None:
        if self._all.pop(p, 0) is None:
            mine = self._by_source[p.source]
            del mine[p]
            if not mine:
                del self._by_source[p.source]

    def oldest(self) -> Pending | None:
        return next(iter(self._all), None)

    def victim(self) -> Pending:
        """The oldest connection of the source address with the most waiting."""
        busiest = max(self._by_source.values(), key=len)
        return next(iter(busiest))


class Admission:
    """Accepts connections on ``socks`` for ``owner`` and holds them until they
    authenticate (then ``owner.adopt``), are refused, pushed out or time out."""

    def __init__(self, owner: Transport, socks: list[socket.socket]) -> None:
        self.owner = owner
        self.socks = socks
        self.waiting = Waiting()
        self._loop = asyncio.get_running_loop()
        self._pair = pake.KeyPair.fresh(owner.generator)
        self._pair_at = self._loop.time()
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def start(self) -> None:
        for sock in self.socks:
            sock.setblocking(False)
            sock.listen(BACKLOG)
            self._loop.add_reader(sock.fileno(), self._accept, sock)

    def close(self) -> None:
        """Stop accepting, close the listening sockets and every waiting connection."""
        self._closed = True
        for sock in self.socks:
            self._loop.remove_reader(sock.fileno())
            sock.close()
        for p in self.waiting.all():
            self._forget(p)
            p.sock.close()
        if self._timer is not None:
            self._timer.cancel()

    # -- accepting -------------------------------------------------------------------
    def _share(self) -> pake.KeyPair:
        """The acceptor's key pair, renewed every ``SHARE_LIFETIME`` seconds."""
        now = self._loop.time()
        if now - self._pair_at >= hs.SHARE_LIFETIME:
            self._pair, self._pair_at = pake.KeyPair.fresh(self.owner.generator), now
        return self._pair

    def _accept(self, sock: socket.socket) -> None:
        for _ in range(ACCEPT_BURST):
            try:
                conn, address = sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_RESOURCES:
                    self._pause(sock, exc)
                    return
                continue  # ECONNABORTED and the like: that connection is gone
            self._greet(conn, address[0] if address else "")

    def _pause(self, sock: socket.socket, exc: OSError) -> None:
        owner = self.owner
        owner.quiet(
            logging.ERROR,
            "P%d: cannot accept a connection (%s); accepting again in %s s",
            owner.pid,
            exc,
            ACCEPT_RETRY,
        )
        self._loop.remove_reader(sock.fileno())

        def resume() -> None:
            if not self._closed:
                self._loop.add_reader(sock.fileno(), self._accept, sock)

        self._loop.call_later(ACCEPT_RETRY, resume)

    def _greet(self, conn: socket.socket, source: str) -> None:
        owner = self.owner
        owner.stats.accepted += 1
        conn.setblocking(False)
        pair = self._share()
        greeting = hs.Greeting(os.urandom(fr.NONCE_SIZE), pair.share)
        try:
            conn.send(greeting.frame())
        except OSError:  # gone already
            owner.stats.closed += 1
            conn.close()
            return
        p = Pending(conn, source, greeting, pair, self._loop.time() + owner.handshake_seconds())
        self.waiting.add(p)
        self._loop.add_reader(conn.fileno(), self._readable, p)
        self._make_room()
        if self._timer is None:
            self._arm()

    # -- judging ---------------------------------------------------------------------
    def _readable(self, p: Pending) -> None:
        try:
            data = p.sock.recv(fr.PREAUTH_LIMIT + 8)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the peer left before proving anything
            self._drop(p, None)
            return
        owner = self.owner
        try:
            got = p.reader.feed(data)
            if not got:
                return  # a CLAIM cut in two by the network: the rest comes next
            if len(got) > 1 or p.reader.buffered:
                raise fr.FrameError("garbage", "bytes after the CLAIM, before the CONFIRM")
            kind, body = got[0]
            claim = hs.read_claim(kind, body, owner.peers.identities(), p.source)
            owner.check_intro(claim, p.source)
            secret = hs.check_claim(owner.key, p.pair, p.greeting, claim)
        except fr.FrameError as exc:
            self._drop(p, exc)
            return
        self._forget(p)
        owner.adopt(p.sock, claim, secret)

    def _make_room(self) -> None:
        """Close waiting connections until at most ``max_unauthenticated`` wait; a victim
        whose bytes arrived unread is read and judged first."""
        cap = self.owner.config.max_unauthenticated
        while len(self.waiting) > max(cap, 0):
            p = self.waiting.victim()
            if _unread(p.sock):
                self._readable(p)
            if p in self.waiting:
                self._drop(p, fr.FrameError("evicted", "too many connections in their handshake"))

    def _arm(self) -> None:
        oldest = self.waiting.oldest()
        self._timer = None
        if oldest is not None and not self._closed:
            self._timer = self._loop.call_at(oldest.deadline, self._expire)

    def _expire(self) -> None:
        now = self._loop.time()
        limit = self.owner.handshake_seconds()
        while (p := self.waiting.oldest()) is not None and p.deadline <= now:
            self._drop(p, fr.FrameError("timeouts", f"no CLAIM within {limit} s"))
        self._arm()

    def _forget(self, p: Pending) -> None:
        if p in self.waiting:
            self.waiting.remove(p)
            self._loop.remove_reader(p.sock.fileno())

    def _drop(self, p: Pending, exc: fr.FrameError | None) -> None:
        """Reset and forget ``p``; count and log why (``exc``; None: the peer left)."""
        self._forget(p)
        owner = self.owner
        if exc is not None:
            owner.stats.add(exc.reason)
            owner.quiet(
                logging.WARNING,
                "P%d: closing connection from %s: %s: %s",
                owner.pid,
                p.source,
                exc.reason,
                exc,
            )
        owner.stats.closed += 1
        with contextlib.suppress(OSError):
            p.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        p.sock.close()


def _unread(sock: socket.socket) -> bool:
    """True if bytes (or the end of the stream) arrived on ``sock`` and were not read."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True
    return True


__all__ = ["ACCEPT_BURST", "ACCEPT_RETRY", "BACKLOG", "Admission", "Pending", "Waiting"]
