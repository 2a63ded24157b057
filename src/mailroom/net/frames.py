"""Frames on a TCP connection, and the handshake that authenticates them (sans-IO).

Rules, in words:

- A connection carries frames one way: the process that connects (the sender,
  "connector") sends packets to the process that accepts (the receiver,
  "acceptor"). Two processes talk over two connections, one each way.
- Every frame is ``length (4 bytes, big-endian) type (1 byte) body``; the length
  counts the type and body and is at most ``MAX_FRAME``. A zero or larger length,
  or an unknown type, is garbage: the connection is closed.
- The handshake (``handshake``: GREET, CLAIM, CONFIRM) proves the group key both
  ways through a key exchange, so a peer without the key learns nothing it can
  test a guess of the key against; it ends with a session key for the data
  frames. Earlier releases (0.2.0 and before) spoke handshake 1 (CHALLENGE,
  INTRO, PROOF, HELLO, built by ``intro``, ``proof`` and ``hello`` here): a PROOF
  went to any INTRO, an HMAC under the group key that let a keyless peer test
  guesses offline. Nodes now recognise its frames only to refuse them with a
  reason (see ``handshake``); the builders stay for tests and tools.
- Before the handshake completes, a frame longer than the longest handshake
  frame is refused at its header (``PREAUTH_LIMIT``): an unauthenticated peer
  cannot make a process buffer more than that.
- Every ``DATA`` frame then carries a counter (1, 2, 3... on this connection),
  the application message id the packet carries (if any), whether that message
  was a broadcast, the packet's codec bytes and an HMAC-SHA256 over all of it
  with the connection's session key (from the handshake). A bad MAC is a
  forgery; a counter other than the next one is a replay (or a reordering TCP
  never makes). A replay on a new connection fails the MAC, because the session
  key is new. Either way the frame is dropped, counted and the connection closed.
- A ``BATCH`` frame carries several packets under one counter and one MAC:
  the counter, the number of packets, then for each its kind, message id,
  length and codec bytes, and the HMAC-SHA256 over all of it. It is checked
  like a ``DATA`` frame (MAC, then counter) and then parsed strictly: a count of
  zero, an entry that does not fit, an unknown kind or trailing bytes is
  garbage. The runtime sends one ``BATCH`` frame for the packets that one write
  takes to a peer (``Sealer.seal_many``), so the MAC and the frame header are
  paid once per write, not once per packet; a lone packet still goes as ``DATA``.

- With ``encrypt`` (both sides must agree; the handshake says it and its MACs
  cover it), a DATA or BATCH frame's body after the counter is sealed with
  ChaCha20-Poly1305 under the session key, the counter as nonce and the frame
  type and counter as associated data: the 16-byte tag replaces the HMAC.
  The cipher is the ``cryptography`` package's (a dependency of mailroom).
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from collections.abc import Iterator, Sequence
from typing import Any, Self

import attrs

from mailroom.core.errors import MailroomError
from mailroom.core.messages import MessageId

MAX_FRAME = 1 << 20
NONCE_SIZE = 16
MAC_SIZE = 32
TAG_SIZE = 16

CHALLENGE, HELLO, DATA, BATCH, INTRO, PROOF = 1, 2, 3, 4, 5, 6
#: Handshake 2's frames (``handshake``): acceptor, connector, acceptor.
GREET, CLAIM, CONFIRM = 7, 8, 9
_KINDS = frozenset((CHALLENGE, HELLO, DATA, BATCH, INTRO, PROOF, GREET, CLAIM, CONFIRM))
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
#: The longest frame (type and body) accepted before the handshake completes: a CLAIM
#: (pids, table digest, flags, nonce, key share, MAC).
PREAUTH_LIMIT = 1 + 2 + 2 + 32 + 1 + NONCE_SIZE + 32 + MAC_SIZE


class FrameError(MailroomError):
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

    @property
    def buffered(self) -> int:
        """Bytes of a frame not complete yet."""
        return len(self._buf)

    def frames(self, data: bytes | memoryview) -> Iterator[tuple[int, bytes]]:
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
    """Handshake 1's INTRO (earlier releases): what a connector says about itself."""

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
    """Handshake 1's INTRO frame, which a connector of an earlier release sends."""
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
    """Handshake 1's PROOF frame: the acceptor (which sent ``nonce``) knows the key. It is
    the HMAC a keyless peer could test guesses against: nodes no longer send it."""
    return frame(PROOF, _mac(key, b"mailroom-proof", nonce, i))


def hello(key: bytes, nonce: bytes, i: Intro) -> bytes:
    """Handshake 1's HELLO frame: the connector knows the key too."""
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
    """Handshake 1's key that authenticates (and, with ``encrypt``, seals) one
    connection's frames."""
    return hmac.digest(key, i.signed(b"mailroom-session", nonce), "sha256")


def _aead(key: bytes) -> Any:
    from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

    return ChaCha20Poly1305(key)


def check_cipher() -> None:
    """Build the cipher ``encrypt`` uses once, with a throwaway key: a ``cryptography``
    that cannot give it fails when the transport is made, not at its first connection."""
    _aead(bytes(32))


def _nonce(counter: bytes) -> bytes:
    return b"\0\0\0\0" + counter


class _Session:
    """A connection's session key (and cipher, with ``encrypt``) and its frame counter.

    ``key`` is the session key (handshake 2's, ``keyed``: what the runtime uses), unless
    handshake 1's INTRO ``i`` is given (``Sealer(key, nonce, i)``, for tests and tools):
    then it is the group key, from which ``nonce`` and ``i`` derive the session key,
    and ``i.encrypt`` says whether to seal. One constructor for both: compiled by mypyc,
    a class's ``__new__`` runs its ``__init__`` too, so no other way can skip it.
    """

    def __init__(
        self, key: bytes, nonce: bytes = b"", i: Intro | None = None, *, encrypt: bool = False
    ) -> None:
        if i is not None:
            key, encrypt = session_key(key, nonce, i), i.encrypt
        elif nonce:
            raise TypeError("a nonce derives a session key only with handshake 1's INTRO")
        self._key = key
        self._aead = _aead(key) if encrypt else None
        self.counter = 0

    @classmethod
    def keyed(cls, session: bytes, encrypt: bool) -> Self:
        """The same for a session key that handshake 2 made (``handshake.session``)."""
        return cls(session, encrypt=encrypt)


class Sealer(_Session):
    """The connector's side after the handshake: numbers and MACs (or seals) data frames."""

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


#: A frame's packets, decoded: (packet, its frame entry).
Batch = list[tuple[object, Data]]


class Opener(_Session):
    """The acceptor's side after the handshake: checks data frames' MACs and counters."""

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
    "CLAIM",
    "CONFIRM",
    "CONTROL",
    "DATA",
    "GREET",
    "HELLO",
    "INTRO",
    "MAX_BATCH",
    "MAX_FRAME",
    "NONCE_SIZE",
    "PREAUTH_LIMIT",
    "PROOF",
    "UNICAST",
    "Batch",
    "Data",
    "FrameError",
    "FrameReader",
    "Intro",
    "Opener",
    "Sealer",
    "check_cipher",
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
