"""Kshemkalyani–Singhal causal unicast and multicast: only the dependencies a receiver can need.

Kshemkalyani and Singhal ("Necessary and sufficient conditions on information
for causal message ordering and their optimal implementation", Distributed
Computing 11, 1998). RST attaches all of SENT (n x n counters) to every
message; KS attaches a log of dependency entries and drops every entry, and
every destination inside an entry, that no receiver can still need.

State at P_i:

- ``clock``: the number of messages P_i has sent (to anyone). Message M_{s,t}
  is P_s's t-th message, so ``t`` is the seq of its ``MessageId(s, t)``.
- ``SR[k]``: the seq of the last message from P_k delivered here. Messages from
  one sender are delivered here in the order sent, so every message from P_k to
  P_i with seq <= SR[k] has been delivered.
- ``LOG``: entries (s, t, Dests). An entry says: M_{s,t} happened before P_i's
  present, and for each d in Dests P_i does not know that M_{s,t} has been
  delivered at d, nor that its delivery at d is implied by a later message.
  Within one source, only the entry with the largest t may have empty Dests; it
  is kept because it tells peers that older entries of s are settled.

Send M (seq t) to the set D (unicast: D = {d}):

1. For each d in D the packet carries O_M = LOG, each entry's Dests minus the
   other members of D (M itself, whose entry the receiver adds, covers them),
   and minus entries with empty Dests that are not their source's latest.
2. Afterwards every LOG entry drops D from its Dests ("implied by M": a later
   message to d that depends on these entries also depends on M, and M waits
   for them at d), and entries that become empty are purged.
3. LOG gains (i, t, D).

Deliverable: a packet from P_k with seq t_k is deliverable at P_i when every
entry (s, t, Dests) of O_M with i in Dests has t <= SR[s]. The sender's previous
message to P_i is such an entry unless the sender knows it was delivered, or that
it is implied by another message to P_i that is itself a dependency here, so
messages on one channel are delivered in the order sent. A packet with
t_k <= SR[k], or one already held, is a duplicate: dropped quietly and counted.

After delivering M from P_k: SR[k] = t_k; add (k, t_k, D_M) to O_M and remove i
from every entry's Dests (known delivered here); then merge O_M into LOG:

- an O_M entry (s, t) is dropped if LOG has a later entry of s but not (s, t):
  LOG already learned that (s, t) was settled;
- a LOG entry (s, t) is dropped if O_M has a later entry of s but not (s, t):
  the sender had learned that (s, t) was settled;
- entries in both keep the intersection of their Dests (each side's knowledge
  of "delivered or implied" only removes destinations);
- the remaining O_M entries join LOG, and empty non-latest entries are purged.

Both conditions together are KS's "known delivered" and "implied by later
messages": an entry or destination disappears exactly when no receiver can need
it. The delivery condition is equivalent to RST's (every causal predecessor
addressed to P_i delivered), so KS delivers exactly when RST does.

Release order: when several held packets are deliverable at once, the one that
arrived first is delivered first (``ArrivalOrder``, shared with RST's
``DependencyBuffer``). The deliverable set depends only on what was delivered, so
KS and RST deliver the same sequence under the same schedule.

On the wire ``log`` is one flat tuple of counters (varints in the codec), by
source s = 0, 1, ... (trailing sources without entries left out). Let L be the
seq of s's latest entry. Each source starts with one header counter:

- ``0``: s has no entries;
- ``3L``: only the latest entry, with no destinations. This is the common case
  (an entry kept only to say that s's older entries are settled), so it costs
  one counter instead of three;
- ``3L + 1``, then k >= 1 and k older entries: the latest has no destinations;
- ``3L + 2``, then the latest's destination code, then k >= 0 and k older
  entries.

Older entries come newest first, each as one counter ``gap * (2n + 1) + code``
(followed by the destinations when code > n), where gap = previous seq - seq - 1
(previous starts at L): small gaps and a single destination fit in one byte. A
destination code is 0 for none, d + 1 for the single destination d, or
n + len(Dests) followed by Dests in increasing order when there are two or more.
The encoding changes no entry: it is the same log, written more compactly.

Batch form: ``send_many(payloads, to)`` sends k consecutive messages to one process
as one ``KSBatch`` carrying the first message's log O_M once. What the later ones
would carry follows from it: after a send to d every entry has dropped d (step 2),
so message i > 0 carries O_M with d removed from every entry (entries left empty kept
only as their source's latest, the sender's own older ones not at all) and the
sender's entry for message i - 1, (sender, t + i - 1, {d}). The receiver takes each
message as the ``KSPacket`` it stands for, so its state and snapshot are those of k
single packets.

Extension points (``mailroom.core.hooks``): ``piggyback`` (step 1), ``implied_by``
(step 2) and ``batch_log`` (the log of a batch's i-th message).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Iterator, Sequence
from itertools import pairwise
from typing import Any, ClassVar

import attrs

from mailroom.clocks import Row
from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Transmit
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import Field, counts, packets, snap_list
from mailroom.core.wire import as_row, packet
from mailroom.protocols._buffer import ArrivalOrder
from mailroom.protocols._packets import Payloads, UnicastBatch, carries_seq

#: One log entry: (source, seq, destinations not yet known settled).
Entry = tuple[int, int, tuple[int, ...]]


@packet
@attrs.frozen
class KSPacket:
    """A KS message: its seq, its destination set and the pruned log O_M (flat)."""

    sender: int
    dest: int
    seq: int
    dests: Row = attrs.field(converter=as_row)
    log: Row = attrs.field(converter=as_row)
    payload: Any

    carries = carries_seq


def later_log(entries: list[Entry], sender: int, dest: int) -> list[Entry]:
    """The log that a message from ``sender`` to ``dest`` alone carries, sent right after
    one that carried ``entries``, less the sender's entry for that one: every entry
    drops ``dest`` (step 2); empty ones stay only as their source's latest, and the
    sender's own not at all (its latest is now the message just sent)."""
    latest = {s: t for s, t, _ in entries}  # entries are sorted by source and seq
    out: list[Entry] = []
    for s, t, ds in entries:
        rest = tuple(d for d in ds if d != dest)
        if rest or (s != sender and t == latest[s]):
            out.append((s, t, rest))
    return out


@packet
@attrs.frozen
class KSBatch(UnicastBatch):
    """k consecutive KS messages from ``sender`` to ``dest`` alone, (sender, first_seq
    + i), with the first one's log O_M (flat); the others' logs follow from it."""

    log: Row = attrs.field(converter=as_row)
    payloads: Payloads = attrs.field(converter=as_row)


def _code(dests: tuple[int, ...], n: int) -> list[int]:
    """A destination set as counters: 0 for none, d + 1 for the single d, or
    n + len(dests) followed by the destinations in increasing order."""
    if len(dests) <= 1:
        return [dests[0] + 1 if dests else 0]
    return [n + len(dests), *dests]


def flatten(entries: Iterable[Entry], n: int) -> Row:
    """Entries (sorted by source and seq) as the flat wire form (module header)."""
    by_source: list[list[tuple[int, tuple[int, ...]]]] = [[] for _ in range(n)]
    for s, t, dests in entries:
        by_source[s].append((t, dests))
    while by_source and not by_source[-1]:
        by_source.pop()  # trailing processes with no entry are left out
    radix = 2 * n + 1
    out: list[int] = []
    for group in by_source:
        if not group:
            out.append(0)
            continue
        latest, dests = group[-1]
        older = group[:-1]
        if dests:
            out += (3 * latest + 2, *_code(dests, n), len(older))
        elif older:
            out += (3 * latest + 1, len(older))
        else:
            out.append(3 * latest)  # the common case: one counter per source
            continue
        previous = latest
        for t, ds in reversed(older):  # newest first, as gaps below the previous seq
            code = _code(ds, n)
            out += (radix * (previous - t - 1) + code[0], *code[1:])
            previous = t
    return tuple(out)


def parse_log(flat: object, n: int) -> list[Entry]:
    """The entries of a wire ``log``; RemoteError naming the first problem."""
    if not isinstance(flat, tuple | list):
        raise RemoteError(f"log must be a sequence of counters, got {type(flat).__name__}")
    radix = 2 * n + 1
    entries: list[Entry] = []
    pos, s = 0, -1

    def take(what: str) -> int:
        nonlocal pos
        if pos >= len(flat):
            raise RemoteError(f"log is truncated: P{s} lacks its {what}")
        value = validate.counter(flat[pos], f"log[{pos}] {what}")
        pos += 1
        return value

    def dests_of(code: int, t: int) -> tuple[int, ...]:
        nonlocal pos
        if code <= n:
            return (code - 1,) if code else ()
        size = code - n
        if size < 2 or size > n or pos + size > len(flat):
            raise RemoteError(f"log is truncated: entry ({s}, {t}) lists {size} dests")
        dests = tuple(validate.pid(d, n, f"log[{pos}] destination") for d in flat[pos : pos + size])
        if any(a >= b for a, b in pairwise(dests)):
            raise RemoteError(f"log entry ({s}, {t}) lists its destinations out of order")
        pos += size
        return dests

    while pos < len(flat):
        s += 1
        if s >= n:
            raise RemoteError(f"log lists entries for more than the {n} processes")
        head = take("header")
        if head == 0:
            continue
        latest, kind = divmod(head, 3)
        if latest == 0:
            raise RemoteError(f"log[{pos - 1}] header {head} names seq 0 for P{s}")
        group = [(latest, dests_of(take("destination code"), latest) if kind == 2 else ())]
        if kind:
            count = take("count of older entries")
            if kind == 1 and count == 0:
                raise RemoteError(f"log header of P{s} announces older entries but lists none")
            for _ in range(count):
                gap, code = divmod(take("older entry"), radix)
                t = group[-1][0] - gap - 1
                if t < 1:
                    raise RemoteError(f"log entry of P{s} falls below seq 1 (gap {gap})")
                group.append((t, dests_of(code, t)))
        entries += [(s, t, ds) for t, ds in reversed(group)]
    return entries


@attrs.define
class _Held:
    """A received packet waiting for ``needs`` [(source, seq)], scanned from ``scan``;
    ``arrival`` is its number in ``ArrivalOrder``."""

    packet: KSPacket
    needs: list[tuple[int, int]]
    arrival: int
    scan: int = 0


class _Mailroom:
    """Held KS packets: each is parked on its first unmet need, keyed by the seq it
    waits for, and resumes its scan when SR of that source reaches it. Each need is
    scanned once in all, so buffered delivery is amortized O(|needs|) per message.
    Deliverable packets are released oldest arrival first (``ArrivalOrder``, the
    same rule as RST's ``DependencyBuffer``)."""

    def __init__(self, sr: list[int]) -> None:
        self._sr = sr
        self._held: dict[tuple[int, int], _Held] = {}
        self._parked: list[list[tuple[int, int, int]]] = [[] for _ in sr]
        self._ready: ArrivalOrder[tuple[int, int]] = ArrivalOrder()

    def __len__(self) -> int:
        return len(self._held)

    def holds(self, sender: int, seq: int) -> bool:
        return (sender, seq) in self._held

    def add(self, p: KSPacket, needs: list[tuple[int, int]]) -> None:
        self._held[(p.sender, p.seq)] = _Held(p, needs, self._ready.stamp())
        self._evaluate((p.sender, p.seq))

    def _evaluate(self, key: tuple[int, int]) -> None:
        item = self._held[key]
        sr = self._sr
        for k in range(item.scan, len(item.needs)):
            s, t = item.needs[k]
            if sr[s] < t:
                item.scan = k
                heapq.heappush(self._parked[s], (t, *key))
                return
        item.scan = len(item.needs)
        self._ready.push(item.arrival, key)

    def pop_ready(self) -> KSPacket | None:
        key = self._ready.pop()
        return None if key is None else self._held.pop(key).packet

    def delivered_one(self, sender: int) -> None:
        """SR[sender] just rose: resume whatever was parked on it."""
        parked, count = self._parked[sender], self._sr[sender]
        while parked and parked[0][0] <= count:
            _, s, t = heapq.heappop(parked)
            self._evaluate((s, t))

    def items(self) -> Iterator[_Held]:
        for key in sorted(self._held):
            yield self._held[key]

    def by_arrival(self) -> list[KSPacket]:
        """Held packets in arrival order (what a snapshot keeps)."""
        return [item.packet for item in sorted(self._held.values(), key=lambda i: i.arrival)]


class KS(EndpointBase):
    """Causal unicast/multicast sending only the dependencies a receiver can still need."""

    protocol = "KS"

    def __init__(self, pid: int, n: int) -> None:
        super().__init__(pid, n)
        self._sr = [0] * n
        #: LOG by source: seq -> destinations not yet known settled.
        self._log: list[dict[int, set[int]]] = [{} for _ in range(n)]
        self._buffer = _Mailroom(self._sr)

    # -- the clocks, by the paper's names ----------------------------------------
    @property
    def sr(self) -> list[int]:
        """SR[k]: seq of the last message from P_k delivered here."""
        return list(self._sr)

    @property
    def log(self) -> list[Entry]:
        """LOG as sorted (source, seq, destinations) entries."""
        return [
            (s, t, tuple(sorted(entries[t])))
            for s, entries in enumerate(self._log)
            for t in sorted(entries)
        ]

    # -- sending -------------------------------------------------------------
    def send(self, payload: Payload, to: int) -> list[Action]:
        """Send ``payload`` to process ``to`` (which may be this process)."""
        self.check_dest(to)
        self.check_payload(payload)
        return self._send(payload, (to,))

    def multicast(self, payload: Payload, to: Collection[int]) -> list[Action]:
        """Send one message (one id) to every process in ``to`` (any collection of pids)."""
        if not isinstance(to, Collection) or isinstance(to, str | bytes) or not to:
            raise LocalError(f"multicast needs a non-empty collection of pids, got {to!r}")
        dests = tuple(sorted({self.check_dest(d) for d in to}))
        self.check_payload(payload)
        return self._send(payload, dests)

    def _send(self, payload: Payload, dests: tuple[int, ...]) -> list[Action]:
        mid = self.next_id()
        actions: list[Action] = []
        for d in dests:
            log = flatten(self.piggyback(d, dests), self.n)
            actions.append(Transmit(d, KSPacket(self.pid, d, mid.seq, dests, log, payload), mid))
        self._sent(mid.seq, dests)
        return actions

    def _sent(self, seq: int, dests: tuple[int, ...]) -> None:
        """Steps 2 and 3 after sending message ``seq`` to ``dests``."""
        self.implied_by(dests)  # step 2
        self._log[self.pid][seq] = set(dests)  # step 3
        self._purge(range(self.n))

    def send_many(self, payloads: Sequence[Payload], to: int) -> list[Action]:
        """Send ``payloads`` to ``to`` in order, up to ``BATCH_LIMIT`` in each ``KSBatch``
        (the deliveries of one ``send`` each, the first one's log carried once)."""
        return self._send_chunks(payloads, to, self._send_batch)

    def _send_batch(self, payloads: tuple[Any, ...], to: int) -> list[Action]:
        first = self.next_ids(len(payloads))
        log = flatten(self.piggyback(to, (to,)), self.n)
        for i in range(len(payloads)):
            self._sent(first.seq + i, (to,))
        return [Transmit(to, KSBatch(self.pid, to, first.seq, log, payloads), first)]

    @hook
    def implied_by(self, dests: tuple[int, ...]) -> None:
        """Rule, step 2 after sending to ``dests``: the message implies every logged
        dependency at those destinations, so LOG entries drop them."""
        group = set(dests)
        for entries in self._log:
            for ds in entries.values():
                ds -= group

    @hook
    def piggyback(self, d: int, dests: tuple[int, ...]) -> Iterator[Entry]:
        """Rule, step 1 of sending to ``dests``: the log entries (O_M) attached to the
        copy for destination ``d``."""
        others = set(dests) - {d}
        for s, entries in enumerate(self._log):
            if not entries:
                continue
            latest = max(entries)
            for t in sorted(entries):
                ds = entries[t] - others
                if ds or t == latest:
                    yield s, t, tuple(sorted(ds))

    # -- receiving -------------------------------------------------------------
    def _validate(self, packet: object) -> tuple[KSPacket, list[Entry]]:
        validate.expect_type(packet, KSPacket, "KS")
        assert isinstance(packet, KSPacket)
        sender = validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        seq = validate.positive(packet.seq, "seq")
        dests = packet.dests
        if not isinstance(dests, tuple) or not dests:
            raise RemoteError("dests must be a non-empty sequence of pids")
        for d in dests:
            validate.pid(d, self.n, "dests entry")
        if any(a >= b for a, b in pairwise(dests)):
            raise RemoteError("dests must be in increasing order without repeats")
        if self.pid not in dests:
            raise RemoteError(f"dests {list(dests)} do not include P{self.pid}")
        entries = parse_log(packet.log, self.n)
        for s, t, _ in entries:
            if s == self.pid and t > self.sent_count:
                raise RemoteError(
                    f"log entry ({s}, {t}) claims P{self.pid} sent {t} messages; "
                    f"it has sent {self.sent_count}"
                )
            if s == sender and t >= seq:
                raise RemoteError(
                    f"log entry ({s}, {t}) is not earlier than the message itself (seq {seq})"
                )
        return packet, entries

    def receive(self, packet: object) -> list[Action]:
        return self.RECEIVES[type(packet)](self, packet)

    def _on_packet(self, p: KSPacket) -> list[Action]:
        return self._take([self._validate(p)])

    def _on_batch(self, b: KSBatch) -> list[Action]:
        # each checked first, then each as if it arrived
        return self._take([self._validate(p) for p in self._batch_packets(b)])

    def _take(self, checked: list[tuple[KSPacket, list[Entry]]]) -> list[Action]:
        """Checked packets, each held (what it releases delivered) or a duplicate."""
        actions: list[Action] = []
        held = 0
        for p, entries in checked:
            if self._hold(p, entries):
                held += 1
                actions += self._drain()
        self.duplicates += not held
        return actions

    def _batch_packets(self, b: KSBatch) -> list[KSPacket]:
        """The packets a batch stands for, in order; RemoteError if it is malformed."""
        sender = validate.pid(b.sender, self.n)
        dest = validate.pid(b.dest, self.n, "dest")
        payloads = validate.batch_payloads(b.payloads)
        first = validate.first_of_range(b.first_seq, len(payloads), "seq")
        entries = parse_log(b.log, self.n)
        return [
            KSPacket(
                sender,
                dest,
                first + i,
                (dest,),
                flatten(self.batch_log(entries, sender, dest, i, first), self.n),
                payload,
            )
            for i, payload in enumerate(payloads)
        ]

    #: What ``receive`` does with each class of packet.
    RECEIVES: ClassVar[Receivers[KS]] = Receivers(
        "KS", "a KSPacket", {KSPacket: _on_packet, KSBatch: _on_batch}
    )

    @hook
    def batch_log(
        self, entries: list[Entry], sender: int, dest: int, i: int, first: int
    ) -> list[Entry]:
        """Rule: the log O_M of message i of a batch from ``sender`` to ``dest`` whose
        first message (seq ``first``) carries ``entries``: those for i = 0; then what
        the sender's steps 1 and 2 leave of them, and its entry for message i - 1."""
        if i == 0:
            return entries
        own = (sender, first + i - 1, (dest,))
        return sorted([*later_log(entries, sender, dest), own])

    def _offer(self, packet: object) -> bool:
        """Hold ``packet`` (validated) until the log entries it needs are delivered here;
        False if it was delivered or is held already."""
        return self._hold(*self._validate(packet))

    def _hold(self, p: KSPacket, entries: list[Entry]) -> bool:
        """Hold a valid packet whose log is ``entries``: False if it was delivered or is
        held already."""
        if p.seq <= self._sr[p.sender] or self._buffer.holds(p.sender, p.seq):
            return False
        self._buffer.add(p, [(s, t) for s, t, ds in entries if self.pid in ds])
        return True

    def _drain(self) -> list[Action]:
        actions: list[Action] = []
        while (p := self._buffer.pop_ready()) is not None:
            self._sr[p.sender] = p.seq
            self._merge(p)
            actions.append(Deliver(_message(p)))
            self._buffer.delivered_one(p.sender)
        return actions

    def _merge(self, p: KSPacket) -> None:
        """Steps 3–5 after delivering ``p``: fold its O_M into LOG."""
        incoming: list[dict[int, set[int]]] = [{} for _ in range(self.n)]
        for s, t, listed in parse_log(p.log, self.n):
            incoming[s][t] = set(listed)
        incoming[p.sender][p.seq] = set(p.dests)
        touched = []
        for s, o in enumerate(incoming):
            if not o:
                continue
            touched.append(s)
            mine = self._log[s]
            for known in o.values():
                known.discard(self.pid)  # delivered here
            latest_mine = max(mine) if mine else 0
            latest_theirs = max(o)
            stale_theirs = [t for t in o if t < latest_mine and t not in mine]
            stale_mine = [t for t in mine if t < latest_theirs and t not in o]
            for t in stale_theirs:
                del o[t]
            for t in stale_mine:
                del mine[t]
            for t, known in o.items():
                if t in mine:
                    mine[t] &= known
                else:
                    mine[t] = known
        self._purge(touched)

    def _purge(self, sources: Iterable[int]) -> None:
        """PURGE_NULL_ENTRIES: drop empty entries that are not their source's latest."""
        for s in sources:
            entries = self._log[s]
            if len(entries) > 1:
                latest = max(entries)
                for t in [t for t, ds in entries.items() if not ds and t != latest]:
                    del entries[t]

    # -- introspection -----------------------------------------------------------
    def buffered(self) -> int:
        return len(self._buffer)

    def pending(self) -> list[Pending]:
        return [
            Pending(
                _message(item.packet),
                tuple(Wait(s, t - 1, t) for s, t in item.needs if self._sr[s] < t),
            )
            for item in self._buffer.items()
        ]

    # -- snapshot ------------------------------------------------------------------
    def _dump_log(self) -> list[list[Any]]:
        return [[s, t, list(ds)] for s, t, ds in self.log]

    def _load_log(self, data: object) -> None:
        for entry in snap_list(data, "log"):
            s, t, ds = snap_list(entry, "log entry", 3)
            if (
                type(s) is not int
                or not 0 <= s < self.n
                or type(t) is not int
                or not 0 < t <= 2**53
            ):
                raise LocalError(f"snapshot log entry {entry!r} does not fit n={self.n}")
            self._log[s][t] = set(load_dests(ds, self.n))

    def _hold_restored(self, p: KSPacket) -> None:
        if not self._offer(p):
            raise LocalError(f"snapshot holds {p.carries()}, delivered or held twice")

    def _held_packets(self) -> list[KSPacket]:
        return self._buffer.by_arrival()

    persistent = (
        counts("_sr", "sr"),
        Field.custom("log", _dump_log, _load_log),
        packets("buffer", KSPacket, _held_packets, _hold_restored),
    )


def load_dests(value: object, n: int) -> Sequence[int]:
    if not isinstance(value, list) or any(type(d) is not int or not 0 <= d < n for d in value):
        raise LocalError(f"snapshot destinations {value!r} are not pids of 0..{n - 1}")
    return value


def _message(p: KSPacket) -> Message:
    return Message(MessageId(p.sender, p.seq), p.sender, p.payload)
