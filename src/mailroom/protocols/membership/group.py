"""A process group with views and view-synchronous delivery around any ordering protocol.

Inside a view the ordering protocol (CBCAST, tagged, Sequencer, Skeen, Lamport,
RST, KS, FIFO: any registered name) runs over the view's ranks; each view gets a
fresh instance. A view change is a flush: the coordinator (the lowest member this
process neither suspects nor sees replaced by a newer incarnation asking to join)
runs a ballot-numbered agreement on the next view
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

``Group`` owns its parts and is the only class that calls them; none calls back
into it, and each keeps its own state and its own table of persistent fields (the
snapshot is their tables put together, ``mailroom.core.persist``): the installed
view and its members' deliveries (``view.InstalledView``), the wanted changes
(``changes.Changes``), the flush of the view as a member and as coordinator
(``flush.MemberFlush``, ``flush.CoordinatorFlush``), state transfer
(``transfer.Transfer``), safe delivery (``safe.SafeDelivery``), held for one view in
an ``epoch.Epoch``. A part returns decisions or packets; ``Group`` sends them,
and receives packets by class (``RECEIVES``, ``mailroom.core.dispatch``).
docs/membership-guarantees.md, "Inside Group", has the map.

Extension points (``mailroom.core.hooks``; the harness's known-buggy variants in
``mailroom.testing.membership`` override them and read ``installed``):
``flush_quorum`` (whose promises a flush waits for), ``recover_flush_log`` (what a
member delivers of the decided flush log), ``safe_holds`` (how far each member holds)
and ``safe_needed`` (how many holds a safe delivery waits for).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

import attrs

from mailroom.core.actions import Action, Excluded, Transmit, View, ViewChange
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase, capabilities, receive_each
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import MessageId, Payload, check_payload
from mailroom.core.pending import Pending
from mailroom.core.persist import (
    COUNTER,
    FLAG,
    POSITIVE,
    TIME,
    Field,
    lift,
    snap_list,
    snap_time,
)
from mailroom.core.registry import entry
from mailroom.core.stack import Stack
from mailroom.core.wire import is_packet
from mailroom.protocols.membership import values as check
from mailroom.protocols.membership.changes import Changes, has_majority
from mailroom.protocols.membership.flush import choose
from mailroom.protocols.membership.packets import (
    Accept,
    Accepted,
    Ballot,
    Commit,
    Entry,
    GroupData,
    Join,
    Leave,
    Nack,
    NextView,
    Prepare,
    Promise,
    Query,
    Stability,
    StateTransfer,
    Suspect,
)
from mailroom.protocols.membership.safe import SafeDelivery, check_safe_quorum
from mailroom.protocols.membership.status import GroupStatus
from mailroom.protocols.membership.transfer import Transfer
from mailroom.protocols.membership.values import PACKET
from mailroom.protocols.membership.view import Epoch, InstalledView
from mailroom.protocols.reliable import Reliable

#: Packets of a later view kept until that view is installed (the rest are dropped).
MAX_FUTURE = 4096


@attrs.define
class Retries:
    """When this process next repeats its requests, whom it asked about a later view or
    told they were excluded since the last installation (once each), and since when it
    has waited for a majority (host time; not in snapshots)."""

    at: float | None = None
    asked: set[int] = attrs.Factory(set)
    told: set[int] = attrs.Factory(set)
    waiting_since: float | None = None

    persistent = (Field("retry_at", "at", TIME.optional()),)


class Group(EndpointBase):
    """One member of a process group: views, flush, joins, leaves and state transfer.

    ``Group(pid, n, protocol="cbcast", *, members=None, contacts=(), reliable=False,
    retry=1.0, stability_every=16, incarnation=0, safe=False, safe_quorum="all")``:
    process ``pid`` of the identities 0..n-1 runs ``protocol`` inside each view; with
    ``members`` it founds view 1 with them, else it is a joiner that asks ``contacts``;
    with ``safe`` a message is delivered once every member of the view holds it, or
    with ``safe_quorum="majority"`` once a majority does (docs/safe-delivery.md).
    """

    protocol = "Group"
    snapshot_version = 1

    def __repr__(self) -> str:
        return f"Group(pid={self.pid}, n={self.n}, {self.inner_protocol}, view={self.view})"

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
        safe: bool = False,
        safe_quorum: str = "all",
    ) -> None:
        super().__init__(pid, n)
        self._use(protocol)
        self.reliable = bool(reliable)
        #: safe (uniform) delivery: a message is handed over once every member holds it
        #: (``safe_quorum`` "all") or a majority of the view does ("majority")
        self.safe = self._check_safe(safe)
        #: safe delivery's part: how holders are counted, whether a batch is received
        self._delivery = SafeDelivery(check_safe_quorum(safe_quorum, self.safe))
        if type(retry) not in (int, float) or not math.isfinite(retry) or retry <= 0:
            raise LocalError(f"retry must be a positive number of time units, got {retry!r}")
        self.retry = float(retry)
        if type(stability_every) is not int or stability_every < 1:
            raise LocalError(f"stability_every must be a positive integer, got {stability_every!r}")
        self.stability_every = stability_every
        if type(incarnation) is not int or incarnation < 0:
            raise LocalError(f"incarnation must be a non-negative integer, got {incarnation!r}")
        self.incarnation = incarnation
        self.contacts = tuple(sorted({int(c) for c in contacts}))
        for c in self.contacts:
            self.check_dest(c)
        self._left = False  # leave() was called
        self._gone = False  # excluded for good (left)
        #: messages issued before they can be sent (see flush.py, "Sends")
        self._outbox: list[tuple[Payload, int | None]] = []
        #: packets of a later view, kept until it is installed
        self._future: list[object] = []
        self._last_commit: Commit | None = None
        self._now: float | None = None
        self._epoch = Epoch(pid, n)
        self._changes = Changes(n)
        self._retries = Retries()
        if members is not None:
            first = tuple(sorted({self.check_dest(m) for m in members}))
            if pid not in first:
                raise LocalError(f"P{pid} is not among the initial members {list(first)}")
            zeros = (0,) * len(first)
            self._install(View(1, first), zeros, zeros, Transfer(n))

    def _use(self, protocol: str) -> None:
        found = entry(protocol)
        self.inner_protocol = protocol
        self.mode = found.mode
        self._factory = found.factory
        self.capabilities: frozenset[str] = frozenset({self.mode})

    def _check_safe(self, safe: object) -> bool:
        if type(safe) is not bool:
            raise LocalError(f"safe must be True or False, got {safe!r}")
        if safe and self.mode != "broadcast":
            raise LocalError(
                f"safe delivery needs a broadcast protocol, not {self.inner_protocol}",
                hint="use cbcast, tagged, sequencer, skeen or lamport",
            )
        return safe

    def _install(
        self, view: View, bases: tuple[int, ...], incs: tuple[int, ...], transfer: Transfer
    ) -> None:
        """A new epoch: ``view`` with a fresh inner endpoint and flush; the wanted changes
        it settles are forgotten and the retries start afresh."""
        size = len(view.members)
        rank = view.rank(self.pid)
        inner = self._factory(rank, size)
        if self.reliable:
            layers = inner.layers if isinstance(inner, Stack) else [inner]
            # arming the reliable layer's timers may wait for the group's next retry
            inner = Stack(Reliable(rank, size, arm_within=self.retry), *layers)
        installed = InstalledView(view, self.pid, self.n, bases, incs, inner, self.safe)
        self._epoch = Epoch(self.pid, self.n, installed, transfer=transfer)
        self._lazy_reports()
        self._changes = self._changes.within(view, tuple(incs))
        self._retries = Retries()
        self._delivery.new_view()

    def _lazy_reports(self) -> None:
        """Mark the installed view's reports that no delivery waits on (``quorum``)."""
        installed = self._epoch.installed
        if installed is not None:
            installed.quorum(self._delivery.lazy_needed(len(installed.view.members)))

    # -- what hosts and tests read ---------------------------------------------------
    @property
    def joined(self) -> bool:
        """Installed a view and holds the application state."""
        return self.view is not None and not self._epoch.transfer.needs_state

    @property
    def sending_view(self) -> int | None:
        """The view a message sent now will be sent in."""
        if self.view is None or self._gone:
            return None
        return self.view.id + 1 if self.flushing else self.view.id

    def unsent(self) -> list[Payload]:
        """The broadcasts issued and not sent yet (queued while the view changes or while
        joining), oldest first: the ids ``sent_count - len(unsent()) + 1`` onwards."""
        return [payload for payload, _ in self._outbox]

    @property
    def suspects(self) -> frozenset[int]:
        return frozenset(self._changes.suspects)

    def status(self) -> GroupStatus:
        """What this member sees of its group, for the host to log or show (read-only):
        its view, the coordinator, where the flush stands, the wanted changes, and
        whether it waits for a majority and since when (the host time of the first tick
        that found it so; a restore starts counting again)."""
        installed, flush, changes = self._epoch.installed, self._epoch.flush, self._changes
        view = self.view
        found = None if view is None else changes.next_members(view)
        staying = found[0] if found is not None else view.members if view is not None else ()
        return GroupStatus(
            pid=self.pid,
            incarnation=self.incarnation,
            view=view,
            incarnations=() if installed is None else installed.incarnations,
            joined=self.joined,
            coordinator=self.coordinator,
            flush=flush.member.freeze,
            round=flush.coordinator.round,
            suspects=tuple(sorted(changes.suspects)),
            leaving=tuple(sorted(changes.leaving)),
            joiners=tuple(sorted(changes.joiners)),
            staying=tuple(staying),
            waiting_for_majority=self._lacks_majority(),
            waiting_since=self._retries.waiting_since,
            future=len(self._future),
            queued=len(self._outbox),
            flush_log=0 if installed is None else len(installed.log),
            gone=self._gone,
            waiting_safe=0
            if installed is None or installed.held is None
            else installed.held.messages,
            safe_quorum=self.safe_quorum,
        )

    def _lacks_majority(self) -> bool:
        """A view change is wanted that no flush can make: too few members would stay."""
        view = self.view
        return view is not None and not self._gone and self._changes.lacks_majority(view)

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
        self.check_dest(to)
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
        self.sent_count += 1
        if not self._ready():
            self._outbox.append((payload, to))
            return []
        return self._send_now(payload, to)

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        """Pass the application's consumption to the inner protocol (tagged, explicit)."""
        installed = self._epoch.installed
        if installed is None or "consume" not in capabilities(installed.inner):
            raise LocalError(f"Group over {self.inner_protocol} does not need consume")
        inner_id = None if message_id is None else installed.inner_id(message_id)
        return self._translate(installed.inner.consume(inner_id))

    # -- the host's membership inputs ------------------------------------------------------
    def suspect(self, pid: int) -> list[Action]:
        """The host's failure detector suspects member ``pid`` (idempotent)."""
        self.check_dest(pid)
        if self.view is None or pid == self.pid or pid not in self.view.members:
            return []
        if pid in self._changes.suspects:
            return []
        self._changes.suspects.add(pid)
        actions = self._coordinate()
        return actions + self._to_coordinator(lambda v: Suspect(v, self.pid, pid))

    def leave(self) -> list[Action]:
        """Leave the group: the next view excludes this process (then ``Excluded``)."""
        if self.view is None or self._gone:
            raise LocalError(f"P{self.pid} is not a member of a view")
        self._left = True
        self._changes.leaving.add(self.pid)
        actions = self._coordinate()
        return actions + self._to_coordinator(lambda v: Leave(v, self.pid))

    def _to_coordinator(self, packet: Callable[[int], object]) -> list[Action]:
        """``packet(view id)`` to the coordinator, unless this process is the coordinator."""
        coord = self.coordinator
        if coord is None or coord == self.pid or self.view is None:
            return []
        return [control(coord, packet(self.view.id))]

    def provide_state(self, view: int, state: Payload) -> list[Action]:
        """Send the application's ``state`` at the start of ``view`` to the joiners."""
        if self.view is None or view != self.view.id:
            raise LocalError(f"no state was requested for view {view!r}")
        return list(self._epoch.transfer.provide(view, self.pid, state))

    # -- time ------------------------------------------------------------------------------------
    def tick(self, now: float) -> list[Action]:
        if type(now) not in (int, float) or not math.isfinite(now) or not 0 <= now <= 2**40:
            raise LocalError(f"now must be a finite time in [0, 2**40], got {now!r}")
        now = float(now)
        self._now = now
        actions: list[Action] = []
        installed = self._epoch.installed
        if installed is not None:
            actions += self._translate(installed.inner.tick(now))
        retries = self._retries
        if retries.at is None:
            if self._waiting():
                retries.at = now + self.retry
        elif now >= retries.at:
            retries.at = now + self.retry if self._waiting() else None
            actions += self._resend()
        retries = self._retries  # a new one if a view was installed
        if not self._lacks_majority():
            retries.waiting_since = None
        elif retries.waiting_since is None:
            retries.waiting_since = now
        return actions

    def next_deadline(self) -> float | None:
        installed = self._epoch.installed
        inner: float | None = None if installed is None else installed.inner.next_deadline()
        own: float | None = None
        if self._waiting():
            own = self._retries.at if self._retries.at is not None else (self._now or 0.0)
        if inner is None:
            return own
        return inner if own is None else min(inner, own)

    def pending(self) -> list[Pending]:
        installed = self._epoch.installed
        return [] if installed is None else list(installed.inner.pending())

    def buffered(self) -> int:
        installed = self._epoch.installed
        inner = 0 if installed is None else int(installed.inner.buffered())
        held = 0 if installed is None or installed.held is None else installed.held.messages
        return inner + held + len(self._outbox) + len(self._future)

    # -- what the parts say ------------------------------------------------------------
    @property
    def view(self) -> View | None:
        """The installed view (None while joining and after exclusion)."""
        return self._epoch.view

    @property
    def installed(self) -> InstalledView | None:
        """What this member keeps for the installed view: its members' holds, who
        reported stability, the delivery counts (None while joining and after
        exclusion). A hook's override reads it; the hooks change it, nothing else."""
        return self._epoch.installed

    @property
    def inner(self) -> Any:
        """The ordering protocol's endpoint of the installed view (None without a view)."""
        installed = self._epoch.installed
        return None if installed is None else installed.inner

    @property
    def flushing(self) -> bool:
        """A view change is under way: broadcasts are queued for the next view."""
        return self._epoch.flush.frozen

    @property
    def coordinator(self) -> int | None:
        """The member this process takes for the coordinator of its view: the lowest one
        neither suspected nor replaced (a newer incarnation of it asks to join: this one
        crashed, and would never run the flush that lets the new one in)."""
        installed = self._epoch.installed
        if installed is None:
            return None
        return self._changes.coordinator(installed.view, installed.incarnations)

    # -- sending and receiving in the view --------------------------------------------------
    def _ready(self) -> bool:
        """Messages may go on the wire now (flush.py, "Sends")."""
        return self.view is not None and not self.flushing and not self._epoch.transfer.needs_state

    def _send_now(self, payload: Payload, to: int | None) -> list[Action]:
        installed = self._epoch.installed
        assert installed is not None
        return self._handed(installed.send(payload, to, self.sent_count, self.stability_every))

    def _translate(self, actions: Iterable[Action]) -> list[Action]:
        installed = self._epoch.installed
        assert installed is not None
        every = self.stability_every
        batching = self._delivery.batching
        out = installed.translate(actions, self.mode == "broadcast", every, not batching)
        return self._handed(out)

    # -- safe delivery (``safe.py``: the part decides, the hooks state the rules) ----------
    @property
    def safe_quorum(self) -> str:
        """How a safe group counts the holders of a message: "all" or "majority"."""
        return self._delivery.quorum

    def _handed(self, actions: list[Action]) -> list[Action]:
        """``actions`` of a step of the view's ordering protocol, then the held deliveries
        that every member now holds (safe delivery)."""
        installed = self._epoch.installed
        return actions + self._release() if installed is not None and installed.held else actions

    def _release(self) -> list[Action]:
        """Hand over the held deliveries that every member holds (none while frozen: the
        Commit hands over what is held; none within a batch: ``one_step`` does, at its end)."""
        installed = self._epoch.installed
        if installed is None or not self._delivery.may_release(installed, self.flushing):
            return []
        return self._delivery.release(installed, self.safe_holds(), self.safe_needed())

    @hook
    def safe_holds(self) -> list[Sequence[int]]:
        """Rule: how far each member of the view holds, as far as this process knows: a
        held delivery is handed over once all of these cover it. (The harness's
        known-buggy ``GroupSafeOwnHold`` counts its own hold alone.)"""
        installed = self._epoch.installed
        assert installed is not None
        return installed.holds()

    @hook
    def safe_needed(self) -> int | None:
        """Rule: how many of ``safe_holds()`` must cover a held delivery before it is
        handed over: None for every one of them ("all"), else a majority of the view.
        (The harness's known-buggy ``GroupSafeBelowMajority`` counts one too few.)"""
        return self._delivery.needed(self._epoch.installed)

    def one_step(
        self, receive: Callable[[object], list[Action]], packets: Iterable[object]
    ) -> tuple[list[Action], list[RemoteError]]:
        """``receive`` (this group's, or that of a layer around it) each of ``packets`` as
        one step: under safe delivery this process hands over what it may and announces
        how far it holds once, at the end, rather than after each packet."""
        self._delivery.start_batch()
        try:
            actions, errors = receive_each(receive, packets)
        finally:
            self._delivery.end_batch()
        installed = self._epoch.installed
        if installed is not None and installed.held is not None:
            actions += self._release()
            if installed.advanced():
                actions += installed.report()
        return actions, errors

    # -- receiving in the view -------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        """Hand ``packet`` to its handler (``RECEIVES``); RemoteError for any other class."""
        return self.RECEIVES[type(packet)](self, packet)

    def receive_many(self, packets: Iterable[object]) -> tuple[list[Action], list[RemoteError]]:
        """Receive ``packets`` in order as one step (the refused ones' errors are returned)."""
        return self.one_step(self.receive, packets)

    def _on_data(self, p: GroupData) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        epoch = self._epoch
        installed = epoch.installed
        assert installed is not None
        if epoch.flush.frozen:
            return []  # frozen: what matters of this view comes with the Commit
        if epoch.transfer.needs_state:
            return self._hold(p)
        installed.check_data(p)
        return self._translate(installed.inner.receive(p.payload))

    def _on_stability(self, p: Stability) -> list[Action]:
        if not self._current(p.view, p.sender):
            if self.safe and (self.view is None or p.view > self.view.id):
                return self._hold(p, ask=p.sender)  # a hold reported in a later view
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        view = self._epoch.installed
        assert view is not None
        view.heard(p)
        released = self._release()  # safe delivery: what every member now holds
        return released + self._heard_from(p.sender)

    def _heard_from(self, sender: int) -> list[Action]:
        """``sender``, a member of this view, spoke in it (a report, a question): a
        suspicion of it that can never win a majority is withdrawn, or it would keep
        every other change out for good (the detector raises it again if it falls
        silent); then coordinate, as fewer suspects may make a majority."""
        changes, installed = self._changes, self._epoch.installed
        if installed is None or sender not in changes.suspects:
            return []
        if not changes.lacks_majority(installed.view):
            return []
        changes.suspects.discard(sender)
        return self._coordinate()

    def _current(self, view: object, sender: object) -> bool:
        """The packet is of this process's installed view, from one of its members."""
        check.counter(view, "view")
        check.counter(sender, "sender")
        check.sender(sender, self.n)
        installed = self._epoch.installed
        return (
            installed is not None and view == installed.view.id and sender in installed.view.members
        )

    # -- packets of other views -------------------------------------------------------------
    def _elsewhere(self, p: object, view: int, sender: int) -> list[Action]:
        """A packet of another view: stale ones are dropped, later ones kept and asked about."""
        mine = self.view
        if mine is not None and view < mine.id:
            self.duplicates += 1
            return self.notice(sender, view)  # it may have been excluded and not know
        if mine is not None and view == mine.id:
            raise RemoteError(f"P{sender} is not a member of view {view}")
        return self._hold(p, ask=sender)

    def _hold(self, p: object, ask: int | None = None) -> list[Action]:
        if len(self._future) < MAX_FUTURE:
            self._future.append(p)
        return [] if ask is None or ask == self.pid else self._ask(ask)

    def notice(self, sender: int, view: int) -> list[Action]:
        """A layer around the group (the heartbeat detector) saw a packet of ``view`` from
        ``sender``: tell an excluded process so, or ask a process that is ahead."""
        check.counter(view, "view")
        check.sender(sender, self.n)
        mine = self.view
        if mine is not None and view < mine.id:
            last, told = self._last_commit, self._retries.told
            if sender in mine.members or last is None or sender in told:
                return []
            told.add(sender)
            return [control(sender, last)]
        if mine is None or view > mine.id:
            return self._ask(sender)
        return []

    def _ask(self, sender: int) -> list[Action]:
        """Query ``sender``, which is ahead, once per installed view."""
        asked = self._retries.asked
        if sender in asked:
            return []
        asked.add(sender)
        return [control(sender, Query(self.view.id if self.view else 0, self.pid))]

    # -- requests to change the view -----------------------------------------------------------
    def join(self, contacts: Collection[int] | None = None) -> list[Action]:
        """A joiner asks its contacts (``contacts``, if given, replace them) to let it in
        (tick repeats it every ``retry``)."""
        if self.view is not None or self._gone:
            return []
        if contacts is not None:
            found = tuple(sorted({self.check_dest(c) for c in contacts} - {self.pid}))
            self.contacts = found or self.contacts
        if not self.contacts:
            raise LocalError("a joiner needs contacts (members of the running group)")
        self._arm()
        join = Join(self.pid, self.incarnation, self.sent_count - len(self._outbox))
        return [control(c, join) for c in self.contacts if c != self.pid]

    def _on_join(self, p: Join) -> list[Action]:
        check.sender(p.sender, self.n)
        check.counter(p.incarnation, "incarnation")
        check.counter(p.sent, "sent")
        installed = self._epoch.installed
        if installed is None or p.sender == self.pid:
            return []
        if p.sender in installed.view.members:
            known = installed.incarnation_of(p.sender)
            if p.incarnation < known:
                return []  # from an incarnation that is gone
            if p.incarnation == known:  # it is in: it missed the Commit that says so
                last = self._last_commit
                if last is not None and last.view + 1 == installed.view.id:
                    return [control(p.sender, last)]
                return []
            # a later incarnation asks: the member's old one is gone (it restarted), so
            # it is suspected, and can neither coordinate nor be waited for
            self._changes.suspects.add(p.sender)
        self._changes.joiners[p.sender] = (p.incarnation, p.sent)
        return self._forward_or_coordinate(p)

    def _forward_or_coordinate(self, p: object) -> list[Action]:
        coord = self.coordinator
        if coord == self.pid:
            return self._coordinate()
        return [] if coord is None else [control(coord, p)]

    def _on_leave(self, p: Leave) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        self._changes.leaving.add(p.sender)
        return self._forward_or_coordinate(p)

    def _on_suspect(self, p: Suspect) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        assert self.view is not None
        check.sender(p.suspect, self.n)
        if p.suspect not in self.view.members or p.suspect == self.pid:
            return []
        suspects = self._changes.suspects
        if p.suspect not in suspects:
            suspects.add(p.suspect)
            if self._changes.lacks_majority(self.view):
                # another member's suspicion that leaves no majority here is not taken:
                # it could only block, and a suspect that answers would be let off and
                # suspected again at each forward, for good (this process's own
                # detector still raises it if the member falls silent here too)
                suspects.discard(p.suspect)
                return []
        return self._coordinate()

    def _on_query(self, p: Query) -> list[Action]:
        check.counter(p.view, "view")
        check.sender(p.sender, self.n)
        view, last = self.view, self._last_commit
        if view is None:
            return []
        if p.view > view.id:
            return []
        if p.view == view.id:
            return self._alive(p) + self._heard_from(p.sender)
        if last is not None and (p.view == last.view or p.sender not in view.members):
            return [control(p.sender, last)]  # it missed the Commit, or was excluded meanwhile
        return []

    def _alive(self, p: Query) -> list[Action]:
        """A member of this view asks: the state again if it waits for it, else a
        stability report, frozen in a flush or not, which tells a member that suspects
        this one and cannot win a majority that it is alive (``_heard_from`` withdraws
        it), or, under safe delivery, how far this one holds (its report was lost; a
        frozen member's holds are in its Promise, so they count as any holder's)."""
        answer = self._epoch.transfer.answer(p, self.pid)
        installed = self._epoch.installed
        if answer or installed is None or p.sender == self.pid:
            return answer
        if p.sender not in installed.view.members:
            return []
        return [control(p.sender, Stability(installed.view.id, self.pid, tuple(installed.low)))]

    # -- the flush, as a member ---------------------------------------------------------
    def _on_prepare(self, p: Prepare) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = _ballot(p)
        check.members(p.members, self.n)
        higher = self._epoch.flush.member.promise(ballot)
        return self._answer(p, higher, lambda: self._promise(ballot))

    def _answer(
        self, p: Prepare | Accept, higher: Ballot | None, reply: Callable[[], object]
    ) -> list[Action]:
        """A Nack if a ``higher`` ballot was promised, else ``reply()`` (and the retry
        timer runs: a frozen member waits for the Commit)."""
        if higher is not None:
            return [control(p.sender, Nack(p.view, self.pid, *higher))]
        self._arm()
        return [control(p.sender, reply())]

    def _promise(self, ballot: Ballot) -> Promise:
        installed, epoch = self._epoch.installed, self._epoch
        assert installed is not None
        return Promise(
            installed.view.id,
            self.pid,
            *ballot,
            self.sent_count - len(self._outbox),
            not epoch.transfer.needs_state,
            [list(e) for e in installed.log],
            installed.own_entries(),
            epoch.flush.member.accepted_data(),
        )

    def _on_accept(self, p: Accept) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = _ballot(p)
        value = check.next_view(p.members, p.bases, p.incarnations, p.needs, p.log, self.n)
        higher = self._epoch.flush.member.accept(ballot, value)
        return self._answer(p, higher, lambda: Accepted(p.view, self.pid, *ballot))

    def _on_commit(self, p: Commit) -> list[Action]:
        check.counter(p.view, "view")
        check.sender(p.sender, self.n)
        value = check.next_view(p.members, p.bases, p.incarnations, p.needs, p.log, self.n)
        view = self.view
        if self._gone:
            return []
        if view is None:
            if not value.names(self.pid, self.incarnation):
                return []  # a joiner waits for the view that names this incarnation
            return self._decided(p.view + 1, value, p)
        if p.view < view.id:
            self.duplicates += 1
            return []
        if p.view > view.id:
            if value.names(self.pid, self.incarnation):
                return []  # installed without this process's flush: can only be a copy
            return self._exclude(View(p.view + 1, value.members), p)
        return self._decided(p.view + 1, value, p)

    def _on_state(self, p: StateTransfer) -> list[Action]:
        check.counter(p.view, "view")
        check.sender(p.sender, self.n)
        view, transfer = self.view, self._epoch.transfer
        if not transfer.needs_state or view is None or p.view != view.id:
            return []
        transfer.needs_state = False
        joined, left = transfer.change
        assert self._epoch.installed is not None
        incs = self._epoch.installed.incarnations
        return [
            ViewChange(view, joined, left, p.payload, incarnations=incs),
            *self._after_install(),
        ]

    # -- the flush, as coordinator ----------------------------------------------------------
    @hook
    def flush_quorum(self) -> set[int]:
        """Rule: the members whose promise and acceptance the running flush waits for:
        those of the view that its proposal keeps, rejoining processes aside, and when
        they are no majority alone, the members leaving of their own accord
        (``Changes.leavers``; one suspected since stays in the quorum of the ballot that
        counts it, which then cannot finish, and no new one opens: ``Changes.voters``).
        (An extension point: the harness's known-buggy ``GroupNoQuorum`` makes it the
        coordinator alone.)"""
        view = self.view
        if view is None:
            return set()
        changes = self._changes
        proposal = self._epoch.flush.coordinator.proposal
        quorum = {m for m in proposal if m in view.members and m not in changes.joiners}
        if quorum and not has_majority(sorted(quorum), view):
            quorum |= changes.leavers(view)
        return quorum

    def _leads(self) -> bool:
        """This process drives the view's change: it is the coordinator (the lowest
        member it does not suspect), or it runs a ballot. Members promised that ballot,
        so only it, or a higher one, can end the view; a withdrawn suspicion that makes
        a lower member the coordinator does not stop it, or both would wait on the
        other (the lower one waits on a higher ballot unless it suspects its owner)."""
        return self.coordinator == self.pid or self._epoch.flush.coordinator.running

    def _coordinate(self) -> list[Action]:
        """Open a ballot if this process leads, the view must change and no ballot it
        runs can still finish (flush.py)."""
        installed, member = self._epoch.installed, self._epoch.flush.member
        coordinator = self._epoch.flush.coordinator
        if installed is None or not self._leads():
            return []
        found = self._changes.next_members(installed.view)
        if found is None or coordinator.can_finish(self.flush_quorum(), self._changes.suspects):
            return []
        survivors, proposal = found
        if not has_majority(self._changes.voters(installed.view, survivors), installed.view):
            return []  # primary partition: a minority does not install views
        prepare = coordinator.open(installed.view.id, proposal, member.promised)
        actions: list[Action] = [control(m, prepare) for m in self.flush_quorum() if m != self.pid]
        ballot = coordinator.ballot
        member.promise(ballot)  # its own ballot is above every one it promised
        self._arm()
        return actions + self._on_promise(self._promise(ballot))

    def _on_promise(self, p: Promise) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        check.counter(p.sent, "sent")
        if type(p.has_state) is not bool:
            raise RemoteError("has_state must be a bool")
        check.entries(p.log, self.n)
        check.entries(p.own, self.n)
        check.accepted(p.accepted, self.n)
        coordinator = self._epoch.flush.coordinator
        if not coordinator.count_promise(p, self.flush_quorum()):
            return []
        installed = self._epoch.installed
        assert installed is not None
        promises, proposal = coordinator.promises, coordinator.proposal
        value = choose(promises, proposal, self._changes.joiners, installed.known(), self.n)
        accept = coordinator.propose(installed.view.id, value)
        actions: list[Action] = [control(m, accept) for m in self.flush_quorum() if m != self.pid]
        reply = self._on_accept(accept)  # its own Accept: an Accepted, or a Nack if outbid
        own = reply[0].packet if len(reply) == 1 and isinstance(reply[0], Transmit) else None
        return actions + self._on_accepted(own) if isinstance(own, Accepted) else actions

    def _on_nack(self, p: Nack) -> list[Action]:
        """A member promised a higher ballot: outbid it if its coordinator is suspected
        (else wait: that coordinator's flush excludes or includes this one)."""
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        ballot = (check.counter(p.attempt, "attempt"), p.coord)
        check.sender(p.coord, self.n)
        return self._coordinate() if self._epoch.flush.coordinator.count_nack(ballot) else []

    def _on_accepted(self, p: Accepted) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        installed, coordinator = self._epoch.installed, self._epoch.flush.coordinator
        if not coordinator.count_accepted(p, self.flush_quorum()):
            return []
        value = coordinator.value
        assert installed is not None and value is not None
        commit = value.commit(installed.view.id, self.pid)
        targets = (set(installed.view.members) | set(value.members)) - {self.pid}
        actions: list[Action] = [control(m, commit) for m in sorted(targets)]
        return actions + self._on_commit(commit)

    # -- installing a view ---------------------------------------------------------------------
    @hook
    def recover_flush_log(self, log: list[Entry]) -> list[Action]:
        """Rule: deliver what this process lacks of the decided flush log, before the
        next view; under safe delivery, first what it holds and has not handed over.
        (The harness's known-buggy ``GroupSkipsFlushLog`` skips it.)"""
        installed = self._epoch.installed
        assert installed is not None
        held = installed.held.release_all() if installed.held is not None else []
        return held + installed.recover(log)

    def _decided(self, view_id: int, value: NextView, commit: Commit) -> list[Action]:
        """Deliver what this process lacks of the flush log, then install the next view."""
        old = self._epoch.installed
        actions: list[Action] = []
        named = value.names(self.pid, self.incarnation)
        recovers = (
            old is not None and self.mode == "broadcast" and not self._epoch.transfer.needs_state
        )
        if recovers and (named or not self.safe):  # safe: an excluded member hands over nothing
            actions = self.recover_flush_log(value.log)
        self._last_commit = commit
        if not named:
            return actions + self._exclude(View(view_id, value.members), commit)
        view = View(view_id, value.members)
        before = set(old.view.members) if old is not None else set()
        joined = tuple(m for m in view.members if m not in before)
        left = tuple(sorted(before - set(view.members)))
        transfer = Transfer.of(self.n, self.pid, view, value.needs, (joined, left))
        self._install(view, value.bases, value.incarnations, transfer)
        if transfer.needs_state:
            self._arm()
            return actions + self._replay_future()
        actions.append(ViewChange(view, joined, left, incarnations=value.incarnations))
        actions += transfer.request(view.id)
        return actions + self._after_install()

    def _after_install(self) -> list[Action]:
        """The view is installed with its state: send what was queued for it (unless a
        flush froze it meanwhile), replay its early packets, coordinate."""
        actions = self._send_queued() if self._ready() else []
        actions += self._replay_future()
        if self._ready():
            actions += self._coordinate()
        return actions

    def _send_queued(self) -> list[Action]:
        actions: list[Action] = []
        queued, self._outbox = self._outbox, []
        first = self.sent_count - len(queued)
        for k, (payload, to) in enumerate(queued):
            self.sent_count = first + k + 1
            actions += self._send_now(payload, to)
        self.sent_count = first + len(queued)
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
        """This incarnation is not in ``view``: report it and, unless it left, rejoin.
        Its messages of the old view that it did not deliver are dropped; what its
        application issued and never sent (the queue) waits, as a joiner's does, for
        the first view it runs in with the state, unless it left."""
        installed = self._epoch.installed
        in_doubt = [] if installed is None else installed.own_ids()
        rejoin = not self._left
        unsent: tuple[MessageId, ...] = ()
        if not rejoin:
            first = self.sent_count - len(self._outbox)
            unsent = tuple(MessageId(self.pid, first + k + 1) for k in range(len(self._outbox)))
            self._outbox = []
        self._last_commit = commit
        self._epoch = Epoch(self.pid, self.n)
        self._changes = Changes(self.n)
        self._future = []
        actions: list[Action] = [Excluded(view, (*in_doubt, *unsent), rejoin, unsent)]
        if not rejoin:
            self._gone = True
            return actions
        self.incarnation += 1
        self.contacts = tuple(m for m in view.members if m != self.pid)
        return actions + self.join()

    # -- retries ---------------------------------------------------------------------------
    def _resend(self) -> list[Action]:
        view = self.view
        if view is None:
            return self.join()
        again = self._epoch.flush.repeat(view.id, self.flush_quorum())
        if again is not None:
            return [control(to, p) for to, p in again] + self._ask_suspects(view)
        waiting = self._epoch.transfer.repeat(view.id, self.pid)
        if waiting is not None:
            return list(waiting)
        installed = self._epoch.installed
        actions = self._delivery.ask_holds(installed, self.flushing)
        coord = self.coordinator
        if coord == self.pid:
            return actions + self._coordinate() + self._ask_suspects(view)
        if coord is None:
            return actions
        forward = self._changes.forward(view.id, self.pid, coord)
        return actions + [control(coord, p) for p in forward]

    def _ask_suspects(self, view: View) -> list[Action]:
        """A coordinator whose suspicions leave no majority (so no ballot it could open
        finishes) asks the suspected whether they are alive, in whatever phase its
        flush is: any answer of theirs in this view withdraws the suspicion
        (``_heard_from``), or a ballot stuck on a member that is gone, with false
        suspicions it can never lose, would hold the group for good."""
        if not self._leads() or not self._changes.lacks_majority(view):
            return []
        query = Query(view.id, self.pid)
        return [control(p, query) for p in sorted(self._changes.suspects)]

    def _waiting(self) -> bool:
        """Something this process waits for from others, so it repeats its request."""
        if self._gone:
            return False
        epoch = self._epoch
        if epoch.installed is None:
            return bool(self.contacts)
        held = bool(epoch.installed.held)
        return epoch.flush.frozen or epoch.transfer.needs_state or self._changes.wanted or held

    def _arm(self) -> None:
        if self._retries.at is None and self._now is not None:
            self._retries.at = self._now + self.retry

    #: packet class -> the method that handles it (``mailroom.core.dispatch``)
    RECEIVES: Receivers[Group] = Receivers(
        "Group",
        "a group packet",
        {
            GroupData: _on_data,
            Stability: _on_stability,
            Join: _on_join,
            Leave: _on_leave,
            Suspect: _on_suspect,
            Query: _on_query,
            Prepare: _on_prepare,
            Promise: _on_promise,
            Accept: _on_accept,
            Accepted: _on_accepted,
            Nack: _on_nack,
            Commit: _on_commit,
            StateTransfer: _on_state,
        },
    )

    # -- snapshots: the parts' fields (each part declares its own) ----------------------------
    def _load_protocol(self, data: object) -> None:
        if not isinstance(data, str):
            raise LocalError("snapshot field inner_protocol must be a protocol name")
        self._use(data)

    def _load_retry(self, data: object) -> None:
        self.retry = snap_time(data, "retry")
        if self.retry <= 0:
            raise LocalError(f"snapshot field retry holds {data!r}, not a positive time")

    def _load_outbox(self, data: object) -> None:
        for payload, to in snap_list(data, "outbox"):
            check_payload(payload)
            if to is not None:  # a unicast is refused, never queued
                raise LocalError("snapshot field outbox queues a unicast")
            self._outbox.append((payload, None))

    def _load_future(self, data: object) -> None:
        self._future = [PACKET.load(d, self, "future") for d in snap_list(data, "future")]

    def _load_last_commit(self, data: object) -> None:
        if data is not None:
            self._last_commit = check.packet_from(data, "last_commit", Commit)

    def _safe_fits(self, safe: bool) -> str | None:
        """``safe`` (loaded after the epoch): with a broadcast protocol, and exactly when the
        installed view holds deliveries (``held``)."""
        if safe and self.mode != "broadcast":
            return f"is true with {self.inner_protocol}, not a broadcast protocol"
        installed = self._epoch.installed
        if installed is not None and (installed.held is not None) != safe:
            return "does not match field held"
        return None

    def _load_safe_quorum(self, data: object) -> None:
        try:
            self._delivery.quorum = check_safe_quorum(data, self.safe)
        except LocalError as exc:
            raise LocalError(f"snapshot field safe_quorum: {exc}") from None
        self._lazy_reports()

    def _dump_outbox(self) -> list[list[Any]]:
        return [[p, to] for p, to in self._outbox]

    def _dump_future(self) -> list[Any]:
        return [PACKET.dump(p) for p in self._future]

    def _dump_last_commit(self) -> Any:
        return None if self._last_commit is None else check.packet_data(self._last_commit)

    def _epoch_part(self) -> Epoch:
        return self._epoch

    def _changes_part(self) -> Changes:
        return self._changes

    def _retries_part(self) -> Retries:
        return self._retries

    persistent = (
        Field.custom("inner_protocol", lambda g: g.inner_protocol, _load_protocol),
        Field("reliable", kind=FLAG),
        Field.custom("retry", lambda g: g.retry, _load_retry),
        Field("stability_every", kind=POSITIVE),
        Field("incarnation", kind=COUNTER),
        Field("contacts", kind=check.MEMBERS),
        *lift(_epoch_part, Epoch.persistent),
        Field("safe", kind=FLAG, check=_safe_fits, absent=False),
        Field.custom("safe_quorum", lambda g: g.safe_quorum, _load_safe_quorum, absent="all"),
        *lift(_changes_part, Changes.persistent),
        Field.custom("outbox", _dump_outbox, _load_outbox),
        Field.custom("future", _dump_future, _load_future),
        Field("left", "_left", FLAG),
        Field("gone", "_gone", FLAG),
        Field.custom("last_commit", _dump_last_commit, _load_last_commit),
        Field("now", "_now", TIME.optional()),
        *lift(_retries_part, Retries.persistent),
    )


def control(to: int, packet: object) -> Transmit:
    """A control packet to ``to`` (it carries no application message)."""
    return Transmit(to, packet, None)


def _ballot(p: Prepare | Accept) -> Ballot:
    """The ballot a Prepare or an Accept names; RemoteError unless its coordinator sent it."""
    if p.coord != p.sender:
        what = "a Prepare" if isinstance(p, Prepare) else "an Accept"
        raise RemoteError(f"{what} comes from its coordinator")
    return (check.counter(p.attempt, "attempt"), p.coord)


__all__ = ["Group", "control"]
