"""A group member's state and its everyday traffic (the base of ``Group``).

A member holds its settings and identity, the epoch of its view (the installed view,
its flush and its state transfer: ``epoch.py``), the view changes it knows are wanted
(``changes.py``), what it queued or held, and its retry timer. This class handles the
packets of its view's ordering protocol, packets of other views (it holds later ones
and asks their sender, and tells a process that is behind that it was excluded),
and requests to change the view (Join, Leave, Suspect, Query), which go to the
coordinator. ``flushing.Flushing`` adds the flush and the installation of views;
``group.Group`` is the façade the host sees.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable
from typing import Any, ClassVar

from mailroom.core.actions import Action, Transmit, View
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import Payload
from mailroom.core.registry import entry
from mailroom.core.stack import Stack
from mailroom.protocols.membership import values as check
from mailroom.protocols.membership.changes import Changes
from mailroom.protocols.membership.epoch import Epoch, Retries
from mailroom.protocols.membership.packets import (
    Commit,
    GroupData,
    Join,
    Leave,
    Query,
    Stability,
    Suspect,
)
from mailroom.protocols.membership.safe import SafeDelivery, check_safe_quorum, majority
from mailroom.protocols.membership.transfer import Transfer
from mailroom.protocols.membership.view import InstalledView
from mailroom.protocols.reliable import Reliable

#: Packets of a later view kept until that view is installed (the rest are dropped).
MAX_FUTURE = 4096


class Member(SafeDelivery, EndpointBase):
    """A member's parts, the traffic of its view and of other views, requests to change it."""

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
        self.safe_quorum = check_safe_quorum(safe_quorum, self.safe)
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
            self._check_dest(c)
        self._one_step = False  # receiving a batch (safe.py)
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
            first = tuple(sorted({self._check_dest(m) for m in members}))
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

    def _lazy_reports(self) -> None:
        """Mark the installed view's reports that no delivery waits on (``quorum``)."""
        installed = self._epoch.installed
        if installed is not None:
            size = len(installed.view.members)
            installed.quorum(majority(size) if self.safe_quorum == "majority" else None)

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
        if self.view is None or installed is None:
            return None
        joiners, suspects = self._changes.joiners, self._changes.suspects
        alive = [
            m
            for m in self.view.members
            if m not in suspects
            and not (m in joiners and joiners[m][0] > installed.incarnation_of(m))
        ]
        return alive[0] if alive else None

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
        out = installed.translate(actions, self.mode == "broadcast", every, not self._one_step)
        return self._handed(out)

    # -- receiving in the view -------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        handler = self.handlers.get(type(packet))
        if handler is None:
            raise RemoteError(f"Group got a {type(packet).__name__}, not a group packet")
        return handler(self, packet)

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
            found = tuple(sorted({self._check_dest(c) for c in contacts} - {self.pid}))
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

    def _coordinate(self) -> list[Action]:
        """Open a ballot if the view must change (``Flushing`` does)."""
        raise NotImplementedError

    #: packet class -> the method that handles it (``Flushing`` adds the flush's)
    handlers: ClassVar[dict[type, Callable[[Any, Any], list[Action]]]] = {
        GroupData: _on_data,
        Stability: _on_stability,
        Join: _on_join,
        Leave: _on_leave,
        Suspect: _on_suspect,
        Query: _on_query,
    }

    # -- retries ---------------------------------------------------------------------------
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


def control(to: int, packet: object) -> Transmit:
    """A control packet to ``to`` (it carries no application message)."""
    return Transmit(to, packet, None)
