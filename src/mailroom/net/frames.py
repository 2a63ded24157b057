"""Frames on a TCP connection, and the handshake that authenticates them (sans-IO).

Rules, in words:

- A connection carries frames one way: the process that connects (the sender,
  "connector") sends packets to the process that accepts (the receiver,
  "acceptor"). Two processes talk over two connections, one each way.
- Every frame is ``length (4 bytes, big-endian) type (1 byte) body``; the length
  counts the type and body and is at most ``MAX_FRAME``. A zero or larger length,
  or an unknown type, is garbage: the connection is closed.
- The handshake proves the group key both ways, the acceptor first, so a process
  that binds a member's address without the key learns nothing it can use:

  1. acceptor -> ``CHALLENGE``: 16 fresh random bytes (its nonce);
  2. connector -> ``INTRO``: its pid, the pid it means to reach, the digest of
     its peer table, whether it encrypts, and its own 16 fresh random bytes.
     No MAC: nothing in it needs the key;
  3. acceptor -> ``PROOF``: HMAC-SHA256 with the group key over both nonces and
     the INTRO, once it has checked the INTRO (a known pid, meant for itself,
     the same peer table, the same encryption setting, from the pid's host);
  4. connector -> ``HELLO``: its own HMAC over the same, under another label,
     sent only once the PROOF is good. Data frames follow at once.

  A process without the key cannot make a PROOF, so the connector closes the
  connection (``bad_mac``) having sent nothing but public facts; a PROOF or
  HELLO is bound to both fresh nonces and both pids, so it cannot be replayed
  or reflected.
- Before the handshake completes, a frame longer than the handshake frame the
  state expects is refused at its header (``PREAUTH_LIMIT``): an unauthenticated
  peer cannot make a process buffer more than that.
- Every ``DATA`` frame then carries a counter (1, 2, 3... on this connection),
  the application message id the packet carries (if any), whether that message
  was a broadcast, the packet's codec bytes and an HMAC-SHA256 over all of it
  with the session key HMAC(group key, both nonces, sender, receiver). A bad MAC is a
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

- With ``encrypt`` (both sides must agree; the INTRO says it and the MACs cover
  it), a DATA or BATCH frame's body after the counter is sealed with
  ChaCha20-Poly1305 under the session key, the counter as nonce and the frame
  type and counter as associated data: the 16-byte tag replaces the HMAC.
  It needs the ``cryptography`` package (``pip install mailroom[crypto]``).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterator, Sequence
from typing import Any

import attrs

from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId

MAX_FRAME = 1 << 20
NONCE_SIZE = 16
MAC_SIZE = 32
TAG_SIZE = 16

CHALLENGE, HELLO, DATA, BATCH, INTRO, PROOF = 1, 2, 3, 4, 5, 6
_KINDS = frozenset((CHALLENGE, HELLO, DATA, BATCH, INTRO, PROOF))
#: At most this many packets in one BATCH frame (the count is two bytes).
MAX_BATCH = 0xFFFF
#: What a DATA frame's packet carries: a control packet, a unicast message, a broadcast.
CONTROL, UNICAST, BROADCAST = 0, 1, 2
_CARRIES = frozenset((CONTROL, UNICAST, BROADCAST))

_LEN = struct.Struct(">IB")
_INTRO = struct.Struct(">HH32sB16s")  # sender, dest, table digest, flags, connector nonce
_DATA = struct.Struct(">QBIQ")
_BATCH = struct.Struct(">QH")  # counter, number of packets
_ENTRY = struct.Struct(">BIQI")  # kind, message id origin and seq, packet length
_CTR = struct.Struct(">Q")
#: INTRO flag: the connector encrypts its data frames.
ENCRYPT = 1
#: The longest frame (type and body) accepted before the handshake completes.
PREAUTH_LIMIT = 1 + max(_INTRO.size, MAC_SIZE, NONCE_SIZE)


class FrameError(Exception):
    """The bytes on a connection are not a valid frame; ``reason`` names the counter."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def frame(kind: int, body: bytes) -> bytes:
    """The bytes of one frame."""
    return _LEN.pack(len(body) + 1, kind) + body


class FrameReader:
    """Splits a byte stream into (type, body) frames; FrameError on garbage.

    ``limit`` is the longest frame accepted, checked at each frame's header:
    set it to ``PREAUTH_LIMIT`` until the handshake completes.
    """

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self._buf = bytearray()
        self.limit = limit

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        return list(self.frames(data))

    def frames(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        """The complete frames of the stream so far, one at a time (``limit`` is read
        before each, so a caller may raise it between frames)."""
        buf = self._buf
        buf += data
        pos = 0
        try:
            while len(buf) - pos >= 5:
                size, kind = _LEN.unpack_from(buf, pos)
                if size < 1 or size > self.limit:
                    raise FrameError("garbage", f"frame length {size} is outside 1..{self.limit}")
                if kind not in _KINDS:
                    raise FrameError("garbage", f"unknown frame type {kind}")
                if len(buf) - pos < 4 + size:
                    break
                body = bytes(buf[pos + 5 : pos + 4 + size])
                pos += 4 + size
                yield kind, body
        finally:
            if pos:
                del buf[:pos]
        if len(buf) > self.limit + 4:  # a partial frame can never be longer than this
            raise FrameError("garbage", f"{len(buf)} bytes buffered past the frame limit")


@attrs.frozen
class Intro:
    """What a connector says about itself before anyone has proved the key."""

    sender: int
    dest: int
    digest: bytes
    encrypt: bool
    nonce: bytes

    def signed(self, label: bytes, acceptor_nonce: bytes) -> bytes:
        return (
            label
            + acceptor_nonce
            + _INTRO.pack(self.sender, self.dest, self.digest, int(self.encrypt), self.nonce)
        )


def intro(sender: int, dest: int, digest: bytes, nonce: bytes, encrypt: bool = False) -> bytes:
    """The INTRO frame a connector sends after the CHALLENGE."""
    return frame(INTRO, _INTRO.pack(sender, dest, digest, ENCRYPT if encrypt else 0, nonce))


def read_intro(body: bytes, known: set[int]) -> Intro:
    """Parse an INTRO; FrameError("garbage" / "unknown_peer")."""
    if len(body) != _INTRO.size:
        raise FrameError("garbage", f"INTRO of {len(body)} bytes")
    sender, dest, digest, flags, nonce = _INTRO.unpack(body)
    if flags not in (0, ENCRYPT):
        raise FrameError("garbage", f"INTRO with flags {flags}")
    if sender not in known:
        raise FrameError("unknown_peer", f"INTRO from P{sender}, which is not in the peer table")
    return Intro(sender, dest, digest, bool(flags), nonce)


def _mac(key: bytes, label: bytes, nonce: bytes, i: Intro) -> bytes:
    return hmac.digest(key, i.signed(label, nonce), "sha256")


def proof(key: bytes, nonce: bytes, i: Intro) -> bytes:
    """The PROOF frame: the acceptor (which sent ``nonce``) knows the key."""
    return frame(PROOF, _mac(key, b"mailroom-proof", nonce, i))


def hello(key: bytes, nonce: bytes, i: Intro) -> bytes:
    """The HELLO frame: the connector knows the key too."""
    return frame(HELLO, _mac(key, b"mailroom-hello", nonce, i))


def check_proof(key: bytes, nonce: bytes, i: Intro, body: bytes) -> None:
    if len(body) != MAC_SIZE or not hmac.compare_digest(
        body, _mac(key, b"mailroom-proof", nonce, i)
    ):
        raise FrameError("bad_mac", f"P{i.dest} could not prove the group key")


def check_hello(key: bytes, nonce: bytes, i: Intro, body: bytes) -> None:
    if len(body) != MAC_SIZE or not hmac.compare_digest(
        body, _mac(key, b"mailroom-hello", nonce, i)
    ):
        raise FrameError("bad_mac", f"HELLO claiming P{i.sender} has a bad MAC")


def table_digest(entries: dict[int, str]) -> bytes:
    """SHA-256 of a peer table in a canonical form, so both ends can compare tables."""
    text = "\n".join(f"{pid}={addr}" for pid, addr in sorted(entries.items()))
    return hashlib.sha256(text.encode()).digest()


def session_key(key: bytes, nonce: bytes, i: Intro) -> bytes:
    """The key that authenticates (and, with ``encrypt``, seals) one connection's frames."""
    return hmac.digest(key, i.signed(b"mailroom-session", nonce), "sha256")


def aead_available() -> bool:
    try:
        import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401
    except ImportError:
        return False
    return True


def _aead(key: bytes) -> Any:
    try:
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
    except ImportError:
        raise LocalError(
            "encryption needs the cryptography package",
            hint="pip install 'mailroom[crypto]'",
        ) from None
    return ChaCha20Poly1305(key)


def _nonce(counter: bytes) -> bytes:
    return b"\0\0\0\0" + counter


class Sealer:
    """The connector's side after the handshake: numbers and MACs (or seals) data frames."""

    def __init__(self, key: bytes, nonce: bytes, i: Intro) -> None:
        self._key = session_key(key, nonce, i)
        self._aead = _aead(self._key) if i.encrypt else None
        self.counter = 0

    def _out(self, kind: int, signed: bytes) -> bytes:
        if self._aead is None:
            mac = hmac.digest(self._key, signed, "sha256")
            return _LEN.pack(len(signed) + MAC_SIZE + 1, kind) + signed + mac
        ctr = signed[: _CTR.size]
        sealed: bytes = self._aead.encrypt(_nonce(ctr), signed[_CTR.size :], bytes((kind,)) + ctr)
        return _LEN.pack(len(ctr) + len(sealed) + 1, kind) + ctr + sealed

    def seal(self, packet: bytes, message_id: MessageId | None, carries: int) -> bytes:
        self.counter += 1
        origin, seq = (message_id.origin, message_id.seq) if message_id else (0, 0)
        return self._out(DATA, _DATA.pack(self.counter, carries, origin, seq) + packet)

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
        return self._out(BATCH, _BATCH.pack(self.counter, len(entries)) + b"".join(entries))


@attrs.frozen
class Data:
    packet: bytes
    message_id: MessageId | None
    carries: int


class Opener:
    """The acceptor's side after the handshake: checks data frames' MACs and counters."""

    def __init__(self, key: bytes, nonce: bytes, i: Intro) -> None:
        self._key = session_key(key, nonce, i)
        self._aead = _aead(self._key) if i.encrypt else None
        self.counter = 0

    def _signed(self, kind: int, body: bytes, least: int) -> bytes:
        """The authenticated bytes of a frame body (decrypted if sealed); bad_mac if forged."""
        if self._aead is None:
            if len(body) < least + MAC_SIZE:
                raise FrameError("garbage", f"frame of {len(body)} bytes is too short")
            signed, mac = body[:-MAC_SIZE], body[-MAC_SIZE:]
            if not hmac.compare_digest(mac, hmac.digest(self._key, signed, "sha256")):
                raise FrameError("bad_mac", "data frame has a bad MAC")
            return signed
        if len(body) < least + TAG_SIZE:
            raise FrameError("garbage", f"frame of {len(body)} bytes is too short")
        ctr = body[: _CTR.size]
        try:
            plain: bytes = self._aead.decrypt(_nonce(ctr), body[_CTR.size :], bytes((kind,)) + ctr)
        except Exception:  # cryptography's InvalidTag
            raise FrameError("bad_mac", "data frame fails its authentication tag") from None
        return ctr + plain

    def open(self, body: bytes) -> Data:
        signed = self._signed(DATA, body, _DATA.size)
        counter, carries, origin, seq = _DATA.unpack_from(signed)
        if counter != self.counter + 1:
            raise FrameError(
                "replayed", f"DATA frame numbered {counter}, expected {self.counter + 1}"
            )
        if carries not in _CARRIES:
            raise FrameError("garbage", f"DATA frame says it carries kind {carries}")
        self.counter = counter
        mid = MessageId(origin, seq) if carries != CONTROL else None
        return Data(signed[_DATA.size :], mid, carries)

    def open_many(self, body: bytes) -> list[Data]:
        """The packets of a BATCH frame's body, in order; FrameError as for ``open``."""
        signed = self._signed(BATCH, body, _BATCH.size)
        counter, count = _BATCH.unpack_from(signed)
        if counter != self.counter + 1:
            raise FrameError(
                "replayed", f"BATCH frame numbered {counter}, expected {self.counter + 1}"
            )
        if count == 0:
            raise FrameError("garbage", "BATCH frame of no packets")
        out: list[Data] = []
        pos, end = _BATCH.size, len(signed)
        unpack, head = _ENTRY.unpack_from, _ENTRY.size
        for _ in range(count):
            if end - pos < head:
                raise FrameError("garbage", "BATCH frame ends inside an entry")
            carries, origin, seq, size = unpack(signed, pos)
            pos += head
            if carries not in _CARRIES:
                raise FrameError("garbage", f"BATCH entry says it carries kind {carries}")
            if size > end - pos:
                raise FrameError("garbage", f"BATCH entry of {size} bytes does not fit")
            mid = MessageId(origin, seq) if carries else None  # CONTROL is 0
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
    "INTRO",
    "MAX_BATCH",
    "MAX_FRAME",
    "NONCE_SIZE",
    "PREAUTH_LIMIT",
    "PROOF",
    "UNICAST",
    "Data",
    "FrameError",
    "FrameReader",
    "Intro",
    "Opener",
    "Sealer",
    "aead_available",
    "check_hello",
    "check_proof",
    "frame",
    "hello",
    "intro",
    "proof",
    "read_intro",
    "session_key",
    "table_digest",
]
