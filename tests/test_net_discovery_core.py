"""Discovery without I/O: packets and the node's view in, replies, probes and the join
to ask out (``mailroom.net.discovery``). No event loop, no socket: the service that
sends what it returns is exercised by ``test_net_discovery.py``'s real processes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mailroom.core.codec import decode
from mailroom.net import PeerTable
from mailroom.net.discovery import (
    NOTHING,
    Answer,
    Directory,
    Discovery,
    Probe,
    Roster,
    format_address,
)

SEED = ("127.0.0.1", 7000)


def fresh(pid: int = 0, own: tuple[str, int] = ("127.0.0.1", 7100)) -> Discovery:
    """P``pid`` of a growable group of 5, knowing only itself, with one seed."""
    table = PeerTable({}, size=5, seeds=(SEED, own))
    return Discovery(Directory(table, pid, own), pid, interval=0.5)


def addr(pid: int) -> str:
    return f"127.0.0.1:{7100 + pid}"


def roster(sender: int, view: int, members: tuple[int, ...], known: tuple[int, ...]) -> Roster:
    return Roster(sender, view, members, known, tuple(addr(p) for p in known))


def test_a_probe_is_answered_by_a_roster_of_the_view_and_teaches_its_senders_address() -> None:
    d = fresh()
    rest, answer = d.take(2, [(Probe(2, addr(2)), None)], (4, (0, 1)))
    assert rest == [] and answer.learned and answer.join is None
    ((to, data),) = answer.replies
    assert to == 2 and d.rosters_sent == 1
    assert decode(data) == Roster(0, 4, (0, 1), (0,), (addr(0),))
    assert d.directory.addresses[2] == ("127.0.0.1", 7102)
    # the same probe again: answered, nothing new learned
    _, again = d.take(2, [(Probe(2, addr(2)), None)], (4, (0, 1)))
    assert len(again.replies) == 1 and not again.learned and d.rosters_sent == 2


def test_a_probe_that_lies_about_its_sender_or_address_is_ignored() -> None:
    d = fresh()
    for bad in (Probe(3, addr(3)), Probe(2, "not an address"), Probe(2, "x" * 400)):
        before = dict(d.directory.addresses)
        rest, answer = d.take(2, [(bad, None)], None)
        assert rest == [] and answer.replies == () and not answer.learned
        assert d.directory.addresses == before and d.rosters_sent == 0


def test_other_packets_pass_through_in_order_and_a_batch_without_discovery_asks_nothing() -> None:
    d = fresh()
    batch: list[tuple[object, object]] = [("a", 1), ("b", 2)]
    rest, answer = d.take(1, batch, None)
    assert rest is batch and answer is NOTHING
    mixed: list[tuple[object, object]] = [("a", 1), (Probe(1, addr(1)), None), ("b", 2)]
    rest, answer = d.take(1, mixed, None)
    assert rest == [("a", 1), ("b", 2)] and len(answer.replies) == 1


def test_a_joiner_joins_through_the_first_view_a_roster_names_once_unless_refused() -> None:
    d = fresh(pid=3, own=("127.0.0.1", 7103))
    named = roster(1, 2, (0, 1, 3), (0, 1))
    _, answer = d.take(1, [(named, None)], None)
    assert answer.join == (0, 1) and answer.learned and d.heard == (0, 1, 3)
    _, again = d.take(1, [(named, None)], None)
    assert again.join is None  # asked already
    d.join_refused()
    _, retry = d.take(1, [(named, None)], None)
    assert retry.join == (0, 1)
    # a member with a view never asks; a roster without a view names nothing to join
    member = fresh(pid=4, own=("127.0.0.1", 7104))
    assert member.take(1, [(named, None)], (1, (0, 1, 4)))[1].join is None
    assert member.heard == (0, 1, 3)
    assert fresh().take(1, [(roster(1, 0, (), (1,)), None)], None)[1].join is None


def test_a_malformed_roster_is_ignored() -> None:
    d = fresh()
    bad = Roster(1, 2, (0, 1), (0, 1), (addr(0),))  # two pids, one address
    for r in (bad, roster(2, 2, (0, 1), (0, 1))):  # the second lies about its sender
        _, answer = d.take(1, [(r, None)], None)
        assert answer == Answer() and d.heard == ()
    assert set(d.directory.addresses) == {0}


def test_probes_go_to_the_seeds_and_the_known_members_while_something_is_wanting() -> None:
    d = fresh()
    assert d.wanting(None)
    first = d.probes(None)  # no view, nothing heard: every seed address but its own
    assert [a for a, _ in first.seeds] == [SEED] and first.members == ()
    assert decode(first.seeds[0][1]) == Probe(0, format_address(("127.0.0.1", 7100)))
    d.take(1, [(roster(1, 2, (0, 1, 2), (0, 1)), None)], (2, (0, 1, 2)))
    view = (2, (0, 1, 2))
    assert d.wanting(view)  # P2's address is not known
    assert [m for m, _ in d.probes(view).members] == [1]
    assert d.probes_sent == 1 + 2
    d.take(2, [(Probe(2, addr(2)), None)], view)
    assert not d.wanting(view)


def test_the_pause_doubles_while_nothing_is_learned_up_to_four_intervals() -> None:
    d = fresh()
    pauses = [d.interval]
    for _ in range(4):
        pauses.append(d.next_pause(pauses[-1], learned=False))
    assert pauses == [0.5, 1.0, 2.0, 2.0, 2.0]
    assert d.next_pause(2.0, learned=True) == 0.5


packets = st.one_of(
    st.builds(Probe, st.integers(0, 5), st.sampled_from([addr(p) for p in range(6)] + ["?"])),
    st.builds(
        lambda s, v, m, k, a: Roster(s, v, m, k, a),
        st.integers(0, 5),
        st.integers(0, 3),
        st.lists(st.integers(-1, 6), max_size=4).map(tuple),
        st.lists(st.integers(-1, 6), max_size=4).map(tuple),
        st.lists(st.sampled_from([addr(p) for p in range(6)] + ["?"]), max_size=4).map(tuple),
    ),
)


@given(st.lists(st.tuples(st.integers(1, 4), st.lists(packets, max_size=4)), max_size=12))
def test_what_a_peer_says_changes_its_own_entry_or_fills_a_gap_and_never_ours(
    reads: list[tuple[int, list[object]]],
) -> None:
    """Whatever authenticated peers send: a known entry changes only on its owner's
    word, this node's own entry never changes, and every reply goes to the sender."""
    d = fresh()
    own = d.directory.addresses[0]
    for peer, batch in reads:
        before = dict(d.directory.addresses)
        rest, answer = d.take(peer, [(p, None) for p in batch], None)
        assert rest == []
        after = d.directory.addresses
        assert after[0] == own
        for pid, address in after.items():
            if pid in before and before[pid] != address:
                assert pid == peer
        assert all(to == peer for to, _ in answer.replies)
        assert answer.learned == (after != before)
        assert answer.join is None or 0 not in answer.join
