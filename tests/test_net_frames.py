"""The sans-IO parts of mailroom.net: frames, the handshake, the peer table, the key."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId
from mailroom.net import KEY_ENV, Node, PeerTable, generate_key, load_key
from mailroom.net import frames as fr
from mailroom.net.config import check_key
from mailroom.protocols import CBCAST

KEY = b"k" * 32
NONCE = b"n" * fr.NONCE_SIZE
TABLE = {0: "127.0.0.1:7001", 1: "127.0.0.1:7002", 2: "127.0.0.1:7003"}
INTRO = fr.Intro(1, 0, fr.table_digest(TABLE), False, b"c" * fr.NONCE_SIZE)


def _pair(encrypt: bool = False) -> tuple[fr.Sealer, fr.Opener]:
    i = attrs.evolve(INTRO, encrypt=encrypt)
    return fr.Sealer(KEY, NONCE, i), fr.Opener(KEY, NONCE, i)


def _body(data: bytes) -> bytes:
    ((kind, body),) = fr.FrameReader().feed(data)
    assert kind == fr.DATA
    return body


@given(st.lists(st.binary(max_size=64), max_size=8), st.integers(1, 7))
def test_frames_survive_any_split_of_the_stream(packets: list[bytes], chunk: int) -> None:
    sealer, opener = _pair()
    stream = b"".join(
        sealer.seal(p, MessageId(1, k + 1), fr.UNICAST) for k, p in enumerate(packets)
    )
    reader = fr.FrameReader()
    got = []
    for i in range(0, len(stream), chunk):
        for kind, body in reader.feed(stream[i : i + chunk]):
            assert kind == fr.DATA
            got.append(opener.open(body))
    assert [d.packet for d in got] == packets
    assert [d.message_id for d in got] == [MessageId(1, k + 1) for k in range(len(packets))]


def test_bad_mac_is_a_forgery() -> None:
    sealer, opener = _pair()
    forged = fr.Sealer(b"x" * 32, NONCE, INTRO).seal(b"p", None, fr.CONTROL)
    with pytest.raises(fr.FrameError) as err:
        opener.open(_body(forged))
    assert err.value.reason == "bad_mac"
    tampered = bytearray(sealer.seal(b"payload", None, fr.CONTROL))
    tampered[-40] ^= 1
    with pytest.raises(fr.FrameError) as err:
        opener.open(_body(bytes(tampered)))
    assert err.value.reason == "bad_mac"


def test_a_frame_opens_once_and_only_on_its_connection() -> None:
    sealer, opener = _pair()
    frame = sealer.seal(b"p", None, fr.CONTROL)
    opener.open(_body(frame))
    with pytest.raises(fr.FrameError) as err:
        opener.open(_body(frame))
    assert err.value.reason == "replayed"
    other = fr.Opener(KEY, b"m" * fr.NONCE_SIZE, INTRO)  # another connection's nonce
    with pytest.raises(fr.FrameError) as err:
        other.open(_body(frame))
    assert err.value.reason == "bad_mac"
    theirs = fr.Opener(KEY, NONCE, attrs.evolve(INTRO, nonce=b"d" * fr.NONCE_SIZE))
    with pytest.raises(fr.FrameError) as err:  # the connector's nonce differs
        theirs.open(_body(frame))
    assert err.value.reason == "bad_mac"
    wrong_way = fr.Opener(KEY, NONCE, attrs.evolve(INTRO, sender=0, dest=1))
    with pytest.raises(fr.FrameError):
        wrong_way.open(_body(frame))


@pytest.mark.parametrize("encrypt", [False, True])
def test_a_keyed_session_is_the_session_its_key_names(encrypt: bool) -> None:
    """``keyed`` (how the runtime makes both ends from handshake 2's session key) makes
    the session that the group key, nonce and INTRO derive: each opens the other's
    frames from counter 1, sealed when ``encrypt``; another session key opens none.
    (Compiled, ``keyed`` once skipped ``__init__`` through ``__new__``, a TypeError under
    mypyc: no node connected.)"""
    if encrypt:
        pytest.importorskip("cryptography")
    i = attrs.evolve(INTRO, encrypt=encrypt)
    session = fr.session_key(KEY, NONCE, i)
    sealer, opener = fr.Sealer.keyed(session, encrypt), fr.Opener.keyed(session, encrypt)
    assert (sealer.counter, opener.counter) == (0, 0)
    packet = b"the keyed packet"
    data = sealer.seal(packet, MessageId(1, 1), fr.UNICAST)
    assert (packet in data) is not encrypt
    assert fr.Opener(KEY, NONCE, i).open(_body(data)).packet == packet
    back = fr.Sealer(KEY, NONCE, i).seal(packet, None, fr.CONTROL)
    assert (opener.open(_body(back)).packet, opener.counter) == (packet, 1)
    other = fr.Opener.keyed(fr.session_key(KEY, b"m" * fr.NONCE_SIZE, i), encrypt)
    with pytest.raises(fr.FrameError) as err:
        other.open(_body(data))
    assert err.value.reason == "bad_mac"
    with pytest.raises(TypeError):  # a nonce derives nothing without handshake 1's INTRO
        fr.Sealer(KEY, NONCE)


@pytest.mark.parametrize(
    "data",
    [b"\x00\x00\x00\x00\x03", b"\xff\xff\xff\xff\x03", b"\x00\x00\x00\x02\x7fx", b"GET / HTTP/1.1"],
)
def test_garbage_is_refused(data: bytes) -> None:
    with pytest.raises(fr.FrameError) as err:
        fr.FrameReader().feed(data)
    assert err.value.reason == "garbage"


def test_handshake_1_of_earlier_releases_proves_the_key_both_ways() -> None:
    """Handshake 1's builders, which nodes no longer speak (test_net_handshake.py has
    handshake 2), still make and check what earlier releases send."""
    digest = fr.table_digest(TABLE)
    ((_, body),) = fr.FrameReader().feed(fr.intro(2, 0, digest, b"c" * fr.NONCE_SIZE))
    i = fr.read_intro(body, {0, 1, 2})
    assert (i.sender, i.dest, i.digest, i.encrypt) == (2, 0, digest, False)
    with pytest.raises(fr.FrameError) as err:
        fr.read_intro(body, {0, 1})
    assert err.value.reason == "unknown_peer"
    ((_, proof),) = fr.FrameReader().feed(fr.proof(KEY, NONCE, i))
    fr.check_proof(KEY, NONCE, i, proof)
    ((_, hello),) = fr.FrameReader().feed(fr.hello(KEY, NONCE, i))
    fr.check_hello(KEY, NONCE, i, hello)
    bad = [
        lambda: fr.check_proof(b"x" * 32, NONCE, i, proof),  # an acceptor without the key
        lambda: fr.check_proof(KEY, NONCE, i, hello),  # the HELLO reflected as a PROOF
        lambda: fr.check_hello(KEY, NONCE, i, proof),  # the PROOF reflected as a HELLO
        lambda: fr.check_hello(KEY, b"o" * fr.NONCE_SIZE, i, hello),  # a replayed HELLO
        lambda: fr.check_hello(KEY, NONCE, attrs.evolve(i, dest=1), hello),  # for another
        lambda: fr.check_hello(KEY, NONCE, attrs.evolve(i, encrypt=True), hello),  # downgrade
    ]
    for check in bad:
        with pytest.raises(fr.FrameError) as err:
            check()
        assert err.value.reason == "bad_mac"
    assert fr.table_digest({**TABLE, 2: "127.0.0.1:7004"}) != digest


def test_before_the_handshake_a_long_frame_is_refused_at_its_header() -> None:
    reader = fr.FrameReader(fr.PREAUTH_LIMIT)
    with pytest.raises(fr.FrameError) as err:
        reader.feed((1 << 20).to_bytes(4, "big") + bytes([fr.HELLO]))
    assert err.value.reason == "garbage"
    ok = fr.FrameReader(fr.PREAUTH_LIMIT)
    assert ok.feed(fr.intro(1, 0, b"d" * 32, b"c" * fr.NONCE_SIZE))[0][0] == fr.INTRO


def test_encrypted_frames_hide_the_packet_and_refuse_tampering() -> None:
    pytest.importorskip("cryptography")
    sealer, opener = _pair(encrypt=True)
    secret = b"the secret packet"
    data = sealer.seal_many([(secret, MessageId(1, 1), fr.BROADCAST)])
    batch = sealer.seal_many([(secret, None, fr.CONTROL), (b"more", None, fr.CONTROL)])
    assert secret not in data and secret not in batch
    got = opener.open(_body(data))
    assert (got.packet, got.message_id) == (secret, MessageId(1, 1))
    ((_, body),) = fr.FrameReader().feed(batch)
    assert [d.packet for d in opener.open_many(body)] == [secret, b"more"]
    with pytest.raises(fr.FrameError) as err:
        opener.open_many(body)
    assert err.value.reason == "replayed"
    tampered = bytearray(sealer.seal(b"p", None, fr.CONTROL))
    tampered[20] ^= 1
    with pytest.raises(fr.FrameError) as err:
        opener.open(_body(bytes(tampered)))
    assert err.value.reason == "bad_mac"
    plain_opener = _pair(encrypt=False)[1]  # a member that does not encrypt
    with pytest.raises(fr.FrameError):
        plain_opener.open(_body(_pair(encrypt=True)[0].seal(b"p", None, fr.CONTROL)))


def test_peer_table_from_toml(tmp_path: Path) -> None:
    path = tmp_path / "peers.toml"
    path.write_text(
        'key_file = "group.key"\n[peers]\n0 = "127.0.0.1:7001"\n'
        '[peers.1]\nname = "bob"\naddress = "127.0.0.1:7002"\n'
    )
    table = PeerTable.load(path)
    assert table.n == 2
    assert table.addresses[1] == ("127.0.0.1", 7002)
    assert table.name(1) == "bob" and table.name(0) == "P0"
    assert table.key_file == tmp_path / "group.key"
    for bad in ['[peers]\n1 = "127.0.0.1:7001"\n', '[peers]\n0 = "nowhere"\n', "x = 1\n"]:
        path.write_text(bad)
        with pytest.raises(LocalError):
            PeerTable.load(path)


def test_key_from_file_or_environment(tmp_path: Path) -> None:
    key_file = tmp_path / "k"
    key_file.write_text("0123456789abcdef0123456789abcdef\n")
    assert load_key(key_file, env={}) == b"0123456789abcdef0123456789abcdef"
    assert load_key(None, env={KEY_ENV: "fedcba9876543210" * 2}) == b"fedcba9876543210" * 2
    with pytest.raises(LocalError):
        load_key(None, env={})
    with pytest.raises(LocalError):
        load_key(None, env={KEY_ENV: "short"})


def test_keys_below_32_bytes_are_refused_with_one_line(tmp_path: Path) -> None:
    key_file = tmp_path / "k"
    key_file.write_text("x" * 31 + "\n")
    for attempt in (lambda: load_key(key_file, env={}), lambda: check_key(b"y" * 16)):
        with pytest.raises(LocalError) as err:
            attempt()
        assert "at least 32" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(LocalError):  # the runtime refuses it too, not only the loader
        Node(CBCAST(0, 1), PeerTable.of({0: "127.0.0.1:9"}), b"k" * 31)


def test_load_key_creates_32_random_bytes_readable_by_its_owner_only(tmp_path: Path) -> None:
    path = tmp_path / "group.key"
    key = load_key(path, env={}, create=True)
    assert len(key) == 64 and bytes.fromhex(key.decode())  # 32 random bytes, as hex
    assert (path.stat().st_mode & 0o777) == 0o600
    assert load_key(path, env={}, create=True) == key  # there now: read, not replaced
    assert generate_key(tmp_path / "other.key") != key
    with pytest.raises(LocalError):  # never overwrites a key
        generate_key(path)


# -- BATCH frames: several packets under one counter and one MAC ------------------------------


@given(
    st.lists(st.lists(st.binary(max_size=40), min_size=1, max_size=6), max_size=5),
    st.integers(1, 9),
)
def test_batches_survive_any_split_and_keep_order(writes: list[list[bytes]], chunk: int) -> None:
    sealer, opener = _pair()
    items = [
        [
            (p, MessageId(1, k + 1) if k % 2 else None, fr.UNICAST if k % 2 else fr.CONTROL)
            for k, p in enumerate(w)
        ]
        for w in writes
    ]
    stream = b"".join(sealer.seal_many(w) for w in items)
    reader = fr.FrameReader()
    got = []
    for i in range(0, len(stream), chunk):
        for kind, body in reader.feed(stream[i : i + chunk]):
            got += [opener.open(body)] if kind == fr.DATA else opener.open_many(body)
    want = [x for w in items for x in w]
    assert [(d.packet, d.message_id, d.carries) for d in got] == want
    assert sealer.counter == opener.counter == len(writes)  # one number per write


def test_one_packet_goes_as_data_and_a_batch_opens_once() -> None:
    sealer, opener = _pair()
    single = sealer.seal_many([(b"p", None, fr.CONTROL)])
    assert opener.open(_body(single)).packet == b"p"  # a lone packet is a plain DATA frame
    frame = sealer.seal_many([(b"a", None, fr.CONTROL), (b"b", MessageId(1, 1), fr.BROADCAST)])
    ((kind, body),) = fr.FrameReader().feed(frame)
    assert kind == fr.BATCH
    assert [d.packet for d in opener.open_many(body)] == [b"a", b"b"]
    with pytest.raises(fr.FrameError) as err:
        opener.open_many(body)
    assert err.value.reason == "replayed"
    tampered = bytearray(body)
    tampered[12] ^= 1
    with pytest.raises(fr.FrameError) as err:
        fr.Opener(KEY, NONCE, INTRO).open_many(bytes(tampered))
    assert err.value.reason == "bad_mac"


def _signed_batch(payload: bytes) -> bytes:
    """A BATCH body with a valid MAC and counter 1 around arbitrary entries."""
    import hmac

    key = fr.session_key(KEY, NONCE, INTRO)
    signed = payload
    return signed + hmac.digest(key, signed, "sha256")


@pytest.mark.parametrize(
    "signed",
    [
        (1).to_bytes(8, "big") + (0).to_bytes(2, "big"),  # no packets
        (1).to_bytes(8, "big") + (1).to_bytes(2, "big") + b"\x00" * 5,  # entry cut short
        (1).to_bytes(8, "big") + (1).to_bytes(2, "big") + b"\x07" + b"\x00" * 16,  # kind 7
        (1).to_bytes(8, "big") + (1).to_bytes(2, "big") + b"\x00" * 13 + b"\x00\x00\x00\x09",
        (1).to_bytes(8, "big") + (1).to_bytes(2, "big") + b"\x00" * 17 + b"x",  # trailing
    ],
)
def test_malformed_batches_are_garbage(signed: bytes) -> None:
    _, opener = _pair()
    with pytest.raises(fr.FrameError) as err:
        opener.open_many(_signed_batch(signed))
    assert err.value.reason == "garbage"
    assert opener.counter == 0  # nothing was accepted
