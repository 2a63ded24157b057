"""Frames on a TCP connection, and the handshake that authenticates them (sans-IO).

Rules, in words:

- A connection carries frames one way: the process that connects (the sender,
  "connector") sends packets to the process that accepts (the receiver,
  "acceptor"). Two processes talk over two connections, one each way.
- Every frame is ``length (4 bytes, big-endian) type (1 byte) body``; the length
  counts the type and body and is at most ``MAX_FRAME``. A zero or larger length,
  or an unknown type, is garbage: the connection is closed.
- The acceptor opens with ``CHALLENGE``: 16 fresh random bytes (the nonce).
- The connector answers ``HELLO``: its pid, the pid it means to reach, the
  digest of its peer table and an HMAC-SHA256 with the group key over all that
  and the nonce. The acceptor refuses an unknown pid, a bad MAC, a connection
  meant for another pid, a different peer table, or a pid whose table entry
  names another host than the one the connection comes from.
- Every ``DATA`` frame then carries a counter (1, 2, 3... on this connection),
  the application message id the packet carries (if any), whether that message
  was a broadcast, the packet's codec bytes and an HMAC-SHA256 over all of it
  with the session key HMAC(group key, nonce, sender, receiver). A bad MAC is a
  forgery; a counter other than the next one is a replay (or a reordering TCP
  never makes). A replay on a new connection fails the MAC, because the nonce
  is new. Either way the frame is dropped, counted and the connection closed.
- A ``BATCH`` frame carries several packets under one counter and one MAC:
  the counter, the number of packets, then for each its kind, message id,
  length and codec bytes, and the HMAC-SHA256 over all of it. It is checked
  like a ``DATA`` frame (MAC, then counter) and then parsed strictly: a count of
  zero, an entry that does not fit, an unknown kind or trailing bytes is
  garbage. The runtime sends one ``BATCH`` frame for the packets that one write
  takes to a peer (``Sealer.seal_many``), so the MAC and the frame header are
  paid once per write, not once per packet; a lone packet still goes as ``DATA``.

There is no encryption: frames are authenticated, not secret.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Sequence

import attrs

from mailroom.core.messages import MessageId

MAX_FRAME = 1 << 20
NONCE_SIZE = 16
MAC_SIZE = 32

CHALLENGE, HELLO, DATA, BATCH = 1, 2, 3, 4
#: At most this many packets in one BATCH frame (the count is two bytes).
MAX_BATCH = 0xFFFF
#: What a DATA frame's packet carries: a control packet, a unicast message, a broadcast.
CONTROL, UNICAST, BROADCAST = 0, 1, 2

_LEN = struct.Struct(">IB")
_HELLO = struct.Struct(">HH32s")
_DATA = struct.Struct(">QBIQ")
_BATCH = struct.Struct(">QH")  # counter, number of packets
_ENTRY = struct.Struct(">BIQI")  # kind, message id origin and seq, packet length


class FrameError(Exception):
    """The bytes on a connection are not a valid frame; ``reason`` names the counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def frame(kind: int, body: bytes) -> bytes:
    """The bytes of one frame."""
    return _LEN.pack(len(body) + 1, kind) + body


class FrameReader:
    """Splits a byte stream into (type, body) frames; FrameError on garbage."""

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        out: list[tuple[int, bytes]] = []
        pos = 0
        while len(buf) - pos >= 5:
            size, kind = _LEN.unpack_from(buf, pos)
            if size < 1 or size > MAX_FRAME:
                raise FrameError("garbage", f"frame length {size} is outside 1..{MAX_FRAME}")
            if kind not in (CHALLENGE, HELLO, DATA, BATCH):
                raise FrameError("garbage", f"unknown frame type {kind}")
            if len(buf) - pos < 4 + size:
                break
            out.append((kind, bytes(buf[pos + 5 : pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out


def _hello_mac(key: bytes, nonce: bytes, sender: int, dest: int, digest: bytes) -> bytes:
    msg = b"mailroom-hello" + nonce + _HELLO.pack(sender, dest, digest)
    return hmac.digest(key, msg, "sha256")


def session_key(key: bytes, nonce: bytes, sender: int, dest: int) -> bytes:
    """The key that authenticates the DATA frames of one connection."""
    return hmac.digest(
        key, b"mailroom-session" + nonce + struct.pack(">HH", sender, dest), "sha256"
    )


def hello(key: bytes, nonce: bytes, sender: int, dest: int, digest: bytes) -> bytes:
    """The HELLO frame that answers ``nonce``."""
    body = _HELLO.pack(sender, dest, digest)
    return frame(HELLO, body + _hello_mac(key, nonce, sender, dest, digest))


@attrs.frozen
class Hello:
    sender: int
    dest: int
    digest: bytes


def read_hello(key: bytes, nonce: bytes, body: bytes, known: set[int]) -> Hello:
    """Check a HELLO body; FrameError("unknown_peer" / "bad_mac" / "garbage")."""
    if len(body) != _HELLO.size + MAC_SIZE:
        raise FrameError("garbage", f"HELLO of {len(body)} bytes")
    sender, dest, digest = _HELLO.unpack_from(body)
    if sender not in known:
        raise FrameError("unknown_peer", f"HELLO from P{sender}, which is not in the peer table")
    mac = body[_HELLO.size :]
    if not hmac.compare_digest(mac, _hello_mac(key, nonce, sender, dest, digest)):
        raise FrameError("bad_mac", f"HELLO claiming P{sender} has a bad MAC")
    return Hello(sender, dest, digest)


def table_digest(entries: dict[int, str]) -> bytes:
    """SHA-256 of a peer table in a canonical form, so both ends can compare tables."""
    text = "\n".join(f"{pid}={addr}" for pid, addr in sorted(entries.items()))
    return hashlib.sha256(text.encode()).digest()


class Sealer:
    """The connector's side after the handshake: numbers and MACs DATA frames."""

    def __init__(self, key: bytes, nonce: bytes, sender: int, dest: int) -> None:
        self._key = session_key(key, nonce, sender, dest)
        self.counter = 0

    def seal(self, packet: bytes, message_id: MessageId | None, carries: int) -> bytes:
        self.counter += 1
        origin, seq = (message_id.origin, message_id.seq) if message_id else (0, 0)
        head = _DATA.pack(self.counter, carries, origin, seq)
        mac = hmac.digest(self._key, head + packet, "sha256")
        return _LEN.pack(len(head) + len(packet) + MAC_SIZE + 1, DATA) + head + packet + mac

    def seal_many(self, items: Sequence[tuple[bytes, MessageId | None, int]]) -> bytes:
        """The frames for ``items`` (packet, message id, kind), in order: one DATA frame
        for a single packet, else BATCH frames of at most ``MAX_BATCH`` packets and
        ``MAX_FRAME`` bytes, each numbered and MAC'd once."""
        if len(items) == 1:
            return self.seal(*items[0])
        frames: list[bytes] = []
        entries: list[bytes] = []
        size = _BATCH.size + MAC_SIZE + 1
        for packet, mid, carries in items:
            origin, seq = (mid.origin, mid.seq) if mid else (0, 0)
            entry = _ENTRY.pack(carries, origin, seq, len(packet)) + packet
            if entries and (len(entries) == MAX_BATCH or size + len(entry) > MAX_FRAME):
                frames.append(self._seal_batch(entries))
                entries, size = [], _BATCH.size + MAC_SIZE + 1
            entries.append(entry)
            size += len(entry)
        if entries:
            frames.append(self._seal_batch(entries))
        return b"".join(frames)

    def _seal_batch(self, entries: list[bytes]) -> bytes:
        self.counter += 1
        signed = _BATCH.pack(self.counter, len(entries)) + b"".join(entries)
        mac = hmac.digest(self._key, signed, "sha256")
        return _LEN.pack(len(signed) + MAC_SIZE + 1, BATCH) + signed + mac


@attrs.frozen
class Data:
    packet: bytes
    message_id: MessageId | None
    carries: int


class Opener:
    """The acceptor's side after the handshake: checks DATA frames' MACs and counters."""

    def __init__(self, key: bytes, nonce: bytes, sender: int, dest: int) -> None:
        self._key = session_key(key, nonce, sender, dest)
        self.counter = 0

    def open(self, body: bytes) -> Data:
        if len(body) < _DATA.size + MAC_SIZE:
            raise FrameError("garbage", f"DATA frame of {len(body)} bytes is too short")
        signed, mac = body[:-MAC_SIZE], body[-MAC_SIZE:]
        if not hmac.compare_digest(mac, hmac.digest(self._key, signed, "sha256")):
            raise FrameError("bad_mac", "DATA frame has a bad MAC")
        counter, carries, origin, seq = _DATA.unpack_from(signed)
        if counter != self.counter + 1:
            raise FrameError(
                "replayed", f"DATA frame numbered {counter}, expected {self.counter + 1}"
            )
        if carries not in (CONTROL, UNICAST, BROADCAST):
            raise FrameError("garbage", f"DATA frame says it carries kind {carries}")
        self.counter = counter
        mid = MessageId(origin, seq) if carries != CONTROL else None
        return Data(signed[_DATA.size :], mid, carries)

    def open_many(self, body: bytes) -> list[Data]:
        """The packets of a BATCH frame's body, in order; FrameError as for ``open``."""
        if len(body) < _BATCH.size + MAC_SIZE:
            raise FrameError("garbage", f"BATCH frame of {len(body)} bytes is too short")
        signed, mac = body[:-MAC_SIZE], body[-MAC_SIZE:]
        if not hmac.compare_digest(mac, hmac.digest(self._key, signed, "sha256")):
            raise FrameError("bad_mac", "BATCH frame has a bad MAC")
        counter, count = _BATCH.unpack_from(signed)
        if counter != self.counter + 1:
            raise FrameError(
                "replayed", f"BATCH frame numbered {counter}, expected {self.counter + 1}"
            )
        if count == 0:
            raise FrameError("garbage", "BATCH frame of no packets")
        out: list[Data] = []
        pos, end = _BATCH.size, len(signed)
        for _ in range(count):
            if end - pos < _ENTRY.size:
                raise FrameError("garbage", "BATCH frame ends inside an entry")
            carries, origin, seq, size = _ENTRY.unpack_from(signed, pos)
            pos += _ENTRY.size
            if carries not in (CONTROL, UNICAST, BROADCAST):
                raise FrameError("garbage", f"BATCH entry says it carries kind {carries}")
            if size > end - pos:
                raise FrameError("garbage", f"BATCH entry of {size} bytes does not fit")
            mid = MessageId(origin, seq) if carries != CONTROL else None
            out.append(Data(signed[pos : pos + size], mid, carries))
            pos += size
        if pos != end:
            raise FrameError("garbage", f"{end - pos} bytes after the last BATCH entry")
        self.counter = counter
        return out


__all__ = [
    "BATCH",
    "BROADCAST",
    "CHALLENGE",
    "CONTROL",
    "DATA",
    "HELLO",
    "MAX_BATCH",
    "MAX_FRAME",
    "NONCE_SIZE",
    "UNICAST",
    "Data",
    "FrameError",
    "FrameReader",
    "Hello",
    "Opener",
    "Sealer",
    "frame",
    "hello",
    "read_hello",
    "session_key",
    "table_digest",
]
