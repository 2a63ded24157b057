"""The flush and the views it installs, as a member drives them (``flush.py`` is the
machine: its phases, transitions and rules).

As a member, a process answers Prepare and Accept (promising or accepting freezes it)
and applies a Commit: it delivers what it lacks of the flush log, then installs the
next view (a new epoch) or learns it was excluded. As coordinator it opens a ballot
when the view must change, counts the promises, proposes the value, counts the
acceptances and commits. A joiner that needs the state installs the view at once and
tells its application when the state arrives.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from mailroom.core.actions import Action, Excluded, Transmit, View, ViewChange
from mailroom.core.errors import RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import MessageId
from mailroom.protocols.membership import values as check
from mailroom.protocols.membership.changes import Changes, has_majority
from mailroom.protocols.membership.epoch import Epoch
from mailroom.protocols.membership.flush import IDLE, choose
from mailroom.protocols.membership.member import Member, control
from mailroom.protocols.membership.packets import (
    Accept,
    Accepted,
    Commit,
    Entry,
    Nack,
    Prepare,
    Promise,
    Query,
    StateTransfer,
)
from mailroom.protocols.membership.transfer import Transfer
from mailroom.protocols.membership.values import Ballot, NextView


class Flushing(Member):
    """A member that takes part in flushes, coordinates them and installs their views."""

    # -- the flush, as a member ---------------------------------------------------------
    def _on_prepare(self, p: Prepare) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = _ballot(p)
        check.members(p.members, self.n)
        higher = self._epoch.flush.promise(ballot)
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
            epoch.flush.accepted_data(),
        )

    def _on_accept(self, p: Accept) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self._elsewhere(p, p.view, p.sender)
        ballot = _ballot(p)
        value = check.next_view(p.members, p.bases, p.incarnations, p.needs, p.log, self.n)
        higher = self._epoch.flush.accept(ballot, value)
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
        proposal = self._epoch.flush.proposal
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
        return self.coordinator == self.pid or self._epoch.flush.round is not IDLE

    def _coordinate(self) -> list[Action]:
        """Open a ballot if this process leads, the view must change and no ballot it
        runs can still finish (flush.py)."""
        installed, flush = self._epoch.installed, self._epoch.flush
        if installed is None or not self._leads():
            return []
        found = self._changes.next_members(installed.view)
        if found is None or flush.can_finish(self.flush_quorum(), self._changes.suspects):
            return []
        survivors, proposal = found
        if not has_majority(self._changes.voters(installed.view, survivors), installed.view):
            return []  # primary partition: a minority does not install views
        prepare = flush.open(installed.view.id, proposal)
        actions: list[Action] = [control(m, prepare) for m in self.flush_quorum() if m != self.pid]
        flush.promise(flush.ballot)  # its own ballot is above every one it promised
        self._arm()
        return actions + self._on_promise(self._promise(flush.ballot))

    def _on_promise(self, p: Promise) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        check.counter(p.sent, "sent")
        if type(p.has_state) is not bool:
            raise RemoteError("has_state must be a bool")
        check.entries(p.log, self.n)
        check.entries(p.own, self.n)
        check.accepted(p.accepted, self.n)
        if not self._epoch.flush.count_promise(p, self.flush_quorum()):
            return []
        installed, flush = self._epoch.installed, self._epoch.flush
        assert installed is not None
        value = choose(flush.promises, flush.proposal, self._changes.joiners, self._member, self.n)
        accept = flush.propose(installed.view.id, value)
        actions: list[Action] = [control(m, accept) for m in self.flush_quorum() if m != self.pid]
        reply = self._on_accept(accept)  # its own Accept: an Accepted, or a Nack if outbid
        own = reply[0].packet if len(reply) == 1 and isinstance(reply[0], Transmit) else None
        return actions + self._on_accepted(own) if isinstance(own, Accepted) else actions

    def _member(self, pid: int) -> tuple[int, int]:
        installed = self._epoch.installed
        assert installed is not None
        rank = installed.view.rank(pid)
        return installed.bases[rank], installed.incarnations[rank]

    def _on_nack(self, p: Nack) -> list[Action]:
        """A member promised a higher ballot: outbid it if its coordinator is suspected
        (else wait: that coordinator's flush excludes or includes this one)."""
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        ballot = (check.counter(p.attempt, "attempt"), p.coord)
        check.sender(p.coord, self.n)
        return self._coordinate() if self._epoch.flush.count_nack(ballot) else []

    def _on_accepted(self, p: Accepted) -> list[Action]:
        if not self._current(p.view, p.sender):
            return self.notice(p.sender, p.view)  # stale: it may not know it is out
        installed, flush = self._epoch.installed, self._epoch.flush
        if not flush.count_accepted(p, self.flush_quorum()):
            return []
        assert installed is not None and flush.value is not None
        commit = flush.value.commit(installed.view.id, self.pid)
        targets = (set(installed.view.members) | set(flush.value.members)) - {self.pid}
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
        actions = self._ask_holds()  # safe delivery
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

    handlers: ClassVar[dict[type, Callable[[Any, Any], list[Action]]]] = {
        **Member.handlers,
        Prepare: _on_prepare,
        Promise: _on_promise,
        Accept: _on_accept,
        Accepted: _on_accepted,
        Nack: _on_nack,
        Commit: _on_commit,
        StateTransfer: _on_state,
    }


def _ballot(p: Prepare | Accept) -> Ballot:
    """The ballot a Prepare or an Accept names; RemoteError unless its coordinator sent it."""
    if p.coord != p.sender:
        what = "a Prepare" if isinstance(p, Prepare) else "an Accept"
        raise RemoteError(f"{what} comes from its coordinator")
    return (check.counter(p.attempt, "attempt"), p.coord)
