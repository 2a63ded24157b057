"""Handshake 2: how a connection proves the group key both ways (sans-IO).

Rules, in words:

1. acceptor -> ``GREET``: the handshake's version (``VERSION``), a fresh nonce and
   its key share ``a·G`` (``pake``: ``G`` is derived from the group key and the
   peer table; the acceptor renews its share every ``SHARE_LIFETIME`` seconds);
2. connector -> ``CLAIM``: its pid, the pid it means to reach, the peer table's
   digest, whether it encrypts, a fresh nonce, its key share ``c·G`` (fresh per
   connection) and its MAC;
3. acceptor -> ``CONFIRM``: its MAC, and the highest message id of the connector's
   that it has seen (``seen``: a restarted process learns that way whether its
   checkpoint is behind what its peers have; see ``Node``).

Both sides compute ``secret = HMAC-SHA256(group key, LABEL || a·c·G || transcript)``,
the transcript being the version, the GREET's nonce and share and the CLAIM's
fields before its MAC. The CLAIM's MAC is ``HMAC(secret, "claim")``, the CONFIRM's
``HMAC(secret, "confirm" || seen)``, the data frames' session key
``HMAC(secret, "session")``.

- A peer without the key learns nothing it can test a guess against: a share is a
  uniformly random point whatever the key, and a MAC depends on ``a·c·G``, which a
  peer can compute for the one generator (one guess of the key) it made its own
  share with. So each connection tests at most one guess, online, and is counted
  (``bad_mac``). Keys are 32 bytes or more (``config.MIN_KEY``), so online guessing
  is hopeless too.
- The acceptor knows at the CLAIM, the connector's first message, whether the
  connector holds the key: a keyless connection is refused one round trip after it
  is accepted (``admission``). The connector sends no data frame before the
  CONFIRM: a process squatting a member's address without the key gets a CLAIM
  (one guess, as above) and nothing else.
- Replay and reflection: the CLAIM's MAC covers the acceptor's fresh nonce and
  share, the CONFIRM's the connector's; the labels differ. Both pids, the table
  digest and the encryption setting are in the transcript, so a CLAIM meant for
  another process or group, or one whose ``encrypt`` was stripped, fails.
- A peer of an earlier release (handshake 1: a 16-byte ``CHALLENGE``, or an
  ``INTRO``) is refused, with a line that says so (``OLD_RELEASE``): handshake 1
  answered any INTRO with an HMAC under the group key.
"""

from __future__ import annotations

import hmac
import struct

import attrs

from mailroom.net import frames as fr
from mailroom.net import pake

#: The handshake's version, the first byte of every GREET.
VERSION = 2
#: Seconds an acceptor's key share is used for before it is renewed.
SHARE_LIFETIME = 1.0
#: Why a peer of an earlier release is refused (one line, with its pid or address).
OLD_RELEASE = (
    "speaks the handshake of an earlier release (mailroom 0.2.0 or before), which this "
    "release refuses: upgrade every member (see docs/runtime-operations.md, upgrading)"
)

_LABEL = b"mailroom-handshake-2"
_GREET = struct.Struct(f">B{fr.NONCE_SIZE}s{pake.SIZE}s")
#: A CLAIM's fields before its MAC: sender, dest, table digest, flags, nonce, key share.
_FIELDS = struct.Struct(f">HH32sB{fr.NONCE_SIZE}s{pake.SIZE}s")
_SEEN = struct.Struct(">Q")


@attrs.frozen
class Greeting:
    """The acceptor's GREET: its nonce and its key share."""

    nonce: bytes
    share: bytes

    def frame(self) -> bytes:
        return fr.frame(fr.GREET, _GREET.pack(VERSION, self.nonce, self.share))


@attrs.frozen
class Claim:
    """The connector's CLAIM: who it is, whom it means to reach, its group's table digest
    and encryption setting, its nonce and key share, and its MAC."""

    sender: int
    dest: int
    digest: bytes
    encrypt: bool
    nonce: bytes
    share: bytes
    mac: bytes = b""

    def fields(self) -> bytes:
        """The CLAIM's bytes before its MAC (the transcript's end)."""
        flags = fr.ENCRYPT if self.encrypt else 0
        return _FIELDS.pack(self.sender, self.dest, self.digest, flags, self.nonce, self.share)

    def frame(self) -> bytes:
        return fr.frame(fr.CLAIM, self.fields() + self.mac)


def read_greeting(kind: int, body: bytes, peer: int) -> Greeting:
    """The GREET an acceptor sent; FrameError("refused") from an earlier release,
    ("garbage") for anything else."""
    if kind == fr.CHALLENGE and len(body) == fr.NONCE_SIZE:
        raise fr.FrameError("refused", f"P{peer} {OLD_RELEASE}")
    if kind != fr.GREET or len(body) != _GREET.size:
        raise fr.FrameError("garbage", f"P{peer} sent frame type {kind} instead of a GREET")
    version, nonce, share = _GREET.unpack(body)
    if version != VERSION:
        raise fr.FrameError("refused", f"P{peer} speaks handshake {version}, not {VERSION}")
    return Greeting(nonce, share)


def read_claim(kind: int, body: bytes, known: set[int], who: str) -> Claim:
    """The CLAIM a connector sent (from a pid in ``known``); FrameError("refused") from
    an earlier release, ("garbage") or ("unknown_peer") for anything else."""
    if kind == fr.INTRO:
        raise fr.FrameError("refused", f"{who} {OLD_RELEASE}")
    if kind != fr.CLAIM or len(body) != _FIELDS.size + fr.MAC_SIZE:
        raise fr.FrameError("garbage", f"expected a CLAIM, got frame type {kind}")
    sender, dest, digest, flags, nonce, share = _FIELDS.unpack_from(body)
    mac = body[_FIELDS.size :]
    if flags not in (0, fr.ENCRYPT):
        raise fr.FrameError("garbage", f"CLAIM with flags {flags}")
    if sender not in known:
        raise fr.FrameError("unknown_peer", f"CLAIM from P{sender}, which is not in the peer table")
    return Claim(sender, dest, digest, bool(flags), nonce, share, mac)


def _secret(key: bytes, dh: bytes, greeting: Greeting, claim: Claim) -> bytes:
    transcript = bytes((VERSION,)) + greeting.nonce + greeting.share + claim.fields()
    return hmac.digest(key, _LABEL + dh + transcript, "sha256")


def claim(key: bytes, g: bytes, greeting: Greeting, unsigned: Claim) -> tuple[Claim, bytes]:
    """The connector's CLAIM for ``greeting`` (``unsigned``: its fields, the nonce and
    share still to fill) and the handshake's secret; FrameError("bad_mac") if the
    acceptor's share is of low order (no key can come of it)."""
    pair = pake.KeyPair.fresh(g)
    try:
        dh = pair.shared(greeting.share)
    except ValueError:
        raise fr.FrameError("bad_mac", f"P{unsigned.dest} sent a key share of low order") from None
    made = attrs.evolve(unsigned, share=pair.share)
    secret = _secret(key, dh, greeting, made)
    return attrs.evolve(made, mac=hmac.digest(secret, b"claim", "sha256")), secret


def check_claim(key: bytes, pair: pake.KeyPair, greeting: Greeting, c: Claim) -> bytes:
    """The handshake's secret if the CLAIM's MAC is good; FrameError("bad_mac") if not."""
    try:
        dh = pair.shared(c.share)
    except ValueError:
        low = f"CLAIM from P{c.sender} has a key share of low order"
        raise fr.FrameError("bad_mac", low) from None
    secret = _secret(key, dh, greeting, c)
    if not hmac.compare_digest(c.mac, hmac.digest(secret, b"claim", "sha256")):
        raise fr.FrameError("bad_mac", f"CLAIM from P{c.sender} has a bad MAC")
    return secret


def confirm(secret: bytes, seen: int) -> bytes:
    """The acceptor's CONFIRM: its MAC, and the connector's highest message id it has seen."""
    tail = _SEEN.pack(seen)
    return fr.frame(fr.CONFIRM, hmac.digest(secret, b"confirm" + tail, "sha256") + tail)


def check_confirm(secret: bytes, body: bytes, kind: int, peer: int) -> int:
    """The ``seen`` a good CONFIRM carries; FrameError("bad_mac") or ("garbage")."""
    if kind != fr.CONFIRM or len(body) != fr.MAC_SIZE + _SEEN.size:
        raise fr.FrameError("garbage", f"P{peer} sent frame type {kind} instead of a CONFIRM")
    mac, tail = body[: fr.MAC_SIZE], body[fr.MAC_SIZE :]
    if not hmac.compare_digest(mac, hmac.digest(secret, b"confirm" + tail, "sha256")):
        raise fr.FrameError("bad_mac", f"P{peer} could not prove the group key")
    seen: int = _SEEN.unpack(tail)[0]
    return seen


def session(secret: bytes) -> bytes:
    """The key of the connection's data frames (``frames.Sealer.keyed``)."""
    return hmac.digest(secret, b"session", "sha256")


__all__ = [
    "OLD_RELEASE",
    "SHARE_LIFETIME",
    "VERSION",
    "Claim",
    "Greeting",
    "check_claim",
    "check_confirm",
    "claim",
    "confirm",
    "read_claim",
    "read_greeting",
    "session",
]
