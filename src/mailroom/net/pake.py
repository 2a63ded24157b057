"""X25519 with a generator derived from the group key: the key exchange under the handshake.

Why: a handshake whose first key-dependent message is an HMAC under the group key
hands anyone who connects a value to test key guesses against, offline and as fast
as HMAC runs. Here (CPace over Curve25519, with the generator fixed per group) the
generator ``G`` is a point derived from the group key and the peer table, and each
side sends ``x·G`` for a fresh secret scalar ``x``: for any generator that value is a
uniformly random point of the group, so it says nothing about the key. Both sides
then share ``x·y·G``; a peer without the key committed to one guess of ``G`` when it
chose its share, so each connection tests at most that one guess, online.

- ``generator(key, digest)``: SHA-512 of the key and the table digest, mapped to the
  curve by Elligator 2 (RFC 9380, section 6.7.1). It runs once per node, so its
  branches leak nothing about the key to anyone who times the handshake.
- ``x25519(scalar, u)``: RFC 7748's function, from the ``cryptography`` package
  (constant time; a dependency of mailroom, never hand-written here).
- ``KeyPair``: a fresh scalar and its share ``scalar·G``.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

import attrs

P = 2**255 - 19
_A = 486662
_A24 = 121665
#: Elligator 2's non-square for Curve25519.
_Z = 2
#: Bytes of a scalar, a point (its u-coordinate) and a shared secret.
SIZE = 32


def _library_key(scalar: bytes) -> Any:
    """The ``cryptography`` package's key for ``scalar`` (made once: making it costs a
    scalar multiplication)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    return X25519PrivateKey.from_private_bytes(scalar)


def _library_exchange(secret: Any, u: bytes) -> bytes:
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

    try:
        out: bytes = secret.exchange(X25519PublicKey.from_public_bytes(u))
    except ValueError:  # the library refuses an all-zero result (a low-order point)
        return bytes(SIZE)
    return out


def _library_x25519(scalar: bytes, u: bytes) -> bytes:
    return _library_exchange(_library_key(scalar), u)


def _checked(out: bytes) -> bytes:
    if out == bytes(SIZE):
        raise ValueError("the peer's key share is a point of low order")
    return out


def x25519(scalar: bytes, u: bytes) -> bytes:
    """``scalar·u`` (32-byte little-endian u-coordinates); ValueError if the result is
    the identity (``u`` of low order: no shared secret)."""
    if len(scalar) != SIZE or len(u) != SIZE:
        raise ValueError("X25519 takes a 32-byte scalar and a 32-byte point")
    return _checked(_library_x25519(scalar, u))


def _elligator2(r: int) -> int:
    """The u-coordinate of the Curve25519 point Elligator 2 maps field element ``r`` to."""
    t = _Z * r * r % P
    x1 = -_A * pow(1 + t, P - 2, P) % P if (1 + t) % P else -_A % P
    gx1 = (x1 * x1 * x1 + _A * x1 * x1 + x1) % P
    square = gx1 == 0 or pow(gx1, (P - 1) // 2, P) == 1
    return x1 if square else (-x1 - _A) % P


def generator(key: bytes, digest: bytes) -> bytes:
    """The group's generator: a point derived from the group ``key`` and the peer
    table's ``digest`` (so another group, or another table, has another)."""
    h = hashlib.sha512(b"mailroom-pake-1" + len(key).to_bytes(2, "big") + key + digest)
    return _elligator2(int.from_bytes(h.digest(), "little") % P).to_bytes(SIZE, "little")


@attrs.frozen
class KeyPair:
    """A fresh secret scalar and its share ``scalar·G``."""

    scalar: bytes = attrs.field(repr=False)
    share: bytes
    _key: Any = attrs.field(repr=False, eq=False)

    @classmethod
    def fresh(cls, g: bytes) -> KeyPair:
        scalar = os.urandom(SIZE)
        key = _library_key(scalar)
        return cls(scalar, _checked(cls._times(key, g)), key)

    @staticmethod
    def _times(key: Any, u: bytes) -> bytes:
        if len(u) != SIZE:
            raise ValueError("a key share is 32 bytes")
        return _library_exchange(key, u)

    def shared(self, theirs: bytes) -> bytes:
        """``scalar·theirs``; ValueError if ``theirs`` is of low order."""
        return _checked(self._times(self._key, theirs))


__all__ = ["SIZE", "KeyPair", "generator", "x25519"]
