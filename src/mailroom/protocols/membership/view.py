"""The installed view: its members, the ordering protocol over their ranks, what was delivered.

Inside a view the ordering protocol runs over ranks 0..size-1; applications and the
wire name processes by identity. Member ``view.members[r]`` has rank r; its k-th
message of the view (inner seq k) is MessageId(member, bases[r] + k), where
``bases[r]`` is the number of messages it sent before the view. This module holds
that translation and what the flush needs of the view: which inner seqs of each rank
this process delivered, the log of deliveries (broadcast) it would report in a
Promise, its own messages not delivered yet, and the stability reports that prune
the log (what every member has delivered need not travel in a flush). Under safe
delivery (``safe.py``) the deliveries wait in ``held`` and the reports announce how
far this process holds after every step that advanced it.

The ``Epoch`` (at the end) is what lives for one view at a member: the installed
view (None before the first one and after exclusion), its flush and its state
transfer. A Commit that installs the next view, or excludes this process, starts a
new epoch, so nothing of the old view survives by mistake. Each part declares its
own persistent fields; ``lift`` (``mailroom.core.persist``) turns them into fields
of the holder, so ``Group.persistent`` is the parts' tables put together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

import attrs

from mailroom.core.actions import Action, Backpressure, Deliver, Stable, Transmit, View
from mailroom.core.endpoint import same_data
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload, TaggedMessage
from mailroom.core.persist import Field, counter, lift, snap_counter, snap_list
from mailroom.core.registry import restore_endpoint
from mailroom.core.stack import Stack
from mailroom.core.wire import carried_message_id
from mailroom.protocols.membership.flush import Flush
from mailroom.protocols.membership.packets import Entry, GroupData, Stability
from mailroom.protocols.membership.safe import Held, covered
from mailroom.protocols.membership.transfer import Transfer
from mailroom.protocols.membership.values import ENTRIES, snap_members


def first_to_deliver(inner: Any) -> int | None:
    """The rank that, by the ordering protocol ``inner`` (its top layer), delivers every
    message before any other does and in the same order (``first_to_deliver()``), or
    None."""
    top = inner.layers[-1] if isinstance(inner, Stack) else inner
    method = getattr(top, "first_to_deliver", None)
    return None if method is None else int(method())


class InstalledView:
    """View ``view`` as installed at process ``pid`` (of ``n`` identities), running
    ``inner`` (the ordering protocol's endpoint for this process's rank)."""

    def __init__(
        self,
        view: View,
        pid: int,
        n: int,
        bases: Iterable[int],
        incarnations: Iterable[int],
        inner: Any,
        safe: bool = False,
    ) -> None:
        size = len(view.members)
        self.view = view
        self.pid = pid
        self.n = n
        self.rank = view.rank(pid)
        self.bases = tuple(bases)
        self.incarnations = tuple(incarnations)
        self.inner = inner
        #: per rank: inner seqs delivered in this view (every one <= low, plus high)
        self.low = [0] * size
        self.high: list[set[int]] = [set() for _ in range(size)]
        #: deliveries not known to be stable, as [origin, seq, payload] (broadcast only)
        self.log: list[Entry] = []
        #: this process's own messages of the view it has not delivered yet, by inner seq
        self.own: dict[int, Entry] = {}
        #: member -> the ``low`` it last reported (stability)
        self.stable: dict[int, tuple[int, ...]] = {}
        self.since_report = 0
        #: what the reports say every member delivered, as of the last pruning
        self._floor: list[int] = []
        #: safe delivery: the deliveries not handed over yet (None: delivered at once)
        self.held: Held | None = Held() if safe else None
        #: the members no delivery waits on this process's reports for (``quorum``)
        self.lazy_to: frozenset[int] = frozenset()
        #: the rank that holds whatever this process delivered (the sequencer), if the
        #: ordering protocol names one (``first_to_deliver``): no need for its reports
        self.first = first_to_deliver(inner)

    # -- identities ------------------------------------------------------------------------
    def outer(self, mid: MessageId) -> MessageId:
        """An inner message id (rank, inner seq) as the application's (identity, seq)."""
        return MessageId(self.view.members[mid.origin], self.bases[mid.origin] + mid.seq)

    def inner_id(self, mid: MessageId) -> MessageId:
        """An application message id as the inner protocol's; LocalError if not of this view."""
        if mid.origin not in self.view.members:
            raise LocalError(f"{mid} is not a message of the current view")
        rank = self.view.rank(mid.origin)
        return MessageId(rank, mid.seq - self.bases[rank])

    def known(self) -> dict[int, tuple[int, int]]:
        """Each member's (base, incarnation) in this view, by pid (what a coordinator's
        value keeps for a member that does not promise)."""
        return {m: (self.bases[r], self.incarnations[r]) for r, m in enumerate(self.view.members)}

    def incarnation_of(self, pid: int) -> int:
        return self.incarnations[self.view.rank(pid)]

    # -- sending and receiving through the inner protocol ----------------------------------
    def send(self, payload: Payload, to: int | None, seq: int, every: int) -> list[Action]:
        """Send this process's message number ``seq`` (to every member, or to ``to``)."""
        if to is None:
            out = self.inner.broadcast(payload)
            inner_seq = seq - self.bases[self.rank]
            if not self.was_delivered(self.rank, inner_seq):
                self.own[inner_seq] = [self.pid, seq, payload]
            return self.translate(out, True, every)
        return self.translate(self.inner.send(payload, to=self.view.rank(to)), False, every)

    def check_data(self, p: GroupData) -> None:
        """RemoteError unless ``p`` names its message as this view numbers it."""
        inner = carried_message_id(p.payload)
        if inner is None:
            if p.origin != 0 or p.base != 0:
                raise RemoteError("group data without a message names an origin")
            return
        members = self.view.members
        if not 0 <= inner.origin < len(members):
            raise RemoteError(f"group data names rank {inner.origin} of a {len(members)}-view")
        if p.origin != members[inner.origin] or p.base != self.bases[inner.origin]:
            raise RemoteError(
                f"group data names message ({p.origin}, base {p.base}) but the view says "
                f"({members[inner.origin]}, base {self.bases[inner.origin]})"
            )

    def translate(
        self, actions: Iterable[Action], logs: bool, every: int, announce: bool = True
    ) -> list[Action]:
        """The inner protocol's actions, by identity: packets wrapped in GroupData,
        deliveries recorded for the flush (``logs``: in the log too) and stability
        reported every ``every`` logged deliveries (under safe delivery: at the end, if
        this process holds more than it reported and ``announce``)."""
        out: list[Action] = []
        members = self.view.members
        for a in actions:
            if isinstance(a, Transmit):
                mid = a.message_id
                outer = None if mid is None else self.outer(mid)
                origin, base = (
                    (0, 0) if mid is None or outer is None else (outer.origin, outer.seq - mid.seq)
                )
                data = GroupData(self.view.id, self.pid, origin, base, a.packet)
                out.append(Transmit(members[a.to], data, outer, lazy=a.lazy))
            elif isinstance(a, Deliver):
                out += self._delivered(a.message, logs, every)
            elif isinstance(a, Stable):
                stable = Stable(tuple(self.outer(m) for m in a.messages))
                if self.held:  # after the deliveries it follows
                    self.held.add(-1, 0, stable)
                else:
                    out.append(stable)
            elif isinstance(a, Backpressure):
                out.append(Backpressure(members[a.to], a.waiting))
            else:
                out.append(a)
        if self.held is not None and announce and self.advanced():
            out += self.report()  # safe delivery: announce how far this process holds
        return out

    def advanced(self) -> bool:
        """This process holds more than it last reported."""
        last = self.stable.get(self.pid)
        return any(self.low) if last is None else tuple(self.low) != last

    def _delivered(self, m: Message, logs: bool, every: int) -> list[Action]:
        """An inner delivery: record it for the flush and hand it over by identity."""
        rank, seq = m.id.origin, m.id.seq
        self.mark(rank, seq)
        outer = self.outer(m.id)
        if logs:
            self.log.append([outer.origin, outer.seq, m.payload])
            if rank == self.rank:
                self.own.pop(seq, None)
            self.since_report += 1
        sender = outer.origin
        if isinstance(m, TaggedMessage):
            msg: Message = TaggedMessage(outer, sender, m.payload, m.tag)
        else:
            msg = Message(outer, sender, m.payload)
        if self.held is not None:
            self.held.add(rank, seq, Deliver(msg))
            return []
        out: list[Action] = [Deliver(msg)]
        if self.since_report >= every:
            out += self.report(lazy=True)  # only the flush log's pruning waits on it
        return out

    # -- what was delivered ------------------------------------------------------------------
    def mark(self, rank: int, seq: int) -> None:
        high = self.high[rank]
        if seq > self.low[rank]:
            high.add(seq)
        while self.low[rank] + 1 in high:
            self.low[rank] += 1
            high.discard(self.low[rank])

    def was_delivered(self, rank: int, seq: int) -> bool:
        return seq <= self.low[rank] or seq in self.high[rank]

    def recover(self, log: list[Entry]) -> list[Action]:
        """Deliver what this process lacks of a flush log, in log order."""
        actions: list[Action] = []
        rank_of = {m: r for r, m in enumerate(self.view.members)}
        for origin, seq, payload in log:
            r = rank_of.get(origin)
            if r is None:
                raise RemoteError(f"flush log names P{origin}, not a member of view {self.view.id}")
            inner_seq = seq - self.bases[r]
            if inner_seq < 1:
                raise RemoteError(f"flush log names message ({origin}, {seq}) of an earlier view")
            if not self.was_delivered(r, inner_seq):
                self.mark(r, inner_seq)
                actions.append(Deliver(Message(MessageId(origin, seq), origin, payload)))
        return actions

    def own_ids(self) -> list[MessageId]:
        """This process's messages of the view that it has not delivered (yet): under safe
        delivery, those it holds and has not handed over too."""
        base = self.bases[self.rank]
        held = set() if self.held is None else self.held.seqs(self.rank)
        return [MessageId(self.pid, base + k) for k in sorted(held | set(self.own))]

    def own_entries(self) -> list[Entry]:
        return [list(self.own[k]) for k in sorted(self.own)]

    # -- stability: what every member has, so the flush log stays small ---------------------
    def report(self, lazy: bool = False) -> list[Action]:
        """Tell the other members what this process delivered (and prune with it); the
        reports to ``lazy_to`` (to every member if ``lazy``) are marked lazy."""
        self.since_report = 0
        low = tuple(self.low)
        self.stable[self.pid] = low
        self._prune()
        packet = Stability(self.view.id, self.pid, low)
        waits = self.lazy_to
        return [
            Transmit(m, packet, None, lazy=lazy or m in waits)
            for m in self.view.members
            if m != self.pid
        ]

    def quorum(self, needed: int | None) -> None:
        """Safe delivery by ``needed`` holders (None: by all of them): a member waits on
        the reports of the first ``needed - 1`` other members of the view, or, when the
        ordering protocol names a first holder (the sequencer: ``first``), counts it
        without its reports and waits on the first ``needed - 2`` others. This
        process's reports to the members that do not wait on it are lazy: they are
        still sent, a moment later at most, and a member whose first partners are slow
        or gone delivers once they come."""
        members = self.view.members
        first = None if self.first is None else members[self.first]

        def waits_on(q: int) -> list[int]:
            others = [m for m in members if m != q and m != first]
            if needed is None:
                return others
            counted = 1 if first is None or q == first else 2  # itself, and the first holder
            return others[: needed - counted]

        me = self.pid
        self.lazy_to = frozenset(q for q in members if q != me and me not in waits_on(q))

    def heard(self, p: Stability) -> None:
        """Member ``p.sender`` reported what it delivered; RemoteError if malformed. A
        report overtaken by a later one on the way changes nothing."""
        low = tuple(p.low)
        size = len(self.view.members)
        if len(low) != size or any(type(v) is not int or v < 0 for v in low):
            raise RemoteError(f"stability report has {len(low)} entries for {size}")
        known = self.stable.get(p.sender)
        if known is not None:
            low = tuple(map(max, low, known))
        self.stable[p.sender] = low
        self._prune()

    def hold_of(self, member: int) -> Sequence[int]:
        """How far ``member`` holds, as far as this process knows (its own: how far its
        ordering protocol delivered; another's: its last report, zeros before one; the
        first holder's: at least this process's own)."""
        if member == self.pid:
            return self.low
        known = self.stable.get(member) or (0,) * len(self.low)
        if self.first is not None and self.view.members[self.first] == member:
            return tuple(map(max, known, self.low))
        return known

    def holds(self) -> list[Sequence[int]]:
        """``hold_of`` every member, in member order."""
        stable, zeros, low = self.stable, (0,) * len(self.low), self.low
        holds: list[Sequence[int]] = [
            low if m == self.pid else stable.get(m, zeros) for m in self.view.members
        ]
        first = self.first
        if first is not None and first != self.rank:
            holds[first] = self.hold_of(self.view.members[first])
        return holds

    def _prune(self) -> None:
        if len(self.stable) < len(self.view.members):
            return
        floor = covered(self.stable.values())
        if floor == self._floor:
            return  # nothing more is known to be everywhere
        self._floor = floor
        rank_of = {m: r for r, m in enumerate(self.view.members)}
        self.log = [e for e in self.log if e[1] - self.bases[rank_of[e[0]]] > floor[rank_of[e[0]]]]

    # -- snapshots ---------------------------------------------------------------------------
    @classmethod
    def loading(cls, data: object, pid: int, n: int) -> InstalledView:
        """The view of snapshot field ``view`` ([id, members]), to be filled by the other
        fields; LocalError if this process is not a member."""
        vid, members = snap_list(data, "view", 2)
        view = View(snap_counter(vid, "view id"), snap_members(members, n, "view"))
        if pid not in view.members:
            raise LocalError(f"snapshot's view {view.id} does not include P{pid}")
        size = len(view.members)
        return cls(view, pid, n, (0,) * size, (0,) * size, None)

    def _load_counters(self, data: object, what: str) -> tuple[int, ...]:
        size = len(self.view.members)
        return tuple(snap_counter(v, what) for v in snap_list(data, what, size))

    def _load_bases(self, data: object) -> None:
        self.bases = self._load_counters(data, "bases")

    def _load_incarnations(self, data: object) -> None:
        self.incarnations = self._load_counters(data, "incarnations")

    def _load_inner(self, data: object) -> None:
        self.inner = restore_endpoint(data)  # type: ignore[arg-type]
        self.first = first_to_deliver(self.inner)
        if self.inner.n != len(self.view.members) or self.inner.pid != self.rank:
            raise LocalError("snapshot's inner protocol does not fit its view")

    def _load_delivered(self, data: object) -> None:
        rows = snap_list(data, "delivered", len(self.view.members))
        self.low, self.high = [], []
        for row in rows:
            low, high = snap_list(row, "delivered", 2)
            self.low.append(snap_counter(low, "delivered"))
            self.high.append({snap_counter(v, "delivered") for v in snap_list(high, "delivered")})

    def _load_own(self, data: object) -> None:
        for k, e in snap_list(data, "own"):
            self.own[snap_counter(k, "own")] = list(e)

    def _dump_held(self) -> list[Any] | None:
        return None if self.held is None else self.held.rows()

    def _load_held(self, data: object) -> None:
        if data is not None:
            self.held = Held.loading(data, self.inner_id)

    def _load_stable(self, data: object) -> None:
        for p, lows in snap_list(data, "stable"):
            self.stable[snap_counter(p, "stable")] = tuple(
                snap_counter(x, "stable") for x in snap_list(lows, "stable")
            )

    #: The view's fields after ``view`` itself, and what each holds when none is installed.
    persistent = (
        Field.custom("bases", lambda v: list(v.bases), _load_bases),
        Field.custom("incarnations", lambda v: list(v.incarnations), _load_incarnations),
        Field.custom("inner", lambda v: v.inner.snapshot(), _load_inner),
        Field.custom(
            "delivered",
            lambda v: [[lo, sorted(h)] for lo, h in zip(v.low, v.high, strict=True)],
            _load_delivered,
        ),
        Field("log", kind=ENTRIES),
        Field.custom("own", lambda v: [[k, list(e)] for k, e in sorted(v.own.items())], _load_own),
        Field.custom(
            "stable", lambda v: [[p, list(s)] for p, s in sorted(v.stable.items())], _load_stable
        ),
        counter("since_report"),
        Field.custom("held", _dump_held, _load_held, absent=None),
    )
    #: What each of those fields holds when no view is installed.
    EMPTY: ClassVar[dict[str, Any]] = {
        "bases": [],
        "incarnations": [],
        "inner": None,
        "delivered": [],
        "log": [],
        "own": [],
        "stable": [],
        "since_report": 0,
        "held": None,
    }


def view_data(view: View) -> list[Any]:
    """Snapshot field ``view``: [id, members]."""
    return [view.id, list(view.members)]


# -- the epoch: what lives for one view, replaced as a whole when the view ends -----------
def lift_optional(
    get: Callable[[Any], Any], fields: tuple[Field, ...], empty: dict[str, Any]
) -> tuple[Field, ...]:
    """``lift`` for a part that may be None: then each field holds its ``empty`` value."""
    return tuple(_lifted_optional(get, f, empty[f.key]) for f in fields)


def _lifted_optional(get: Callable[[Any], Any], f: Field, empty: Any) -> Field:
    def dump(ep: Any) -> Any:
        part = get(ep)
        return empty if part is None else f.dump(part)

    def load(ep: Any, data: Any) -> None:
        part = get(ep)
        if part is not None:
            f.load(part, data)
        elif not same_data(data, empty):
            raise LocalError(f"snapshot field {f.key} holds data but no view is installed")

    return Field.custom(f.key, dump, load, f.absent)


@attrs.define
class Epoch:
    """Process ``pid``'s (of ``n``) view, flush and state transfer."""

    pid: int
    n: int
    installed: InstalledView | None = None
    flush: Flush = attrs.field()
    transfer: Transfer = attrs.field()

    @flush.default
    def _no_flush(self) -> Flush:
        return Flush(self.pid, self.n)

    @transfer.default
    def _no_transfer(self) -> Transfer:
        return Transfer(self.n)

    @property
    def view(self) -> View | None:
        return None if self.installed is None else self.installed.view

    def _load_view(self, data: object) -> None:
        if data is not None:
            self.installed = InstalledView.loading(data, self.pid, self.n)

    #: the view, then its parts' own tables (``InstalledView``, ``Transfer``, ``Flush``)
    persistent = (
        Field.custom("view", lambda e: None if e.view is None else view_data(e.view), _load_view),
        *lift_optional(lambda e: e.installed, InstalledView.persistent, InstalledView.EMPTY),
        *lift(lambda e: e.transfer, Transfer.persistent),
        *lift(lambda e: e.flush, Flush.persistent),
    )
