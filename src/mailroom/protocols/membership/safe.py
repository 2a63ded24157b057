"""Safe (uniform) delivery: what a member holds and has not handed to its application yet.

Under ``Group(..., safe=True)`` the view's ordering protocol delivers into a queue
(``Held``), in its own delivery order, and the application gets the head of the queue
once every member of the view has announced that it *holds* the message. A member
holds a message once its ordering protocol delivered it: from then on the message is
in the member's flush log, or every member is known to hold it, so whichever members
survive the view's flush all deliver it (they hand over what they hold before the
next view, then what they lack of the flush log). So whatever any member delivered,
every member that goes on into the next view delivers too, whoever crashes or is
excluded meanwhile (uniform agreement).

With ``safe_quorum="majority"`` a message is handed over once a majority of the view
holds it, as Raft commits an entry: a next view needs a majority of this one among
its survivors (primary partition), every two majorities share a member, and every
survivor hands over its log in the flush, so the message still reaches every member
that goes on. A member that is slow or cut off then delays nobody (with "all" every
member waits for it until it is excluded), and the member that sent a message to the
sequencer delivers it a message delay sooner (the order from the sequencer, which
holds what it ordered, makes two holders of three).

How far a member holds is a vector: per rank r of the view, the messages 1..low[r]
of that rank it delivered (``InstalledView.low``). Members announce it in
``Stability`` reports, one after each step that advanced it (not one per message),
to every other member; a member that still waits for a message after a retry
period asks the members whose announcement does not cover it (``Query``), and they
answer with their report, so a lost report only delays. A member hands nothing over
while it is frozen in a flush: the Commit releases everything it holds.

``Held`` is the queue (part of the installed view's snapshot); ``SafeDelivery`` is
the member's side, a part ``Group`` owns: when to release (after each step; a batch
received is one step: one release and one report at its end), and the retry that
asks again. The rules a variant may change (``safe_holds``, ``safe_needed``) are
``Group``'s hooks; the group hands their answers to the part.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.actions import Action, Deliver, Stable, Transmit
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, TaggedMessage, check_payload
from mailroom.core.persist import snap_counter, snap_list
from mailroom.protocols.membership.packets import Query

if TYPE_CHECKING:
    from mailroom.protocols.membership.view import InstalledView

#: A held action and what it waits for: (rank, inner seq, action); rank -1 waits for
#: nothing but the actions ahead of it (a ``Stable`` report).
Item = tuple[int, int, Action]


@attrs.define
class Held:
    """The deliveries a member holds and has not handed over, with the ``Stable``
    reports that came after them, in the order its ordering protocol gave them."""

    items: deque[Item] = attrs.Factory(deque)
    #: how many of ``items`` are deliveries (``Group.status()`` shows it)
    messages: int = 0

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, rank: int, seq: int, action: Action) -> None:
        """Hold ``action``: a delivery of inner message (``rank``, ``seq``), or (rank -1)
        a report that waits for the deliveries ahead of it."""
        self.items.append((rank, seq, action))
        if rank >= 0:
            self.messages += 1

    def head(self) -> tuple[int, int] | None:
        """The (rank, inner seq) of the first held delivery, or None."""
        for rank, seq, _ in self.items:
            if rank >= 0:
                return rank, seq
        return None

    def seqs(self, rank: int) -> set[int]:
        """The inner seqs of the held deliveries of ``rank``."""
        return {seq for r, seq, _ in self.items if r == rank}

    def release(self, holds: Sequence[Sequence[int]], needed: int | None = None) -> list[Action]:
        """Hand over, from the head, every delivery that ``needed`` of ``holds`` (all of
        them if None) cover (each holds messages 1..hold[r] of each rank r), and the
        reports between them."""
        out: list[Action] = []
        items = self.items
        short = None if needed is None else len(holds) - needed  # how many may lack it
        while items:
            rank, seq, action = items[0]
            if rank >= 0:
                if short is None:
                    if any(hold[rank] < seq for hold in holds):
                        break
                elif sum(hold[rank] < seq for hold in holds) > short:
                    break
                self.messages -= 1
            items.popleft()
            out.append(action)
        return out

    def release_all(self) -> list[Action]:
        """Hand over everything held (at the Commit that ends the view)."""
        out = [action for _, _, action in self.items]
        self.items.clear()
        self.messages = 0
        return out

    # -- snapshots -------------------------------------------------------------------------
    def rows(self) -> list[list[Any]]:
        """As snapshot data: ["m", origin, seq, payload] (with the tag appended for a
        tagged delivery: "t") or ["s", [[origin, seq], ...]], in order."""
        return [_row(action) for _, _, action in self.items]

    @classmethod
    def loading(cls, data: object, inner_id: Any) -> Held:
        """The rows ``rows()`` wrote; ``inner_id(MessageId)`` names a message of the view
        as (rank, inner seq), or raises LocalError."""
        held = cls()
        for row in snap_list(data, "held"):
            kind = snap_list(row, "held")[0] if row else None
            if kind == "s":
                _, ids = snap_list(row, "held", 2)
                stable = tuple(_message_id(i) for i in snap_list(ids, "held"))
                held.add(-1, 0, Stable(stable))
                continue
            if kind not in ("m", "t"):
                raise LocalError(f"snapshot field held holds {row!r}")
            parts = snap_list(row, "held", 4 if kind == "m" else 5)
            mid = _message_id(parts[1:3])
            check_payload(parts[3])
            if kind == "m":
                message = Message(mid, mid.origin, parts[3])
            else:
                tag = VectorClock([snap_counter(v, "held") for v in snap_list(parts[4], "held")])
                message = TaggedMessage(mid, mid.origin, parts[3], tag)
            inner = inner_id(mid)
            if inner.seq < 1:
                raise LocalError(f"snapshot field held names {mid}, of an earlier view")
            held.add(inner.origin, inner.seq, Deliver(message))
        return held


@attrs.define
class SafeDelivery:
    """A member's side of safe delivery: a part its ``Group`` owns, with its own state.

    It holds how holders are counted (``quorum``) and whether a batch of packets is
    being received (``batching``: one release and one report at its end, not one per
    packet). It reads nothing of the group: the group hands it the installed view,
    whether the flush froze it, and what its hooks (``safe_holds``, ``safe_needed``)
    say, and it returns the actions to take."""

    #: "all": a message is handed over once every member holds it; "majority": once
    #: a majority of the view does (every majority that can install a next view
    #: includes one of them, so the flush recovers it)
    quorum: str = "all"
    batching: bool = False
    #: the (rank, inner seq) of the first held delivery at the last retry (not in
    #: snapshots; forgotten when a view is installed)
    head: tuple[int, int] | None = None

    def new_view(self) -> None:
        """A view was installed: no held delivery of it has waited a retry yet."""
        self.head = None

    def needed(self, installed: InstalledView | None) -> int | None:
        """How many holds a held delivery waits for: None for every member's ("all"),
        else a majority of ``installed``'s view."""
        if self.quorum == "all" or installed is None:
            return None
        return majority(len(installed.view.members))

    def lazy_needed(self, size: int) -> int | None:
        """What ``InstalledView.quorum`` is told of a view of ``size``: no delivery waits on
        the reports beyond a majority under "majority" (None: every report counts)."""
        return majority(size) if self.quorum == "majority" else None

    def may_release(self, installed: InstalledView | None, frozen: bool) -> bool:
        """Held deliveries may be handed over now: some are held, the flush has not frozen
        the view (the Commit hands them over) and no batch is being received."""
        return installed is not None and bool(installed.held) and not frozen and not self.batching

    def release(
        self, installed: InstalledView, holds: list[Sequence[int]], needed: int | None
    ) -> list[Action]:
        """The held deliveries of ``installed`` that ``needed`` of ``holds`` (all if None)
        cover, from the head (call ``may_release`` first)."""
        assert installed.held is not None
        return installed.held.release(holds, needed)

    def ask_holds(self, installed: InstalledView | None, frozen: bool) -> list[Action]:
        """At a retry: if the first held delivery was first at the last retry too, a Query
        to each member whose hold does not cover it (its report was lost)."""
        held = None if installed is None or frozen else installed.held
        head = held.head() if held else None
        if installed is None or head is None:
            return []
        again, self.head = head == self.head, head
        if not again:
            return []
        rank, seq = head
        query = Query(installed.view.id, installed.pid)
        members = installed.view.members
        return [Transmit(m, query, None) for m in members if installed.hold_of(m)[rank] < seq]

    def start_batch(self) -> None:
        """A batch of packets is being received: release nothing until ``end_batch``."""
        self.batching = True

    def end_batch(self) -> None:
        """The batch is over: the group releases and reports once, now."""
        self.batching = False


#: the ways a safe group may count the members that hold a message (``Group(safe_quorum=)``)
SAFE_QUORUMS = ("all", "majority")


def check_safe_quorum(value: object, safe: bool) -> str:
    """``value`` as a ``safe_quorum`` setting; LocalError if it is none, or if it asks
    for a majority without safe delivery."""
    if value not in SAFE_QUORUMS:
        raise LocalError(f"safe_quorum must be 'all' or 'majority', got {value!r}")
    if value == "majority" and not safe:
        raise LocalError(
            "safe_quorum='majority' counts the holders of safe delivery: pass safe=True too"
        )
    return str(value)


def majority(size: int) -> int:
    """The fewest members of a view of ``size`` that are more than half of it."""
    return size // 2 + 1


def covered(holds: Iterable[Sequence[int]]) -> list[int]:
    """Per rank, the messages every one of ``holds`` covers (their entrywise minimum)."""
    return list(map(min, zip(*holds, strict=True)))


def _row(action: Action) -> list[Any]:
    if isinstance(action, Stable):
        return ["s", [[m.origin, m.seq] for m in action.messages]]
    assert isinstance(action, Deliver)
    m = action.message
    if isinstance(m, TaggedMessage):
        return ["t", m.id.origin, m.id.seq, m.payload, list(m.tag.entries)]
    return ["m", m.id.origin, m.id.seq, m.payload]


def _message_id(data: object) -> MessageId:
    origin, seq = snap_list(data, "held", 2)
    return MessageId(snap_counter(origin, "held"), snap_counter(seq, "held"))
