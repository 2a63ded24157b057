"""Discovery: how the members of a growable group find each other from seed addresses.

A peer table lists every member's address in advance; a growable group's table
(``size = N`` in ``peers.toml``) lists only what is known, maybe nothing, and
``seeds``: addresses where members may be found (JGroups' TCPPING, Akka's seed
nodes). Rules, in words:

- Identity and authentication are unchanged: a member is a pid below the group's
  size and proves the group key in the handshake. A growable group's CLAIM carries
  the digest of its size instead of its table's, accepts any pid below the size, and
  does not pin a pid to a host (a member may restart elsewhere). A connection to a
  seed names no pid (``ANY``): the connector does not know who listens there.
- ``Probe(sender, address)``: "process ``sender`` listens at ``address``; who are you?".
  The answer is a ``Roster``: the answerer's pid, its view (id and members; 0 and
  none while it joins) and the addresses it knows of them and of itself. So views
  carry their members' addresses: whoever asks a member learns its whole view.
- What a node learns: a Probe's address is its sender's own (it replaces what was
  known: a member restarted elsewhere); a Roster's rows fill addresses not known yet,
  except the answerer's own row, which is first-hand. What a member says changes its
  own entry only: no Probe or Roster removes or redirects another's entry, or the
  receiver's own.
- A node probes while it lacks something: every ``interval`` (growing to ``4 *
  interval`` while nothing changes), while it has no view or some member of its
  view has no known address, it probes the seed addresses and every member it knows of (of
  its view or, joining, of the last view a Roster named). A joiner that probes
  the members makes its own address known to all of them, the coordinator
  included, before its Join reaches them. A node with all it needs sends nothing.
- A joiner without contacts joins through the members of the first view a Roster
  names (``Node.join_through``); a joiner restarted from its checkpoint finds the
  group the same way.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
from typing import Any

import attrs

from mailroom.core.codec import encode
from mailroom.core.errors import LocalError
from mailroom.core.wire import as_row, packet
from mailroom.net import frames as fr
from mailroom.net.config import PeerTable, parse_address
from mailroom.net.names import ANY as ANY

log = logging.getLogger("mailroom.net")

#: Longest address a Probe or a Roster may carry.
MAX_ADDRESS = 300

Address = tuple[str, int]


@packet
@attrs.frozen
class Probe:
    """process ``sender`` listens at ``address`` and asks who is there (answered by a Roster)."""

    sender: int
    address: str


@packet
@attrs.frozen
class Roster:
    """process ``sender``'s view ``view`` (0 while it has none) with its ``members``, and the
    addresses it knows: ``known[k]`` listens at ``addresses[k]`` (itself included)."""

    sender: int
    view: int
    members: tuple[int, ...] = attrs.field(converter=as_row)
    known: tuple[int, ...] = attrs.field(converter=as_row)
    addresses: tuple[str, ...] = attrs.field(converter=as_row)


DISCOVERY = (Probe, Roster)


def growable_digest(size: int) -> bytes:
    """What a growable group's CLAIM carries instead of a peer table's digest."""
    return hashlib.sha256(f"mailroom growable group of {size}".encode()).digest()


def format_address(address: Address) -> str:
    host, port = address
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def read_address(text: object) -> Address | None:
    """``text`` as (host, port), or None if it is not one (a peer's bad row is skipped)."""
    if not isinstance(text, str) or len(text) > MAX_ADDRESS:
        return None
    try:
        return parse_address(text)
    except LocalError:
        return None


class Directory:
    """Where each member listens: a peer table's addresses and, in a growable group,
    those learned since. Read by the transport as it reads a peer table."""

    def __init__(self, table: PeerTable, pid: int, own: Address | None = None) -> None:
        self.table = table
        self.n = table.n
        self.growable = table.growable
        self.names = table.names
        self.seeds = table.seeds
        self.addresses: dict[int, Address] = dict(table.addresses)
        if own is not None:
            self.addresses[pid] = own
        if pid not in self.addresses:
            raise LocalError(f"P{pid} has no address: list it in the peer table, or pass one")
        if self.growable:
            self.digest = growable_digest(self.n)
            self._identities: set[int] = set(range(self.n))
        else:
            self.digest = fr.table_digest(table.entries())
            self._identities = set(self.addresses)
        self._changed = asyncio.Event() if self.growable else None

    def name(self, pid: int) -> str:
        return self.names.get(pid, f"P{pid}")

    def entries(self) -> dict[int, str]:
        return {pid: format_address(a) for pid, a in sorted(self.addresses.items())}

    def identities(self) -> set[int]:
        """The pids that may connect: a table's, or every pid below a growable size."""
        return self._identities

    def host_of(self, pid: int) -> str | None:
        """The host ``pid`` must connect from (a table's entry), or None (any host)."""
        return None if self.growable else self.addresses[pid][0]

    def learn(self, pid: int, address: Address, first_hand: bool) -> bool:
        """Note that ``pid`` listens at ``address``: first-hand (its own word) replaces
        what was known, second-hand fills a gap. True if something changed.

        A word about ``pid`` changes ``pid``'s entry alone: another member's entry at the
        same address stays until that member says otherwise (the handshake tells the
        two apart), so that no peer can erase or redirect someone else's entry, nor
        this node's own."""
        if not self.growable or not 0 <= pid < self.n or self.addresses.get(pid) == address:
            return False
        if pid in self.addresses and not first_hand:
            return False
        self.addresses[pid] = address
        if self._changed is not None:
            self._changed.set()
            self._changed = asyncio.Event()
        return True

    async def wait(self, pid: int) -> Address:
        """``pid``'s address, once known."""
        while (address := self.addresses.get(pid)) is None:
            assert self._changed is not None  # a table knows every pid
            await self._changed.wait()
        return address


def directory_of(
    table: PeerTable, pid: int, address: str | None, listen: socket.socket | None
) -> Directory:
    """A node's directory: ``table``'s addresses and, in a growable group, its own
    ``address`` (default: its table entry, else its listening socket's name)."""
    own = parse_address(address) if address is not None else None
    if own is None and table.growable and pid not in table.addresses and listen is not None:
        host, port = listen.getsockname()[:2]
        own = (str(host), int(port))
    if own is not None and not table.growable and table.addresses.get(pid) != own:
        raise LocalError(f"P{pid}'s address is its peer-table entry (the table is not growable)")
    return Directory(table, pid, own)


#: A node's view as discovery reads it: (view id, members), or None while it joins.
ViewOf = tuple[int, tuple[int, ...]] | None


@attrs.frozen
class Answer:
    """What the discovery packets of one read ask the node to do: send ``replies``
    (Rosters, as ``(pid, bytes)``), ask ``join`` (members of a view a Roster named) to
    let it in, and look again soon if it ``learned`` an address."""

    replies: tuple[tuple[int, bytes], ...] = ()
    join: tuple[int, ...] | None = None
    learned: bool = False


@attrs.frozen
class Probes:
    """One round of probes: to members (``(pid, bytes)``) and to seed addresses."""

    members: tuple[tuple[int, bytes], ...] = ()
    seeds: tuple[tuple[Address, bytes], ...] = ()


@attrs.define(eq=False)
class Discovery:
    """The probes of a node of a growable group, and the answers to others' probes,
    without I/O: packets and the node's view in, the packets to send and the join to
    ask out (``net.service`` sends them and keeps the pace).
    """

    directory: Directory
    pid: int
    interval: float = 0.5
    #: the members of the last view a Roster named (what a joiner knows)
    heard: tuple[int, ...] = ()
    probes_sent: int = 0
    rosters_sent: int = 0
    #: the members it last asked to join through
    _asked: tuple[int, ...] = ()

    # -- packets ------------------------------------------------------------------------
    def take(
        self, peer: int, batch: list[tuple[object, Any]], view: ViewOf
    ) -> tuple[list[tuple[object, Any]], Answer]:
        """The packets of ``batch`` (from ``peer``) that are not discovery's, in order,
        and what its Probes and Rosters ask of the node (``view``: the node's)."""
        if not any(type(p) in DISCOVERY for p, _ in batch):
            return batch, NOTHING
        rest = []
        replies: list[tuple[int, bytes]] = []
        join: tuple[int, ...] | None = None
        learned = False
        for item in batch:
            p = item[0]
            if type(p) is Probe:
                changed, reply = self._on_probe(peer, p, view)
                learned |= changed
                if reply is not None:
                    replies.append((peer, reply))
            elif type(p) is Roster:
                changed, asks = self._on_roster(peer, p, view)
                learned |= changed
                join = asks if asks is not None else join
            else:
                rest.append(item)
        return rest, Answer(tuple(replies), join, learned)

    def _on_probe(self, peer: int, p: Probe, view: ViewOf) -> tuple[bool, bytes | None]:
        """(whether the sender's address was learned, the Roster to answer or None)."""
        address = read_address(p.address)
        if p.sender != peer or address is None:
            log.warning("P%d: ignored a probe from P%d (%r)", self.pid, peer, p.address)
            return False, None
        learned = self.directory.learn(peer, address, first_hand=True)
        self.rosters_sent += 1
        return learned, encode(self.roster(view))

    def _on_roster(self, peer: int, r: Roster, view: ViewOf) -> tuple[bool, tuple[int, ...] | None]:
        """(whether an address was learned, the members to join through or None)."""
        if r.sender != peer or len(r.known) != len(r.addresses):
            log.warning("P%d: ignored a malformed roster from P%d", self.pid, peer)
            return False, None
        changed = False
        for pid, text in zip(r.known, r.addresses, strict=True):
            address = read_address(text)
            if type(pid) is int and address is not None:
                changed |= self.directory.learn(pid, address, first_hand=pid == peer)
        members = tuple(m for m in r.members if type(m) is int and 0 <= m < self.directory.n)
        if not (r.view and members):
            return changed, None
        self.heard = members
        if view is not None or members == self._asked:
            return changed, None
        self._asked = members
        return changed, tuple(m for m in members if m != self.pid)

    def join_refused(self) -> None:
        """The node could not ask to join now (closed, or its files cannot be written):
        the next Roster naming the same members asks again."""
        self._asked = ()

    def roster(self, view: ViewOf) -> Roster:
        """This node's view and the addresses it knows of its members and itself."""
        number, members = view if view is not None else (0, ())
        known = sorted({*members, self.pid} & set(self.directory.addresses))
        addresses = self.directory.addresses
        return Roster(
            self.pid,
            number,
            members,
            tuple(known),
            tuple(format_address(addresses[p]) for p in known),
        )

    # -- probing ------------------------------------------------------------------------
    def wanting(self, view: ViewOf) -> bool:
        """This node has no view, or lacks the address of a member of its view."""
        if view is None:
            return True
        return any(m not in self.directory.addresses for m in view[1])

    def probes(self, view: ViewOf) -> Probes:
        """Probes of the seed addresses and of every member this node knows of."""
        own = format_address(self.directory.addresses[self.pid])
        data = encode(Probe(self.pid, own))
        seeds = tuple(
            (seed, data)
            for seed in self.directory.seeds
            if seed != self.directory.addresses[self.pid]
        )
        members = view[1] if view is not None else self.heard
        to = tuple((m, data) for m in members if m != self.pid and m in self.directory.addresses)
        self.probes_sent += len(seeds) + len(to)
        return Probes(to, seeds)

    def next_pause(self, pause: float, learned: bool) -> float:
        """The wait before the next look: ``interval`` after something was learned,
        else twice the last wait, at most ``4 * interval``."""
        return self.interval if learned else min(pause * 2, 4 * self.interval)


#: The answer to a batch without discovery packets.
NOTHING = Answer()


__all__ = [
    "ANY",
    "DISCOVERY",
    "NOTHING",
    "Answer",
    "Directory",
    "Discovery",
    "Probe",
    "Probes",
    "Roster",
    "directory_of",
    "format_address",
    "growable_digest",
    "read_address",
]
