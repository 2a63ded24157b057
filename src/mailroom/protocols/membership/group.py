"""A process group with views and view-synchronous delivery around any ordering protocol.

Inside a view the ordering protocol (CBCAST, tagged, Sequencer, Skeen, Lamport,
RST, KS, FIFO: any registered name) runs over the view's ranks; each view gets a
fresh instance. A view change is a flush: the coordinator (the lowest member this
process does not suspect) runs a ballot-numbered agreement on the next view
(Prepare/Promise, Accept/Accepted, Commit, as in Paxos, so two coordinators can
never install different views with the same id). A member that promises freezes:
it hands no more deliveries of the view to its application and queues new sends
for the next view. The decided value carries the flush log: everything some
promiser delivered in the view (minus what every member is known to have), then
the promisers' own messages nobody delivered yet. At the Commit every member
delivers what it lacks of that log, in log order, then installs the next view.

Primary partition: the next view needs promises from a majority of the current
view, so a minority never installs a view; it learns it was excluded when it
meets the majority again, and rejoins as a new incarnation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from typing import Any, Self

import attrs

from mailroom.core.actions import (
    Action,
    Backpressure,
    Deliver,
    Excluded,
    Stable,
    StateRequest,
    Transmit,
    View,
    ViewChange,
)
from mailroom.core.endpoint import (
    MAX_GROUP,
    EndpointBase,
    Snapshot,
    capabilities,
    snap_bool,
    snap_counter,
    snap_list,
    snap_positive,
    snap_time,
)
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload, TaggedMessage, check_payload
from mailroom.core.pending import Pending
from mailroom.core.registry import entry, restore_endpoint
from mailroom.core.stack import Stack
from mailroom.core.wire import carried_message_id, is_packet, packet_from_data, packet_to_data
from mailroom.protocols.membership.packets import (
    PACKETS,
    Accept,
    Accepted,
    Commit,
    Entry,
    GroupData,
    Join,
    Leave,
    Nack,
    Prepare,
    Promise,
    Query,
    Stability,
    StateTransfer,
    Suspect,
)
from mailroom.protocols.reliable import Reliable

#: Packets of a later view kept until that view is installed (the rest are dropped).
MAX_FUTURE = 4096
Ballot = tuple[int, int]


@attrs.frozen
class _Value:
    """A proposed next view: members, message bases, incarnations, who needs state, log."""

    members: tuple[int, ...]
    bases: tuple[int, ...]
    incarnations: tuple[int, ...]
    needs: tuple[int, ...]
    log: list[Entry]

    def data(self) -> list[Any]:
        return [
            list(self.members),
            list(self.bases),
            list(self.incarnations),
            list(self.needs),
            [list(e) for e in self.log],
        ]


class Group(EndpointBase):
    """One member of a process group: views, flush, joins, leaves and state transfer."""

    protocol = "Group"
    snapshot_version = 1

    def __init__(
        self,
        pid: int,
        n: int,
        protocol: str = "cbcast",
        *,
        members: Collection[int] | None = None,
        contacts: Collection[int] = (),
        reliable: bool = False,
        retry: float = 1.0,
        stability_every: int = 16,
        incarnation: int = 0,
    ) -> None:
        super().__init__(pid, n)
        found = entry(protocol)
        self.inner_protocol = protocol
        self.mode = found.mode
        self._factory = found.factory
        self.reliable = bool(reliable)
        if type(retry) not in (int, float) or not math.isfinite(retry) or retry <= 0:
            raise LocalError(f"retry must be a positive number of time units, got {retry!r}")
        self.retry = float(retry)
        if type(stability_every) is not int or stability_every < 1:
            raise LocalError(f"stability_every must be a positive integer, got {stability_every!r}")
        self.stability_every = stability_every
        if type(incarnation) is not int or incarnation < 0:
            raise LocalError(f"incarnation must be a non-negative integer, got {incarnation!r}")
        self.incarnation = incarnation
        self.capabilities: frozenset[str] = frozenset({self.mode})
        # -- the installed view ----------------------------------------------------
        self.view: View | None = None
        self._me = -1  # this process's rank in the view
        self._bases: tuple[int, ...] = ()
        self._incarnations: tuple[int, ...] = ()
        self.inner: Any = None
        #: per rank: inner seqs delivered in this view (every one <= low, plus above)
        self._low: list[int] = []
        self._high: list[set[int]] = []
        self._log: list[Entry] = []
        self._own: dict[int, Entry] = {}
        self._stable: dict[int, tuple[int, ...]] = {}
        self._since_report = 0
        # -- membership state -----------------------------------------------------------
        self._suspects: set[int] = set()
        self._leaving: set[int] = set()
        self._joiners: dict[int, tuple[int, int]] = {}  # pid -> (incarnation, sent)
        self._outbox: list[tuple[Payload, int | None]] = []
        self._future: list[object] = []
        self._asked: set[int] = set()  # asked about a later view since the last install
        self._told: set[int] = set()  # told they were excluded since the last install
        self._needs_state = False
        self._state_to: tuple[int, ...] = ()
        #: the state this process sent for the current view, kept to answer a Query
        self._kept: tuple[tuple[int, ...], Payload] | None = None
        self._provider = -1  # who sends this joiner its state
        self._left = False  # leave() was called
        self._gone = False  # excluded for good (left)
        self.contacts = tuple(sorted({int(c) for c in contacts}))
        for c in self.contacts:
            self._check_dest(c)
        # -- flush: as a member -------------------------------------------------------
        self.flushing = False
        self._promised: Ballot = (0, -1)
        self._accepted: tuple[Ballot, _Value] | None = None
        self._last_commit: Commit | None = None
        # -- flush: as coordinator ------------------------------------------------------
        self._attempt = 0
        self._proposal: tuple[int, ...] = ()
        self._phase = ""  # "", "prepare" or "accept"
        self._promises: dict[int, Promise] = {}
        self._accepts: set[int] = set()
        self._value: _Value | None = None
        #: the highest ballot a member said it promised instead of this coordinator's
        self._outbid: Ballot = (0, -1)
        self._change: tuple[tuple[int, ...], tuple[int, ...]] = ((), ())
        # -- time ---------------------------------------------------------------------
        self._now: float | None = None
        self._retry_at: float | None = None
        if members is not None:
            first = tuple(sorted({self._check_dest(m) for m in members}))
            if pid not in first:
                raise LocalError(f"P{pid} is not among the initial members {list(first)}")
            self._install(View(1, first), (0,) * len(first), (0,) * len(first))

    def __repr__(self) -> str:
        return f"Group(pid={self.pid}, n={self.n}, {self.inner_protocol}, view={self.view})"

    # -- what hosts and tests read ---------------------------------------------------
    @property
    def joined(self) -> bool:
        """Installed a view and holds the application state."""
        return self.view is not None and not self._needs_state

    @property
    def sending_view(self) -> int | None:
        """The view a message sent now will be sent in."""
        if self.view is None or self._gone:
            return None
        if self.flushing:
            return self.view.id + 1
        return self.view.id

    @property
    def coordinator(self) -> int | None:
        """The member this process takes for the coordinator of its view."""
        if self.view is None:
            return None
        alive = [m for m in self.view.members if m not in self._suspects]
        return alive[0] if alive else None

    @property
    def suspects(self) -> frozenset[int]:
        return frozenset(self._suspects)

    # -- the application's side ---------------------------------------------------------
    def broadcast(self, payload: Payload) -> list[Action]:
        """Send ``payload`` to every member of the view (queued while a view changes)."""
        if self.mode != "broadcast":
            raise LocalError(f"Group over {self.inner_protocol} does not offer broadcast")
        return self._submit(payload, None)

    def send(self, payload: Payload, to: int) -> list[Action]:
        """Send ``payload`` to member ``to`` (queued while a view changes)."""
        if self.mode != "unicast":
            raise LocalError(f"Group over {self.inner_protocol} does not offer send")
        self._check_dest(to)
        if not self._ready():
            raise LocalError(
                f"P{self.pid} cannot send to one member while its view changes",
                hint="wait for the ViewChange (broadcasts are queued for the next view)",
            )
        assert self.view is not None
        if to not in self.view.members:
            raise LocalError(f"P{to} is not a member of view {self.view.id}")
        return self._submit(payload, to)

    def _submit(self, payload: Payload, to: int | None) -> list[Action]:
        check_payload(payload)
        if is_packet(payload):
            raise LocalError("a group message's payload must be JSON data, not a packet")
        if self._gone:
            raise LocalError(f"P{self.pid} has left the group")
        if not self._ready():
            self.sent_count += 1
            self._outbox.append((payload, to))
            return []
        self.sent_count += 1
        return self._send_now(payload, to)

    def _ready(self) -> bool:
        return self.view is not None and not self.flushing and not self._needs_state

    def _send_now(self, payload: Payload, to: int | None) -> list[Action]:
        assert self.view is not None
        if to is None:
            out = self.inner.broadcast(payload)
            inner_seq = self.sent_count - self._bases[self._rank]
            if not self._was_delivered(self._rank, inner_seq):
                self._own[inner_seq] = [self.pid, self.sent_count, payload]
        else:
            out = self.inner.send(payload, to=self.view.rank(to))
        return self._translate(out)

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        """Pass the application's consumption to the inner protocol (tagged, explicit)."""
        if self.inner is None or "consume" not in capabilities(self.inner):
            raise LocalError(f"Group over {self.inner_protocol} does not need consume")
        inner_id = None if message_id is None else self._inner_id(message_id)
        return self._translate(self.inner.consume(inner_id))

    def suspect(self, pid: int) -> list[Action]:
        """The host's failure detector suspects member ``pid`` (idempotent)."""
        self._check_dest(pid)
        if self.view is None or pid == self.pid or pid not in self.view.members:
            return []
        if pid in self._suspects:
            return []
        self._suspects.add(pid)
        actions = self._coordinate()
        coord = self.coordinator
        if coord is not None and coord != self.pid:
            actions.append(self._control(coord, Suspect(self.view.id, self.pid, pid)))
        return actions

    def leave(self) -> list[Action]:
        """Leave the group: the next view excludes this process (then ``Excluded``)."""
        if self.view is None or self._gone:
            raise LocalError(f"P{self.pid} is not a member of a view")
        self._left = True
        self._leaving.add(self.pid)
        actions = self._coordinate()
        coord = self.coordinator
        if coord is not None and coord != self.pid:
            actions.append(self._control(coord, Leave(self.view.id, self.pid)))
        return actions

    def join(self) -> list[Action]:
        """A joiner asks its contacts to let it in (tick repeats it every ``retry``)."""
        if self.view is not None or self._gone:
            return []
        if not self.contacts:
            raise LocalError("a joiner needs contacts (members of the running group)")
        self._arm()
        base = self.sent_count - len(self._outbox)
        return [
            self._control(c, Join(self.pid, self.incarnation, base))
            for c in self.contacts
            if c != self.pid
        ]

    def provide_state(self, view: int, state: Payload) -> list[Action]:
        """Send the application's ``state`` at the start of ``view`` to the joiners."""
        if self.view is None or view != self.view.id or not self._state_to:
            raise LocalError(f"no state was requested for view {view!r}")
        check_payload(state)
        if is_packet(state):
            raise LocalError("the application state must be JSON data, not a packet")
        to, self._state_to = self._state_to, ()
        self._kept = (to, state)
        return [self._control(p, StateTransfer(view, self.pid, state)) for p in to]

    # -- the network's side -----------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        handler = _HANDLERS.get(type(packet))
        if handler is None:
            raise RemoteError(f"Group got a {type(packet).__name__}, not a group packet")
        return handler(self, packet)

    def tick(self, now: float) -> list[Action]:
        if type(now) not in (int, float) or not math.isfinite(now) or not 0 <= now <= 2**40:
            raise LocalError(f"now must be a finite time in [0, 2**40], got {now!r}")
        now = float(now)
        self._now = now
        actions: list[Action] = []
        if self.inner is not None:
            actions += self._translate(self.inner.tick(now))
        if self._retry_at is None:
            if self._waiting():
                self._retry_at = now + self.retry
        elif now >= self._retry_at:
            self._retry_at = now + self.retry if self._waiting() else None
            actions += self._resend()
        return actions

    def next_deadline(self) -> float | None:
        inner: float | None = self.inner.next_deadline() if self.inner is not None else None
        own: float | None = None
        if self._waiting():
            own = self._retry_at if self._retry_at is not None else (self._now or 0.0)
        if inner is None:
            return own
        return inner if own is None else min(inner, own)

    def pending(self) -> list[Pending]:
        return [] if self.inner is None else list(self.inner.pending())

    def buffered(self) -> int:
        inner = 0 if self.inner is None else int(self.inner.buffered())
        return inner + len(self._outbox) + len(self._future)

    # -- translation between the view's ranks and identities -------------------------------
    @property
    def _rank(self) -> int:
        """This process's rank in its view (kept, as the per-packet path needs it)."""
        return self._me

    def _outer(self, mid: MessageId) -> MessageId:
        assert self.view is not None
        return MessageId(self.view.members[mid.origin], self._bases[mid.origin] + mid.seq)

    def _inner_id(self, mid: MessageId) -> MessageId:
        if self.view is None or mid.origin not in self.view.members:
            raise LocalError(f"{mid} is not a message of the current view")
        rank = self.view.rank(mid.origin)
        return MessageId(rank, mid.seq - self._bases[rank])

    def _translate(self, actions: Iterable[Action]) -> list[Action]:
        out: list[Action] = []
        view = self.view
        assert view is not None
        for a in actions:
            if isinstance(a, Transmit):
                mid = a.message_id
                outer = None if mid is None else self._outer(mid)
                origin, base = (0, 0)
                if mid is not None and outer is not None:
                    origin, base = outer.origin, outer.seq - mid.seq
                data = GroupData(view.id, self.pid, origin, base, a.packet)
                out.append(Transmit(view.members[a.to], data, outer))
            elif isinstance(a, Deliver):
                out += self._delivered(a.message)
            elif isinstance(a, Stable):
                out.append(Stable(tuple(self._outer(m) for m in a.messages)))
            elif isinstance(a, Backpressure):
                out.append(Backpressure(view.members[a.to], a.waiting))
            else:
                out.append(a)
        return out

    def _delivered(self, m: Message) -> list[Action]:
        """An inner delivery: record it for the flush and hand it over by identity."""
        rank, seq = m.id.origin, m.id.seq
        self._mark(rank, seq)
        outer = self._outer(m.id)
        if self.mode == "broadcast":
            self._log.append([outer.origin, outer.seq, m.payload])
            if rank == self._rank:
                self._own.pop(seq, None)
            self._since_report += 1
        sender = outer.origin
        if isinstance(m, TaggedMessage):
            msg: Message = TaggedMessage(outer, sender, m.payload, m.tag)
        else:
            msg = Message(outer, sender, m.payload)
        out: list[Action] = [Deliver(msg)]
        if self._since_report >= self.stability_every:
            out += self._report()
        return out

    def _mark(self, rank: int, seq: int) -> None:
        high = self._high[rank]
        if seq > self._low[rank]:
            high.add(seq)
        while self._low[rank] + 1 in high:
            self._low[rank] += 1
            high.discard(self._low[rank])

    def _was_delivered(self, rank: int, seq: int) -> bool:
        return seq <= self._low[rank] or seq in self._high[rank]

    # -- stability: what every member has, so the flush log stays small -------------------
    def _report(self) -> list[Action]:
        assert self.view is not None
        self._since_report = 0
        low = tuple(self._low)
        self._stable[self.pid] = low
        self._prune()
        packet = Stability(self.view.id, self.pid, low)
        return [self._control(m, packet) for m in self.view.members if m != self.pid]

    def _prune(self) -> None:
        assert self.view is not None
        if len(self._stable) < len(self.view.members):
            return
        floor = [min(lows[r] for lows in self._stable.values()) for r in range(len(self._low))]
        rank_of = {m: r for r, m in enumerate(self.view.members)}
        self._log = [
            e for e in self._log if e[1] - self._bases[rank_of[e[0]]] > floor[rank_of[e[0]]]
        ]

    # -- control packets ----------------------------------------------------------------------
    def _control(self, to: int, packet: object) -> Transmit:
        return Transmit(to, packet, None)

    def _on_data(self, p: GroupData) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        assert self.view is not None
        if self.flushing:
            return []  # frozen: what matters of this view comes with the Commit
        if self._needs_state:
            return self._hold(p)
        inner = carried_message_id(p.payload)
        if inner is not None:
            members = self.view.members
            if not 0 <= inner.origin < len(members):
                raise RemoteError(f"group data names rank {inner.origin} of a {len(members)}-view")
            if p.origin != members[inner.origin] or p.base != self._bases[inner.origin]:
                raise RemoteError(
                    f"group data names message ({p.origin}, base {p.base}) but the view says "
                    f"({members[inner.origin]}, base {self._bases[inner.origin]})"
                )
        elif p.origin != 0 or p.base != 0:
            raise RemoteError("group data without a message names an origin")
        return self._translate(self.inner.receive(p.payload))

    def _current(self, view: object, sender: object) -> bool:
        """The packet is of this process's installed view, from one of its members."""
        _int(view, "view")
        _int(sender, "sender")
        self._check_sender(sender)
        return self.view is not None and view == self.view.id and sender in self.view.members

    def _check_sender(self, sender: object) -> None:
        if type(sender) is not int or not 0 <= sender < self.n:
            raise RemoteError(f"sender {sender!r} is not a process of this group (0..{self.n - 1})")

    def _elsewhere(self, p: object, view: int, sender: int) -> list[Action]:
        """A packet of another view: stale ones are dropped, later ones kept and asked about."""
        if self.view is not None and view < self.view.id:
            self.duplicates += 1
            return self.notice(sender, view)  # it may have been excluded and not know
        if self.view is not None and view == self.view.id:
            raise RemoteError(f"P{sender} is not a member of view {view}")
        return self._hold(p, ask=sender)

    def notice(self, sender: int, view: int) -> list[Action]:
        """A layer around the group (the heartbeat detector) saw a packet of ``view`` from
        ``sender``: tell an excluded process so, or ask a process that is ahead."""
        _int(view, "view")
        self._check_sender(sender)
        if self.view is not None and view < self.view.id:
            last = self._last_commit
            if sender in self.view.members or last is None or sender in self._told:
                return []
            self._told.add(sender)
            return [self._control(sender, last)]
        if (self.view is None or view > self.view.id) and sender not in self._asked:
            self._asked.add(sender)
            return [self._control(sender, Query(self.view.id if self.view else 0, self.pid))]
        return []

    def _hold(self, p: object, ask: int | None = None) -> list[Action]:
        if len(self._future) < MAX_FUTURE:
            self._future.append(p)
        if ask is None or ask == self.pid or ask in self._asked:
            return []
        self._asked.add(ask)
        return [self._control(ask, Query(self.view.id if self.view else 0, self.pid))]

    def _on_join(self, p: Join) -> list[Action]:
        self._check_sender(p.sender)
        _int(p.incarnation, "incarnation")
        _int(p.sent, "sent")
        if self.view is None or p.sender == self.pid:
            return []
        if p.sender in self.view.members:
            known = self._incarnations[self.view.rank(p.sender)]
            if p.incarnation < known:
                return []  # from an incarnation that is gone
            if p.incarnation == known:  # it is in: it missed the Commit that says so
                last = self._last_commit
                if last is not None and last.view + 1 == self.view.id:
                    return [self._control(p.sender, last)]
                return []
        self._joiners[p.sender] = (p.incarnation, p.sent)
        return self._forward_or_coordinate(p)

    def _forward_or_coordinate(self, p: object) -> list[Action]:
        coord = self.coordinator
        if coord == self.pid:
            return self._coordinate()
        return [] if coord is None else [self._control(coord, p)]

    def _on_leave(self, p: Leave) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        self._leaving.add(p.sender)
        return self._forward_or_coordinate(p)

    def _on_suspect(self, p: Suspect) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        assert self.view is not None
        self._check_sender(p.suspect)
        if p.suspect not in self.view.members or p.suspect == self.pid:
            return []
        self._suspects.add(p.suspect)
        return self._coordinate()

    def _on_query(self, p: Query) -> list[Action]:
        _int(p.view, "view")
        self._check_sender(p.sender)
        if self.view is None:
            return []
        if p.view == self.view.id and self._kept is not None and p.sender in self._kept[0]:
            return [self._control(p.sender, StateTransfer(p.view, self.pid, self._kept[1]))]
        if p.view >= self.view.id or self._last_commit is None:
            return []
        if p.view == self._last_commit.view:
            return [self._control(p.sender, self._last_commit)]
        if p.sender not in self.view.members:
            return [self._control(p.sender, self._last_commit)]  # it was excluded meanwhile
        return []

    # -- the flush, as a member -------------------------------------------------------
    def _on_prepare(self, p: Prepare) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = (_int(p.attempt, "attempt"), p.coord)
        if p.coord != p.sender:
            raise RemoteError("a Prepare comes from its coordinator")
        _members(p.members, self.n)
        if ballot < self._promised:
            return [self._control(p.sender, Nack(p.view, self.pid, *self._promised))]
        self._promised = ballot
        self.flushing = True
        self._arm()
        return [self._control(p.sender, self._promise(ballot))]

    def _promise(self, ballot: Ballot) -> Promise:
        assert self.view is not None
        accepted = None
        if self._accepted is not None:
            (att, coord), value = self._accepted
            accepted = [att, coord, *value.data()]
        return Promise(
            self.view.id,
            self.pid,
            ballot[0],
            ballot[1],
            self.sent_count - len(self._outbox),
            not self._needs_state,
            [list(e) for e in self._log],
            [list(self._own[k]) for k in sorted(self._own)],
            accepted,
        )

    def _on_accept(self, p: Accept) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = (_int(p.attempt, "attempt"), p.coord)
        if p.coord != p.sender:
            raise RemoteError("an Accept comes from its coordinator")
        value = _value(p.members, p.bases, p.incarnations, p.needs, p.log, self.n)
        if ballot < self._promised:
            return [self._control(p.sender, Nack(p.view, self.pid, *self._promised))]
        self._promised = ballot
        self._accepted = (ballot, value)
        self.flushing = True
        self._arm()
        return [self._control(p.sender, Accepted(self.view.id, self.pid, *ballot))]  # type: ignore[union-attr]

    def _on_commit(self, p: Commit) -> list[Action]:
        _int(p.view, "view")
        self._check_sender(p.sender)
        value = _value(p.members, p.bases, p.incarnations, p.needs, p.log, self.n)
        if self._gone:
            return []
        if self.view is None:
            if self.pid not in value.members or not self._is_me(value):
                return []  # a joiner waits for the view that names this incarnation
            return self._install_value(p.view + 1, value, p)
        if p.view < self.view.id:
            self.duplicates += 1
            return []
        if p.view > self.view.id:
            if self.pid in value.members and self._is_me(value):
                return []  # installed without this process's flush: can only be a copy
            return self._exclude(View(p.view + 1, value.members), p)
        return self._install_value(p.view + 1, value, p)

    def _is_me(self, value: _Value) -> bool:
        return value.incarnations[value.members.index(self.pid)] == self.incarnation

    def _on_state(self, p: StateTransfer) -> list[Action]:
        _int(p.view, "view")
        self._check_sender(p.sender)
        if not self._needs_state or self.view is None or p.view != self.view.id:
            return []
        self._needs_state = False
        actions: list[Action] = [ViewChange(self.view, self._change[0], self._change[1], p.payload)]
        return actions + self._after_install()

    def _on_stability(self, p: Stability) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        assert self.view is not None
        low = tuple(p.low)
        if len(low) != len(self.view.members) or any(type(v) is not int or v < 0 for v in low):
            raise RemoteError(
                f"stability report has {len(low)} entries for {len(self.view.members)}"
            )
        self._stable[p.sender] = low
        self._prune()
        return []

    # -- the flush, as coordinator -----------------------------------------------------------
    def _coordinate(self) -> list[Action]:
        """Start (or restart) a flush if this process coordinates and the view must change."""
        view = self.view
        if view is None or self.coordinator != self.pid:
            return []
        joiners = set(self._joiners) - self._leaving
        gone = (self._suspects | self._leaving | joiners) & set(view.members)
        if not gone and not joiners:
            return []
        if self._phase:
            needed = self._required()
            outbid = self._outbid[1] in self._suspects
            if not (needed & self._suspects) and not outbid:
                return []  # the running flush can still finish; the rest waits for it
        survivors = [m for m in view.members if m not in gone]
        proposal = tuple(sorted(set(survivors) | joiners))
        if 2 * len(survivors) <= len(view.members):
            return []  # primary partition: a minority does not install views
        self._attempt = max(self._attempt, self._promised[0], self._outbid[0]) + 1
        self._proposal = proposal
        self._phase = "prepare"
        self._promises = {}
        self._accepts = set()
        self._value = None
        ballot = (self._attempt, self.pid)
        prepare = Prepare(view.id, self.pid, *ballot, proposal)
        actions: list[Action] = [
            self._control(m, prepare) for m in self._required() if m != self.pid
        ]
        return actions + self._on_prepare_local(ballot)

    def _required(self) -> set[int]:
        """The current view's members whose promise (and acceptance) the flush waits for."""
        return {
            m
            for m in self._proposal
            if self.view and m in self.view.members and m not in self._joiners
        }

    def _on_prepare_local(self, ballot: Ballot) -> list[Action]:
        self._promised = max(self._promised, ballot)
        self.flushing = True
        self._arm()
        return self._on_promise(self._promise(ballot))

    def _on_promise(self, p: Promise) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        _int(p.sent, "sent")
        if type(p.has_state) is not bool:
            raise RemoteError("has_state must be a bool")
        _entries(p.log, self.n)
        _entries(p.own, self.n)
        if p.accepted is not None:
            a = p.accepted
            if not isinstance(a, list) or len(a) != 7:
                raise RemoteError(
                    "accepted must be [attempt, coord, members, bases, incarnations, needs, log]"
                )
            _int(a[0], "attempt")
            _int(a[1], "coord")
            _value_of(a[2:], self.n)
        if self._phase != "prepare" or (p.attempt, p.coord) != (self._attempt, self.pid):
            return []
        self._promises[p.sender] = p
        if not self._required() <= set(self._promises):
            return []
        return self._propose()

    def _propose(self) -> list[Action]:
        view = self.view
        assert view is not None
        best: tuple[Ballot, list[Any]] | None = None
        for pr in self._promises.values():
            if pr.accepted is not None:
                b = (pr.accepted[0], pr.accepted[1])
                if best is None or b > best[0]:
                    best = (b, pr.accepted[2:])
        if best is not None:
            value = _value_of(best[1], self.n)
        else:
            members = self._proposal
            bases, incs, needs = [], [], []
            for m in members:
                if m in self._joiners and m not in self._promises:
                    inc, sent = self._joiners[m]
                    bases.append(sent)
                    incs.append(inc)
                    needs.append(m)
                else:
                    pr = self._promises[m]
                    bases.append(pr.sent)
                    incs.append(self._incarnations[view.rank(m)])
                    if not pr.has_state:
                        needs.append(m)
            log: list[Entry] = []
            seen: set[tuple[int, int]] = set()
            for m in sorted(self._promises):
                for e in self._promises[m].log:
                    if (e[0], e[1]) not in seen:
                        seen.add((e[0], e[1]))
                        log.append(e)
            for m in sorted(self._promises):
                for e in self._promises[m].own:
                    if (e[0], e[1]) not in seen:
                        seen.add((e[0], e[1]))
                        log.append(e)
            value = _Value(members, tuple(bases), tuple(incs), tuple(needs), log)
        self._value = value
        self._phase = "accept"
        accept = Accept(
            view.id,
            self.pid,
            self._attempt,
            self.pid,
            value.members,
            value.bases,
            value.incarnations,
            value.needs,
            value.log,
        )
        actions: list[Action] = [
            self._control(m, accept) for m in self._required() if m != self.pid
        ]
        return actions + self._on_accept_local(accept)

    def _on_accept_local(self, accept: Accept) -> list[Action]:
        reply = self._on_accept(accept)
        accepted = reply[0].packet if len(reply) == 1 and isinstance(reply[0], Transmit) else None
        if not isinstance(accepted, Accepted):
            return []  # a higher ballot was promised meanwhile (the reply is a Nack)
        return self._on_accepted(accepted)

    def _on_nack(self, p: Nack) -> list[Action]:
        """A member promised a higher ballot: outbid it if its coordinator is suspected
        (else wait: that coordinator's flush excludes or includes this one)."""
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        ballot = (_int(p.attempt, "attempt"), p.coord)
        self._check_sender(p.coord)
        if not self._phase or ballot <= (self._attempt, self.pid) or ballot <= self._outbid:
            return []
        self._outbid = ballot
        return self._coordinate()

    def _on_accepted(self, p: Accepted) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        if self._phase != "accept" or (p.attempt, p.coord) != (self._attempt, self.pid):
            return []
        self._accepts.add(p.sender)
        if not self._required() <= self._accepts:
            return []
        view, value = self.view, self._value
        assert view is not None and value is not None
        commit = Commit(
            view.id,
            self.pid,
            value.members,
            value.bases,
            value.incarnations,
            value.needs,
            value.log,
        )
        targets = (set(view.members) | set(value.members)) - {self.pid}
        actions: list[Action] = [self._control(m, commit) for m in sorted(targets)]
        return actions + self._on_commit(commit)

    # -- installing a view -----------------------------------------------------------------
    def _install_value(self, view_id: int, value: _Value, commit: Commit) -> list[Action]:
        """Deliver what this process lacks of the flush log, then install the next view."""
        actions: list[Action] = []
        old = self.view
        if old is not None and self.mode == "broadcast" and not self._needs_state:
            rank_of = {m: r for r, m in enumerate(old.members)}
            for origin, seq, payload in value.log:
                r = rank_of.get(origin)
                if r is None:
                    raise RemoteError(f"flush log names P{origin}, not a member of view {old.id}")
                inner_seq = seq - self._bases[r]
                if inner_seq < 1:
                    raise RemoteError(
                        f"flush log names message ({origin}, {seq}) of an earlier view"
                    )
                if not self._was_delivered(r, inner_seq):
                    self._mark(r, inner_seq)
                    actions.append(Deliver(Message(MessageId(origin, seq), origin, payload)))
        self._last_commit = commit
        if self.pid not in value.members or not self._is_me(value):
            return actions + self._exclude(View(view_id, value.members), commit)
        view = View(view_id, value.members)
        before = set(old.members) if old is not None else set()
        joined = tuple(m for m in view.members if m not in before)
        left = tuple(sorted(before - set(view.members)))
        needs = set(value.needs)
        self._install(view, value.bases, value.incarnations)
        self._change = (joined, left)
        self._needs_state = self.pid in needs
        holders = [m for m in view.members if m not in needs]
        self._provider = holders[0] if holders else -1
        if self._needs_state:
            self._arm()
            return actions + self._replay_future()
        actions.append(ViewChange(view, joined, left))
        if needs and holders and holders[0] == self.pid:
            self._state_to = tuple(sorted(needs))
            actions.append(StateRequest(view.id, self._state_to))
        return actions + self._after_install()

    def _install(self, view: View, bases: tuple[int, ...], incs: tuple[int, ...]) -> None:
        size = len(view.members)
        rank = view.rank(self.pid)
        inner = self._factory(rank, size)
        if self.reliable:
            layers = inner.layers if isinstance(inner, Stack) else [inner]
            inner = Stack(Reliable(rank, size), *layers)
        self.inner = inner
        self.view = view
        self._me = rank
        self._bases = tuple(bases)
        self._incarnations = tuple(incs)
        self._low = [0] * size
        self._high = [set() for _ in range(size)]
        self._log = []
        self._own = {}
        self._stable = {}
        self._since_report = 0
        self.flushing = False
        self._promised = (0, -1)
        self._accepted = None
        self._phase = ""
        self._proposal = ()
        self._promises = {}
        self._accepts = set()
        self._value = None
        self._attempt = 0
        self._outbid = (0, -1)
        self._state_to = ()
        self._kept = None
        members = set(view.members)
        self._suspects &= members
        self._leaving &= members
        self._joiners = {
            p: v for p, v in self._joiners.items() if p not in members or v[0] > incs[view.rank(p)]
        }
        self._retry_at = None
        self._asked = set()
        self._told = set()

    def _after_install(self) -> list[Action]:
        """Send what was queued for this view, replay its early packets, coordinate."""
        actions: list[Action] = []
        queued, self._outbox = self._outbox, []
        first = self.sent_count - len(queued)
        for k, (payload, to) in enumerate(queued):
            self.sent_count = first + k + 1
            actions += self._send_now(payload, to)
        self.sent_count = first + len(queued)
        actions += self._replay_future()
        if self._ready():
            actions += self._coordinate()
        return actions

    def _replay_future(self) -> list[Action]:
        held, self._future = self._future, []
        actions: list[Action] = []
        for p in held:
            try:
                actions += self.receive(p)
            except RemoteError:
                continue
        return actions

    def _exclude(self, view: View, commit: Commit) -> list[Action]:
        """This incarnation is not in ``view``: report it and, unless it left, rejoin."""
        dropped = [MessageId(self.pid, k) for k in sorted(self._own_seqs())]
        first = self.sent_count - len(self._outbox)
        dropped += [MessageId(self.pid, first + k + 1) for k in range(len(self._outbox))]
        rejoin = not self._left
        self._last_commit = commit
        self.view = None
        self.inner = None
        self._outbox = []
        self._future = []
        self._needs_state = False
        self._suspects = set()
        self._leaving = set()
        self._joiners = {}
        self.flushing = False
        self._phase = ""
        actions: list[Action] = [Excluded(view, tuple(dropped), rejoin)]
        if not rejoin:
            self._gone = True
            return actions
        self.incarnation += 1
        self.contacts = tuple(m for m in view.members if m != self.pid)
        return actions + self.join()

    def _own_seqs(self) -> list[int]:
        if self.view is None:
            return []
        base = self._bases[self._rank]
        return [base + k for k in self._own]

    # -- retries ---------------------------------------------------------------------------
    def _waiting(self) -> bool:
        """Something this process waits for from others, so it repeats its request."""
        if self._gone:
            return False
        if self.view is None:
            return bool(self.contacts)
        return (
            self.flushing
            or self._needs_state
            or bool(self._suspects or self._leaving or self._joiners)
        )

    def _arm(self) -> None:
        if self._retry_at is None and self._now is not None:
            self._retry_at = self._now + self.retry

    def _resend(self) -> list[Action]:
        if self.view is None:
            return self.join()
        view = self.view
        if self._phase == "prepare":
            prepare = Prepare(view.id, self.pid, self._attempt, self.pid, self._proposal)
            return [
                self._control(m, prepare) for m in sorted(self._required() - set(self._promises))
            ]
        if self._phase == "accept" and self._value is not None:
            v = self._value
            accept = Accept(
                view.id,
                self.pid,
                self._attempt,
                self.pid,
                v.members,
                v.bases,
                v.incarnations,
                v.needs,
                v.log,
            )
            return [self._control(m, accept) for m in sorted(self._required() - self._accepts)]
        if self.flushing and self._promised[1] not in (-1, self.pid):
            return [self._control(self._promised[1], Query(view.id, self.pid))]
        if self._needs_state and self._provider not in (-1, self.pid):
            return [self._control(self._provider, Query(view.id, self.pid))]
        coord = self.coordinator
        if coord == self.pid:
            started = self._coordinate()
            if started or self._phase:
                return started
            # a minority cannot install a view: ask the suspected whether they went on
            return [self._control(p, Query(view.id, self.pid)) for p in sorted(self._suspects)]
        if coord is None:
            return []
        out: list[Action] = [
            self._control(coord, Suspect(view.id, self.pid, p)) for p in sorted(self._suspects)
        ]
        if self.pid in self._leaving:
            out.append(self._control(coord, Leave(view.id, self.pid)))
        out += [self._control(coord, Join(p, i, s)) for p, (i, s) in sorted(self._joiners.items())]
        return out

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        data = self._header()
        data["inner_protocol"] = self.inner_protocol
        data["reliable"] = self.reliable
        data["retry"] = self.retry
        data["stability_every"] = self.stability_every
        data["incarnation"] = self.incarnation
        data["contacts"] = list(self.contacts)
        data["view"] = None if self.view is None else [self.view.id, list(self.view.members)]
        data["bases"] = list(self._bases)
        data["incarnations"] = list(self._incarnations)
        data["inner"] = None if self.inner is None else self.inner.snapshot()
        data["delivered"] = [[lo, sorted(h)] for lo, h in zip(self._low, self._high, strict=True)]
        data["log"] = [list(e) for e in self._log]
        data["own"] = [[k, list(e)] for k, e in sorted(self._own.items())]
        data["stable"] = [[p, list(v)] for p, v in sorted(self._stable.items())]
        data["since_report"] = self._since_report
        data["suspects"] = sorted(self._suspects)
        data["leaving"] = sorted(self._leaving)
        data["joiners"] = [[p, i, s] for p, (i, s) in sorted(self._joiners.items())]
        data["outbox"] = [[payload, to] for payload, to in self._outbox]
        data["future"] = [_packet_data(p) for p in self._future]
        data["needs_state"] = self._needs_state
        data["state_to"] = list(self._state_to)
        data["kept"] = None if self._kept is None else [list(self._kept[0]), self._kept[1]]
        data["provider"] = None if self._provider < 0 else self._provider
        data["change"] = [list(self._change[0]), list(self._change[1])]
        data["left"] = self._left
        data["gone"] = self._gone
        data["flushing"] = self.flushing
        att, coord = self._promised
        data["promised"] = [att, None if coord < 0 else coord]
        data["accepted"] = (
            None if self._accepted is None else [*self._accepted[0], *self._accepted[1].data()]
        )
        data["last_commit"] = None if self._last_commit is None else _packet_data(self._last_commit)
        data["attempt"] = self._attempt
        data["outbid"] = [self._outbid[0], None if self._outbid[1] < 0 else self._outbid[1]]
        data["proposal"] = list(self._proposal)
        data["phase"] = self._phase
        data["promises"] = [_packet_data(p) for _, p in sorted(self._promises.items())]
        data["accepts"] = sorted(self._accepts)
        data["value"] = None if self._value is None else self._value.data()
        data["now"] = self._now
        data["retry_at"] = self._retry_at
        return data

    @classmethod
    def restore(cls, data: Snapshot) -> Self:
        def build() -> Any:
            if not isinstance(data, dict):
                raise LocalError(f"a snapshot is a dict, got {type(data).__name__}")
            if data.get("protocol") != cls.protocol or data.get("version") != cls.snapshot_version:
                raise LocalError(f"snapshot is not a {cls.protocol} snapshot of version 1")
            n = data.get("n")
            if type(n) is int and n > MAX_GROUP:
                raise LocalError(f"snapshot names a group of {n} processes (at most {MAX_GROUP})")
            inner = data["inner_protocol"]
            if not isinstance(inner, str):
                raise LocalError("snapshot field inner_protocol must be a protocol name")
            ep = cls(
                data["pid"],
                data["n"],
                inner,
                contacts=snap_list(data["contacts"], "contacts"),
                reliable=snap_bool(data["reliable"], "reliable"),
                retry=snap_time(data["retry"], "retry"),
                stability_every=snap_positive(data["stability_every"], "stability_every"),
                incarnation=snap_counter(data["incarnation"], "incarnation"),
            )
            ep.sent_count = snap_counter(data["sent_count"], "sent_count")
            ep.duplicates = snap_counter(data["duplicates"], "duplicates")
            return ep

        return cls._checked(data, build)

    def _load(self, data: Snapshot) -> None:
        n = self.n
        view = data["view"]
        if view is not None:
            vid, members = snap_list(view, "view", 2)
            members = _snap_members(members, n, "view")
            self.view = View(snap_counter(vid, "view id"), members)
            self._me = self.view.rank(self.pid) if self.pid in members else -1
            size = len(members)
            self._bases = tuple(
                snap_counter(b, "bases") for b in snap_list(data["bases"], "bases", size)
            )
            self._incarnations = tuple(
                snap_counter(b, "incarnations")
                for b in snap_list(data["incarnations"], "incarnations", size)
            )
            inner = data["inner"]
            self.inner = restore_endpoint(inner)
            if self.inner.n != size or self.inner.pid != self.view.rank(self.pid):
                raise LocalError("snapshot's inner protocol does not fit its view")
            delivered = snap_list(data["delivered"], "delivered", size)
            self._low = [snap_counter(d[0], "delivered") for d in delivered]
            self._high = [{snap_counter(v, "delivered") for v in d[1]} for d in delivered]
        self._log = _snap_entries(data["log"], n)
        self._own = {snap_counter(k, "own"): list(e) for k, e in snap_list(data["own"], "own")}
        self._stable = {
            snap_counter(p, "stable"): tuple(snap_counter(x, "stable") for x in v)
            for p, v in snap_list(data["stable"], "stable")
        }
        self._since_report = snap_counter(data["since_report"], "since_report")
        self._suspects = set(_snap_members(data["suspects"], n, "suspects"))
        self._leaving = set(_snap_members(data["leaving"], n, "leaving"))
        self._joiners = {
            snap_counter(p, "joiners"): (snap_counter(i, "joiners"), snap_counter(s, "joiners"))
            for p, i, s in snap_list(data["joiners"], "joiners")
        }
        for payload, to in snap_list(data["outbox"], "outbox"):
            check_payload(payload)
            if to is not None:
                self._check_dest(to)
            self._outbox.append((payload, to))
        self._future = [_packet_from(d) for d in snap_list(data["future"], "future")]
        self._needs_state = snap_bool(data["needs_state"], "needs_state")
        self._state_to = tuple(_snap_members(data["state_to"], n, "state_to"))
        kept = data["kept"]
        if kept is not None:
            to, state = snap_list(kept, "kept", 2)
            check_payload(state)
            self._kept = (tuple(_snap_members(to, n, "kept")), state)
        provider = data["provider"]
        if provider is not None and (type(provider) is not int or not 0 <= provider < n):
            raise LocalError(f"snapshot field provider holds {provider!r}")
        self._provider = -1 if provider is None else provider
        joined, left = snap_list(data["change"], "change", 2)
        self._change = (
            tuple(_snap_members(joined, n, "change")),
            tuple(_snap_members(left, n, "change")),
        )
        self._left = snap_bool(data["left"], "left")
        self._gone = snap_bool(data["gone"], "gone")
        self.flushing = snap_bool(data["flushing"], "flushing")
        att, coord = snap_list(data["promised"], "promised", 2)
        if coord is not None and (type(coord) is not int or not 0 <= coord < n):
            raise LocalError(f"snapshot field promised names coordinator {coord!r}")
        self._promised = (snap_counter(att, "promised"), -1 if coord is None else coord)
        acc = data["accepted"]
        if acc is not None:
            acc = snap_list(acc, "accepted", 7)
            if type(acc[1]) is not int or not 0 <= acc[1] < n:
                raise LocalError("snapshot field accepted names no coordinator")
            self._accepted = ((snap_counter(acc[0], "accepted"), acc[1]), _snap_value(acc[2:], n))
        lc = data["last_commit"]
        self._last_commit = None if lc is None else _packet_from(lc)  # type: ignore[assignment]
        if self._last_commit is not None and not isinstance(self._last_commit, Commit):
            raise LocalError("snapshot field last_commit is not a Commit")
        self._attempt = snap_counter(data["attempt"], "attempt")
        att, coord = snap_list(data["outbid"], "outbid", 2)
        if coord is not None and (type(coord) is not int or not 0 <= coord < n):
            raise LocalError(f"snapshot field outbid names coordinator {coord!r}")
        self._outbid = (snap_counter(att, "outbid"), -1 if coord is None else coord)
        self._proposal = tuple(_snap_members(data["proposal"], n, "proposal"))
        if data["phase"] not in ("", "prepare", "accept"):
            raise LocalError(f"snapshot field phase holds {data['phase']!r}")
        self._phase = data["phase"]
        for d in snap_list(data["promises"], "promises"):
            pr = _packet_from(d)
            if not isinstance(pr, Promise):
                raise LocalError("snapshot field promises holds something other than a Promise")
            self._promises[pr.sender] = pr
        self._accepts = set(_snap_members(data["accepts"], n, "accepts"))
        value = data["value"]
        self._value = None if value is None else _snap_value(value, n)
        now, retry_at = data["now"], data["retry_at"]
        self._now = None if now is None else snap_time(now, "now")
        self._retry_at = None if retry_at is None else snap_time(retry_at, "retry_at")


# -- checks on what peers send ---------------------------------------------------------------
def _int(value: object, what: str) -> int:
    if type(value) is not int or not 0 <= value <= 2**53:
        raise RemoteError(f"{what} must be a counter, got {value!r}")
    return value


def _members(value: object, n: int) -> tuple[int, ...]:
    if not isinstance(value, tuple | list):
        raise RemoteError("members must be a list of pids")
    members = tuple(value)
    if any(type(m) is not int or not 0 <= m < n for m in members):
        raise RemoteError(f"members {list(members)} names a pid outside 0..{n - 1}")
    if list(members) != sorted(set(members)):
        raise RemoteError("members must be ascending and distinct")
    return members


def _entries(value: object, n: int) -> list[Entry]:
    if not isinstance(value, list):
        raise RemoteError("a flush log must be a list")
    for e in value:
        if not isinstance(e, list) or len(e) != 3:
            raise RemoteError("a flush log entry is [origin, seq, payload]")
        if type(e[0]) is not int or not 0 <= e[0] < n or type(e[1]) is not int or e[1] < 1:
            raise RemoteError(f"flush log entry names no message: {e[:2]!r}")
    return value


def _value(
    members: object, bases: object, incs: object, needs: object, log: object, n: int
) -> _Value:
    m = _members(members, n)
    if not m:
        raise RemoteError("a view has at least one member")
    b = tuple(_int(x, "base") for x in _seq(bases, len(m), "bases"))
    i = tuple(_int(x, "incarnation") for x in _seq(incs, len(m), "incarnations"))
    nd = _members(needs, n)
    if not set(nd) <= set(m):
        raise RemoteError("needs names a process outside the view")
    return _Value(m, b, i, nd, _entries(log, n))


def _value_of(parts: list[Any], n: int) -> _Value:
    if len(parts) != 5:
        raise RemoteError("a view value is [members, bases, incarnations, needs, log]")
    return _value(parts[0], parts[1], parts[2], parts[3], parts[4], n)


def _seq(value: object, size: int, what: str) -> list[Any]:
    if not isinstance(value, tuple | list) or len(value) != size:
        raise RemoteError(f"{what} must have {size} entries")
    return list(value)


def _snap_members(value: object, n: int, what: str) -> list[int]:
    try:
        return list(_members(value, n))
    except RemoteError as exc:
        raise LocalError(f"snapshot field {what}: {exc}") from None


def _snap_entries(value: object, n: int) -> list[Entry]:
    try:
        return [list(e) for e in _entries(value, n)]
    except RemoteError as exc:
        raise LocalError(f"snapshot field log: {exc}") from None


def _snap_value(value: list[Any], n: int) -> _Value:
    try:
        return _value_of(value, n)
    except (RemoteError, TypeError) as exc:
        raise LocalError(f"snapshot holds a bad view value: {exc}") from None


_PACKETS: dict[str, type] = {c.__name__: c for c in PACKETS}


def _packet_data(p: object) -> list[Any]:
    return [type(p).__name__, packet_to_data(p)]


def _packet_from(value: object) -> object:
    name, fields = snap_list(value, "packet", 2)
    cls = _PACKETS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise LocalError(f"snapshot holds an unknown group packet {name!r}")
    return packet_from_data(cls, fields)


_HANDLERS: dict[type, Callable[[Group, Any], list[Action]]] = {
    GroupData: Group._on_data,
    Join: Group._on_join,
    Leave: Group._on_leave,
    Suspect: Group._on_suspect,
    Prepare: Group._on_prepare,
    Promise: Group._on_promise,
    Accept: Group._on_accept,
    Accepted: Group._on_accepted,
    Nack: Group._on_nack,
    Commit: Group._on_commit,
    Query: Group._on_query,
    StateTransfer: Group._on_state,
    Stability: Group._on_stability,
}

__all__ = ["Group"]
