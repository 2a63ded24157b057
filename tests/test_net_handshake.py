"""Handshake 2 and its key exchange: mutual proof of the group key, no replay, and
nothing a keyless peer can test a guess of the key against.

- X25519 gives RFC 7748's bytes, from the ``cryptography`` package and in Python;
  Elligator 2 maps to points of the curve (not its twist); shares commute.
- A CLAIM and a CONFIRM check only under the group key, for their own connection
  (nonces, shares, pids, table, encryption setting) and direction; a low-order share
  is refused; a peer of an earlier release is named as such.
- Over a socket, a keyless connector gets a GREET and nothing else (no MAC), and is
  refused at its first frame.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom.net import Node, pake
from mailroom.net import frames as fr
from mailroom.net import handshake as hs
from mailroom.protocols import CBCAST

from .net_support import KEY, RawClient, listening_sockets, table_of

DIGEST = fr.table_digest({0: "127.0.0.1:7001", 1: "127.0.0.1:7002"})
G = pake.generator(KEY, DIGEST)
BACKENDS = [pake._library_x25519]

#: RFC 7748, section 5.2 and 6.1: (scalar, u, scalar·u).
VECTORS = [
    (
        "a546e36bf0527c9d3b16154b82465edd62144c0ac1fc5a18506a2244ba449ac4",
        "e6db6867583030db3594c1a424b15f7c726624ec26b3353b10a903a6d0ab1c4c",
        "c3da55379de9c6908e94ea4df28d084f32eccf03491c71f754b4075577a28552",
    ),
    (
        "4b66e9d4d1b4673c5ad22691957d6af5c11b6421e0ea01d42ca4169e7918ba0d",
        "e5210f12786811d3f4b7959d0538ae2c31dbe7106fc03c3efc4cd549c715a493",
        "95cbde9476e8907d7aade45cb4b873f88b595a68799fa152e6f8f7647aac7957",
    ),
    (
        "77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a",
        "0900000000000000000000000000000000000000000000000000000000000000",
        "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a",
    ),
]


@pytest.mark.parametrize("x25519", BACKENDS)
def test_x25519_gives_the_bytes_of_rfc_7748(x25519: Callable[[bytes, bytes], bytes]) -> None:
    for scalar, u, out in VECTORS:
        assert x25519(bytes.fromhex(scalar), bytes.fromhex(u)).hex() == out


def _on_curve(u: int) -> bool:
    v2 = (u * u * u + 486662 * u * u + u) % pake.P
    return v2 == 0 or pow(v2, (pake.P - 1) // 2, pake.P) == 1


@settings(max_examples=200)
@given(st.integers(0, pake.P - 1))
def test_elligator_2_maps_onto_the_curve(r: int) -> None:
    assert _on_curve(pake._elligator2(r))


@settings(max_examples=20, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32))
def test_shares_commute_and_both_backends_agree(a: bytes, b: bytes) -> None:
    outs = set()
    for x25519 in BACKENDS:
        ab = x25519(a, x25519(b, G))
        assert ab == x25519(b, x25519(a, G))
        outs.add(ab)
    assert len(outs) == 1


def test_the_generator_depends_on_the_key_and_the_table() -> None:
    other = fr.table_digest({0: "127.0.0.1:7001"})
    gens = {G, pake.generator(KEY + b"!", DIGEST), pake.generator(KEY, other)}
    assert len(gens) == 3 and all(_on_curve(int.from_bytes(g, "little")) for g in gens)


def _handshake(
    key_c: bytes = KEY, key_a: bytes = KEY, encrypt: bool = False
) -> tuple[pake.KeyPair, hs.Greeting, hs.Claim, bytes]:
    """A CLAIM from P1 (key ``key_c``) to P0's GREET (whose pair is returned)."""
    pair = pake.KeyPair.fresh(pake.generator(key_a, DIGEST))
    greeting = hs.Greeting(b"a" * fr.NONCE_SIZE, pair.share)
    unsigned = hs.Claim(1, 0, DIGEST, encrypt, b"c" * fr.NONCE_SIZE, b"")
    claim, secret = hs.claim(key_c, pake.generator(key_c, DIGEST), greeting, unsigned)
    return pair, greeting, claim, secret


def test_the_handshake_proves_the_key_both_ways() -> None:
    pair, greeting, claim, secret = _handshake()
    ((kind, body),) = fr.FrameReader(fr.PREAUTH_LIMIT).feed(claim.frame())
    assert hs.read_claim(kind, body, {0, 1}, "here") == claim
    assert hs.check_claim(KEY, pair, greeting, claim) == secret
    ((kind, body),) = fr.FrameReader(fr.PREAUTH_LIMIT).feed(hs.confirm(secret, 41))
    assert hs.check_confirm(secret, body, kind, 0) == 41
    ((kind, body),) = fr.FrameReader(fr.PREAUTH_LIMIT).feed(greeting.frame())
    assert hs.read_greeting(kind, body, 0) == greeting
    # Both ends get the same session key, and another connection another one.
    assert hs.session(secret) != hs.session(_handshake()[3])


def _refused(check: Callable[[], object]) -> str:
    with pytest.raises(fr.FrameError) as err:
        check()
    return err.value.reason


def test_a_claim_or_confirm_checks_only_under_the_key_for_its_own_connection() -> None:
    pair, greeting, claim, secret = _handshake()
    other = hs.Greeting(b"o" * fr.NONCE_SIZE, pair.share)
    bad = [
        lambda: hs.check_claim(b"x" * 32, pair, greeting, claim),  # an acceptor without the key
        lambda: hs.check_claim(KEY, *_handshake(key_c=b"x" * 32)[:3]),  # a connector without it
        lambda: hs.check_claim(KEY, pair, other, claim),  # replayed to another GREET
        lambda: hs.check_claim(KEY, pake.KeyPair.fresh(G), greeting, claim),  # another share
        lambda: hs.check_claim(KEY, pair, greeting, attrs.evolve(claim, dest=1)),  # for another
        lambda: hs.check_claim(KEY, pair, greeting, attrs.evolve(claim, sender=2)),
        lambda: hs.check_claim(KEY, pair, greeting, attrs.evolve(claim, encrypt=True)),  # downgrade
        lambda: hs.check_claim(KEY, pair, greeting, attrs.evolve(claim, digest=b"d" * 32)),
        lambda: hs.check_claim(KEY, pair, greeting, attrs.evolve(claim, share=bytes(32))),
        lambda: hs.check_confirm(secret, hs.confirm(_handshake()[3], 0)[5:], fr.CONFIRM, 0),
        lambda: hs.check_confirm(secret, hs.confirm(secret, 7)[5:-8] + bytes(8), fr.CONFIRM, 0),
    ]
    assert [_refused(check) for check in bad] == ["bad_mac"] * len(bad)
    # The CLAIM's MAC reflected as a CONFIRM: another frame type, another label.
    reflected = claim.mac + bytes(8)
    assert _refused(lambda: hs.check_confirm(secret, reflected, fr.CLAIM, 0)) == "garbage"
    assert _refused(lambda: hs.check_confirm(secret, reflected, fr.CONFIRM, 0)) == "bad_mac"


def test_a_peer_of_an_earlier_release_is_named_as_such() -> None:
    with pytest.raises(fr.FrameError) as err:
        hs.read_greeting(fr.CHALLENGE, b"n" * fr.NONCE_SIZE, 1)
    assert err.value.reason == "refused" and hs.OLD_RELEASE in str(err.value)
    intro = fr.intro(1, 0, DIGEST, b"c" * fr.NONCE_SIZE)
    ((kind, body),) = fr.FrameReader(fr.PREAUTH_LIMIT).feed(intro)
    with pytest.raises(fr.FrameError) as err:
        hs.read_claim(kind, body, {0, 1}, "127.0.0.1")
    assert err.value.reason == "refused" and hs.OLD_RELEASE in str(err.value)
    assert "\n" not in str(err.value)


def test_a_keyless_connector_gets_a_greet_and_nothing_else() -> None:
    socks = listening_sockets(2)
    table = table_of(socks)

    async def main() -> tuple[bytes, int, int]:
        node = Node(CBCAST(0, 2), table, KEY, listen=socks[0])
        await node.start()

        def attacker() -> bytes:
            c = RawClient(socks[0].getsockname()[1])
            c.claim(1, 0, table, key=b"a guess of the group key, 32 b!!")
            c.sock.settimeout(5)
            rest = b""
            try:
                while chunk := c.sock.recv(4096):
                    rest += chunk
            except (TimeoutError, ConnectionError):
                pass
            c.close()
            return rest

        rest = await asyncio.to_thread(attacker)
        await node.close()
        socks[1].close()
        return rest, node.stats.bad_mac, node.stats.authenticated

    rest, bad_mac, authenticated = asyncio.run(main())
    assert rest == b""  # after the GREET: no CONFIRM, no MAC of any kind
    assert (bad_mac, authenticated) == (1, 0)
