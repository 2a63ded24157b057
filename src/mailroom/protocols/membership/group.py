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

``Group`` is the façade the host sees. Below it, ``member.Member`` holds a member's
state and its everyday traffic and ``flushing.Flushing`` drives the flush and
installs views; the parts they hold are the installed view (``view``), the flush's
state machine (``flush``), state transfer (``transfer``), the wanted changes
(``changes``) and the epoch that holds what lives for one view (``epoch``).
docs/membership-guarantees.md, "Inside Group", has the map.

Extension points (``mailroom.core.hooks``; the harness's known-buggy variants in
``mailroom.testing.membership`` override them and read ``installed``):
``flush_quorum`` (whose promises a flush waits for), ``recover_flush_log`` (what a
member delivers of the decided flush log), ``safe_holds`` (how far each member holds)
and ``safe_needed`` (how many holds a safe delivery waits for).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from mailroom.core.actions import Action
from mailroom.core.endpoint import capabilities
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId, Payload, check_payload
from mailroom.core.pending import Pending
from mailroom.core.persist import COUNTER, FLAG, POSITIVE, TIME, Field, snap_list, snap_time
from mailroom.core.wire import is_packet
from mailroom.protocols.membership import values as check
from mailroom.protocols.membership.changes import Changes
from mailroom.protocols.membership.epoch import Epoch, Retries, lift
from mailroom.protocols.membership.flushing import Flushing
from mailroom.protocols.membership.member import control
from mailroom.protocols.membership.packets import Commit, Leave, Suspect
from mailroom.protocols.membership.safe import check_safe_quorum
from mailroom.protocols.membership.status import GroupStatus
from mailroom.protocols.membership.values import PACKET


class Group(Flushing):
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
            flush=flush.freeze,
            round=flush.round,
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
        self._check_dest(pid)
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
            self.safe_quorum = check_safe_quorum(data, self.safe)
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


__all__ = ["Group"]
