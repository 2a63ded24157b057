"""The flush: how the members of a view agree on the next one (a sans-IO state machine).

Rules, in words (``MEMBER`` and ``COORDINATOR`` below are the same rules as data):

- A flush is a ballot-numbered agreement on the next view, as in Paxos. A ballot is
  (attempt, coordinator), compared as a pair, so two coordinators never run the same
  ballot and every ballot is above or below every other.
- As a member (``Freeze``) a process is RUNNING: it delivers and sends in its view.
  A Prepare or an Accept whose ballot is at least the one it promised freezes it: it
  promises that ballot (PROMISED) or accepts that ballot's value (ACCEPTED), and
  answers with a Promise or an Accepted. A lower ballot gets a Nack naming the
  promised one and changes nothing. A frozen member stays frozen until the view ends;
  a value it accepted stays accepted (and is reported in its later promises) until then.
- As coordinator (``Round``) a process is IDLE until it opens a ballot (OPEN), which
  it does only as the lowest member it does not suspect (or while a ballot of its
  own runs, even once a withdrawn suspicion made a lower member the coordinator),
  when the view must change and no ballot it runs can still finish (the quorum or the
  coordinator that outbid it is suspected). PREPARE counts the Promises of that
  ballot; when the quorum (the members of the view that stay in the next one,
  joiners aside) has promised (ALL_PROMISED) it
  chooses the value (``choose``) and asks for it in Accepts: ACCEPT counts the
  Accepteds; when the quorum has accepted (ALL_ACCEPTED) it commits the value. A Nack
  of a higher ballot is noted in either phase (``outbid``); a new ballot may replace
  the running one in either phase. The coordinator promises and accepts its own ballot
  as a member does.
- The view ends at a Commit, whoever sent it and whatever the phase: the flush log is
  delivered, the next view installed, and its flush starts afresh (RUNNING, IDLE).
- Sends (the rule the façade applies): a message goes on the wire only while its
  sender is RUNNING in a view whose application state it holds, and it is sent in
  that view. A message issued before that (while frozen, or by a joiner that waits
  for the state) waits in the sender's queue, keeping the id it was given, for the
  first view in which the sender runs with the state: the sender's Promise counts
  only what it sent, so the next view numbers the queued messages after that. A
  member excluded meanwhile keeps its queue as it rejoins (its Join counts only what
  it sent); only a member that left drops it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

import attrs

from mailroom.core.errors import LocalError
from mailroom.core.persist import COUNTER, Field, lift, snap_bool, snap_counter, snap_list
from mailroom.protocols.membership.packets import (
    NO_BALLOT,
    Accept,
    Accepted,
    Ballot,
    Entry,
    Nack,
    NextView,
    Prepare,
    Promise,
    Query,
)
from mailroom.protocols.membership.values import (
    BALLOT,
    MEMBER_SET,
    MEMBERS,
    NEXT_VIEW,
    next_view_of,
    packet_data,
    packet_from,
    snap_next_view,
)


class Freeze(enum.Enum):
    """A member's side of the flush."""

    RUNNING = "running"
    PROMISED = "promised"
    ACCEPTED = "accepted"


class Round(enum.Enum):
    """A coordinator's side of the flush (the values are what snapshots write)."""

    IDLE = ""
    PREPARE = "prepare"
    ACCEPT = "accept"


class Milestone(enum.Enum):
    """What moves a coordinator besides the packets it receives."""

    OPEN = "it opens a ballot"
    ALL_PROMISED = "the quorum promised its ballot"
    ALL_ACCEPTED = "the quorum accepted its ballot's value"


RUNNING, PROMISED, ACCEPTED = Freeze.RUNNING, Freeze.PROMISED, Freeze.ACCEPTED
IDLE, PREPARE, ACCEPT = Round.IDLE, Round.PREPARE, Round.ACCEPT

#: A member, on a Prepare or an Accept of a ballot at least the one it promised.
MEMBER: dict[Freeze, dict[type, Freeze]] = {
    RUNNING: {Prepare: PROMISED, Accept: ACCEPTED},
    PROMISED: {Prepare: PROMISED, Accept: ACCEPTED},
    ACCEPTED: {Prepare: ACCEPTED, Accept: ACCEPTED},
}

#: A coordinator: the events each phase takes (others are ignored) and where they lead.
COORDINATOR: dict[Round, dict[type | Milestone, Round]] = {
    IDLE: {Milestone.OPEN: PREPARE},
    PREPARE: {
        Milestone.OPEN: PREPARE,
        Promise: PREPARE,
        Nack: PREPARE,
        Milestone.ALL_PROMISED: ACCEPT,
    },
    ACCEPT: {Milestone.OPEN: PREPARE, Accepted: ACCEPT, Nack: ACCEPT, Milestone.ALL_ACCEPTED: IDLE},
}


@attrs.define
class MemberFlush:
    """A member's side of the flush of one view (``MEMBER``): whether it froze, the
    highest ballot it promised and the value it accepted. It answers a ballot with
    None (promised or accepted) or the higher ballot to name in a Nack; it never
    calls back into the group that owns it."""

    n: int
    freeze: Freeze = RUNNING
    promised: Ballot = NO_BALLOT
    accepted: tuple[Ballot, NextView] | None = None

    @property
    def frozen(self) -> bool:
        """A view change is under way: this process delivers and sends nothing of the view."""
        return self.freeze is not RUNNING

    def _freeze_on(self, event: type) -> None:
        """The member moves on ``event``; LocalError if its state takes none such."""
        moves = MEMBER[self.freeze]
        if event not in moves:
            raise LocalError(f"a member in state {self.freeze.name} takes no {_named(event)}")
        self.freeze = moves[event]

    def promise(self, ballot: Ballot) -> Ballot | None:
        """Promise ``ballot`` (None), or the higher ballot already promised (for a Nack)."""
        if ballot < self.promised:
            return self.promised
        self.promised = ballot
        self._freeze_on(Prepare)
        return None

    def accept(self, ballot: Ballot, value: NextView) -> Ballot | None:
        """Accept ``ballot``'s value (None), or the higher ballot already promised."""
        if ballot < self.promised:
            return self.promised
        self.promised = ballot
        self.accepted = (ballot, value)
        self._freeze_on(Accept)
        return None

    def accepted_data(self) -> list[Any] | None:
        """The accepted value as a Promise reports it: the ballot's attempt and coord, then
        the value's data (``NextView.data()``)."""
        if self.accepted is None:
            return None
        ballot, value = self.accepted
        return [*ballot, *value.data()]

    def repeat(self, view: int, pid: int) -> list[tuple[int, object]] | None:
        """What a frozen member ``pid`` sends again at a retry: a Query to the coordinator
        whose ballot it promised (None: it waits for nobody)."""
        if self.frozen and self.promised[1] not in (-1, pid):
            return [(self.promised[1], Query(view, pid))]
        return None

    # -- snapshots -------------------------------------------------------------------------------
    def _load_flushing(self, data: object) -> None:
        self.freeze = PROMISED if snap_bool(data, "flushing") else RUNNING

    def _load_accepted(self, data: object) -> None:
        if data is None:
            return
        row = snap_list(data, "accepted", 7)
        if type(row[1]) is not int or not 0 <= row[1] < self.n:
            raise LocalError("snapshot field accepted names no coordinator")
        if self.freeze is RUNNING:
            raise LocalError("snapshot accepted a value outside a flush")
        ballot = (snap_counter(row[0], "accepted"), row[1])
        self.accepted = (ballot, snap_next_view(row[2:], self.n, "accepted"))
        self.freeze = ACCEPTED

    persistent = (
        Field.custom("flushing", lambda f: f.frozen, _load_flushing),
        Field("promised", kind=BALLOT),
        Field.custom("accepted", accepted_data, _load_accepted),
    )


@attrs.define
class CoordinatorFlush:
    """A coordinator's side of the flush of one view at process ``pid`` (of ``n``)
    (``COORDINATOR``): its ballot, what it proposes, the promises and acceptances it
    counted. It returns the packets to send (a Prepare, an Accept) and whether the
    quorum it is given has answered; it never calls back into the group."""

    pid: int
    n: int
    round: Round = IDLE
    attempt: int = 0
    #: the members the running ballot proposes for the next view
    proposal: tuple[int, ...] = ()
    promises: dict[int, Promise] = attrs.Factory(dict)
    accepts: set[int] = attrs.Factory(set)
    value: NextView | None = None
    #: the highest ballot a member said it promised instead of this coordinator's
    outbid: Ballot = NO_BALLOT

    @property
    def ballot(self) -> Ballot:
        """This coordinator's ballot (the running one, or the last one it ran)."""
        return (self.attempt, self.pid)

    @property
    def running(self) -> bool:
        """A ballot of this coordinator runs (its phase is not IDLE)."""
        return self.round is not IDLE

    def takes(self, event: type | Milestone) -> bool:
        """The coordinator's phase takes ``event`` (a packet class or a Milestone)."""
        return event in COORDINATOR[self.round]

    def _step(self, event: type | Milestone) -> None:
        """The coordinator moves on ``event``; LocalError if its phase takes none such."""
        moves = COORDINATOR[self.round]
        if event not in moves:
            raise LocalError(f"a coordinator in phase {self.round.name} takes no {_named(event)}")
        self.round = moves[event]

    def can_finish(self, quorum: set[int], suspects: set[int]) -> bool:
        """A ballot runs and can still finish: nobody it waits for is suspected, nor the
        coordinator that outbid it."""
        return self.round is not IDLE and not quorum & suspects and self.outbid[1] not in suspects

    def open(self, view: int, proposal: tuple[int, ...], promised: Ballot = NO_BALLOT) -> Prepare:
        """Open a ballot above every one seen (``promised``: the highest this process
        promised as a member), proposing ``proposal`` as the next view."""
        self.attempt = max(self.attempt, promised[0], self.outbid[0]) + 1
        self.proposal = proposal
        self.promises = {}
        self.accepts = set()
        self.value = None
        self._step(Milestone.OPEN)
        return Prepare(view, self.pid, *self.ballot, proposal)

    def count_promise(self, p: Promise, quorum: set[int]) -> bool:
        """Count ``p`` if it answers the running ballot; True once the quorum promised."""
        if not self.takes(Promise) or (p.attempt, p.coord) != self.ballot:
            return False
        self.promises[p.sender] = p
        return quorum <= self.promises.keys()

    def propose(self, view: int, value: NextView) -> Accept:
        """The quorum promised: ask it to accept ``value``."""
        self._step(Milestone.ALL_PROMISED)
        self.value = value
        return value.accept(view, self.ballot)

    def count_accepted(self, p: Accepted, quorum: set[int]) -> bool:
        """Count ``p`` if it answers the running ballot; True once the quorum accepted
        (the value is decided: commit it)."""
        if not self.takes(Accepted) or (p.attempt, p.coord) != self.ballot:
            return False
        self.accepts.add(p.sender)
        if not quorum <= self.accepts:
            return False
        self._step(Milestone.ALL_ACCEPTED)
        return True

    def count_nack(self, ballot: Ballot) -> bool:
        """Note a member's higher promised ballot; True if it outbids this coordinator anew."""
        if not self.takes(Nack) or ballot <= self.ballot or ballot <= self.outbid:
            return False
        self.outbid = ballot
        return True

    def repeat(self, view: int, quorum: set[int]) -> list[tuple[int, object]] | None:
        """What the running ballot sends again at a retry (None: none runs): its Prepare
        or Accept to the members of ``quorum`` that have not answered it."""
        if self.round is PREPARE:
            prepare = Prepare(view, self.pid, *self.ballot, self.proposal)
            return [(m, prepare) for m in sorted(quorum - set(self.promises))]
        if self.round is ACCEPT and self.value is not None:
            accept = self.value.accept(view, self.ballot)
            return [(m, accept) for m in sorted(quorum - self.accepts)]
        return None

    # -- snapshots -------------------------------------------------------------------------------
    def load_round(self, data: object) -> None:
        """The phase a snapshot wrote (``phase``); LocalError if it is none."""
        if data not in [r.value for r in Round]:
            raise LocalError(f"snapshot field phase holds {data!r}")
        self.round = Round(data)

    def _load_promises(self, data: object) -> None:
        for item in snap_list(data, "promises"):
            p = packet_from(item, "promises", Promise)
            self.promises[p.sender] = p

    persistent = (
        Field("attempt", kind=COUNTER),
        Field("outbid", kind=BALLOT),
        Field("proposal", kind=MEMBERS),
        Field.custom("phase", lambda f: f.round.value, load_round),
        Field.custom(
            "promises",
            lambda f: [packet_data(p) for _, p in sorted(f.promises.items())],
            _load_promises,
        ),
        Field("accepts", kind=MEMBER_SET),
        Field("value", kind=NEXT_VIEW),
    )


@attrs.define
class Flush:
    """The flush of one view at process ``pid`` (of ``n``): its two parts, the member's
    (``member``) and the coordinator's (``coordinator``); a new one starts with every
    view. The group calls each part and combines their answers."""

    pid: int
    n: int
    member: MemberFlush = attrs.field()
    coordinator: CoordinatorFlush = attrs.field()

    @member.default
    def _new_member(self) -> MemberFlush:
        return MemberFlush(self.n)

    @coordinator.default
    def _new_coordinator(self) -> CoordinatorFlush:
        return CoordinatorFlush(self.pid, self.n)

    @property
    def frozen(self) -> bool:
        """A view change is under way: this process delivers and sends nothing of the view."""
        return self.member.frozen

    def repeat(self, view: int, quorum: set[int]) -> list[tuple[int, object]] | None:
        """What the flush sends again when the retry timer fires (None: nothing of the
        flush is under way): the running ballot's Prepare or Accept to the members that
        have not answered it, or a frozen member's Query to the coordinator it promised."""
        again = self.coordinator.repeat(view, quorum)
        return again if again is not None else self.member.repeat(view, self.pid)

    # -- snapshots: the two parts' tables, in the order snapshots have always had ------------
    def _load_phase(self, data: object) -> None:
        self.coordinator.load_round(data)
        if self.coordinator.running and not self.member.frozen:
            raise LocalError("snapshot coordinates a flush it did not promise")

    #: the member's fields, then the coordinator's, its phase checked against the member's
    persistent = (
        *lift(lambda f: f.member, MemberFlush.persistent),
        *lift(lambda f: f.coordinator, CoordinatorFlush.persistent[:3]),  # attempt..proposal
        Field.custom("phase", lambda f: f.coordinator.round.value, _load_phase),
        *lift(lambda f: f.coordinator, CoordinatorFlush.persistent[4:]),  # promises..value
    )


def _named(event: type | Milestone) -> str:
    return event.name if isinstance(event, Milestone) else event.__name__


def choose(
    promises: Mapping[int, Promise],
    proposal: tuple[int, ...],
    joiners: Mapping[int, tuple[int, int]],
    member: Mapping[int, tuple[int, int]],
    n: int,
) -> NextView:
    """The value a coordinator asks its quorum to accept (Paxos: the value of the highest
    ballot any promise reports accepted, else a new one).

    A new value: the ``proposal``'s members; each promiser's base is the number of
    messages it sent before the next view, a joiner's the number its Join named, a
    member outside the quorum (only a variant's quorum leaves one out) keeps its base;
    joiners and promisers without the application state need it; the log is every
    promiser's log (what it delivered in the view and does not know to be stable), then
    every promiser's own messages that nobody delivered, each message once.
    ``member[pid]`` is a current member's (base, incarnation) in the view
    (``InstalledView.known()``).
    """
    best: tuple[Ballot, list[Any]] | None = None
    for pr in promises.values():
        if pr.accepted is not None:
            b = (pr.accepted[0], pr.accepted[1])
            if best is None or b > best[0]:
                best = (b, pr.accepted[2:])
    if best is not None:
        return next_view_of(best[1], n)
    bases, incs, needs = [], [], []
    for m in proposal:
        if m in joiners and m not in promises:
            inc, sent = joiners[m]
            bases.append(sent)
            incs.append(inc)
            needs.append(m)
            continue
        base, inc = member[m]
        promised = promises.get(m)
        bases.append(base if promised is None else promised.sent)
        incs.append(inc)
        if promised is not None and not promised.has_state:
            needs.append(m)
    log: list[Entry] = []
    seen: set[tuple[int, int]] = set()
    for part in ("log", "own"):
        for m in sorted(promises):
            for e in getattr(promises[m], part):
                if (e[0], e[1]) not in seen:
                    seen.add((e[0], e[1]))
                    log.append(e)
    return NextView(proposal, tuple(bases), tuple(incs), tuple(needs), log)
