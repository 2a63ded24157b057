"""The packets of group membership: data inside a view, and the flush's control packets.

Every packet names the view it belongs to (``view``: the id of the sender's current
view) and its ``sender``'s identity. A flush is a ballot-numbered agreement on the
next view: a ballot is (``attempt``, ``coord``), compared as a pair (``Ballot``); the
value it agrees on is a ``NextView``, carried by Accept and Commit (both below).
``values.py`` checks that what arrives is well-formed.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, ClassVar

import attrs

from mailroom.core.messages import MessageId
from mailroom.core.wire import as_row, carried_message_id, latest_key, packet

#: A flush log entry: [origin, seq, payload] names message MessageId(origin, seq).
Entry = list[Any]


@packet
@attrs.frozen
class GroupData:
    """A packet of view ``view``'s ordering protocol (``payload``), sent by ``sender``.

    When it carries an application message, ``origin`` is that message's sender and
    ``base`` the number of messages ``origin`` sent before this view, so the message
    is MessageId(origin, base + the inner protocol's seq); both are 0 otherwise.
    """

    names_its_message: ClassVar[bool] = True

    view: int
    sender: int
    origin: int
    base: int
    payload: Any

    def carries(self) -> MessageId | None:
        """The application message this packet carries, named by identity."""
        inner = carried_message_id(self.payload)
        if inner is None:
            return None
        return MessageId(self.origin, self.base + inner.seq)

    def latest_key(self) -> Hashable | None:
        """A control packet of the view's protocol that a later one supersedes (its
        ``latest_key``), in this view, from this sender."""
        inner = latest_key(self.payload)
        return None if inner is None else ("GroupData", self.view, self.sender, inner)


@packet
@attrs.frozen
class Join:
    """``sender`` (incarnation ``incarnation``, ``sent`` messages sent so far) asks to join."""

    sender: int
    incarnation: int
    sent: int


@packet
@attrs.frozen
class Leave:
    """Member ``sender`` of view ``view`` leaves the group."""

    view: int
    sender: int


@packet
@attrs.frozen
class Suspect:
    """Member ``sender`` of view ``view`` suspects member ``suspect`` (to the coordinator)."""

    view: int
    sender: int
    suspect: int


@attrs.frozen
class BallotPacket:
    """The fields every packet of a flush ballot starts with: the view it flushes, its
    ``sender``, and the ballot (``attempt``, ``coord``), compared as a pair."""

    view: int
    sender: int
    attempt: int
    coord: int


@packet
@attrs.frozen
class Prepare(BallotPacket):
    """Ballot (attempt, coord) opens a flush of view ``view`` proposing ``members``."""

    members: tuple[int, ...] = attrs.field(converter=as_row)


@packet
@attrs.frozen
class Promise(BallotPacket):
    """``sender`` froze view ``view`` for ballot (attempt, coord).

    ``sent``: messages it sent before the next view; ``has_state``: it holds the
    application state; ``log``: what it delivered in the view and does not know to
    be stable; ``own``: its messages of the view it has not delivered yet;
    ``accepted``: the last value it accepted in this view, as
    [attempt, coord, members, bases, incarnations, needs, log], or None.
    """

    sent: int
    has_state: bool
    log: list[Entry]
    own: list[Entry]
    accepted: list[Any] | None


@packet
@attrs.frozen
class Accept(BallotPacket):
    """Ballot (attempt, coord) asks to accept the next view of ``view``: its members,
    their message bases and incarnations, who needs the state, and the flush log."""

    members: tuple[int, ...] = attrs.field(converter=as_row)
    bases: tuple[int, ...] = attrs.field(converter=as_row)
    incarnations: tuple[int, ...] = attrs.field(converter=as_row)
    needs: tuple[int, ...] = attrs.field(converter=as_row)
    log: list[Entry]


@packet
@attrs.frozen
class Accepted(BallotPacket):
    """``sender`` accepted ballot (attempt, coord)'s value for the next view of ``view``."""


@packet
@attrs.frozen
class Nack(BallotPacket):
    """``sender`` has promised ballot (attempt, coord) of view ``view``, higher than the
    ballot it was asked for: that coordinator must outbid it (if it takes the other
    coordinator for dead) or wait for it."""


@packet
@attrs.frozen
class Query:
    """``sender`` is in view ``view`` and has seen a later one: send it what you know
    (in the same view: the state it waits for, or how far you hold under safe delivery)."""

    view: int
    sender: int


@packet
@attrs.frozen
class StateTransfer:
    """The application state at the start of view ``view``, for a joining member."""

    view: int
    sender: int
    payload: Any


@packet
@attrs.frozen
class Stability:
    """In view ``view``, ``sender`` delivered every message 1..low[r] of each rank r."""

    view: int
    sender: int
    low: tuple[int, ...] = attrs.field(converter=as_row)

    def latest_key(self) -> tuple[str, int, int]:
        """How far a member holds only grows in a view: its later report supersedes this."""
        return ("Stability", self.view, self.sender)


@packet
@attrs.frozen
class Commit:
    """The next view after ``view`` is decided: install it (fields as in Accept)."""

    view: int
    sender: int
    members: tuple[int, ...] = attrs.field(converter=as_row)
    bases: tuple[int, ...] = attrs.field(converter=as_row)
    incarnations: tuple[int, ...] = attrs.field(converter=as_row)
    needs: tuple[int, ...] = attrs.field(converter=as_row)
    log: list[Entry]


#: Every packet of group membership, by which snapshots name held packets.
PACKETS = (
    GroupData,
    Join,
    Leave,
    Suspect,
    Prepare,
    Promise,
    Accept,
    Accepted,
    Nack,
    Commit,
    Query,
    StateTransfer,
    Stability,
)


#: A ballot: (attempt, coordinator), compared as a pair; NO_BALLOT is below every other.
Ballot = tuple[int, int]
NO_BALLOT: Ballot = (0, -1)


@attrs.frozen
class NextView:
    """A proposed next view: members, message bases, incarnations, who needs the
    application state, and the flush log (messages to deliver before installing it)."""

    members: tuple[int, ...]
    bases: tuple[int, ...]
    incarnations: tuple[int, ...]
    needs: tuple[int, ...]
    log: list[Entry]

    def data(self) -> list[Any]:
        """As a Promise's ``accepted`` and a snapshot write it (after the ballot)."""
        return [
            list(self.members),
            list(self.bases),
            list(self.incarnations),
            list(self.needs),
            [list(e) for e in self.log],
        ]

    def names(self, pid: int, incarnation: int) -> bool:
        """This view includes process ``pid`` in ``incarnation``."""
        return pid in self.members and self.incarnations[self.members.index(pid)] == incarnation

    def accept(self, view: int, ballot: Ballot) -> Accept:
        """The Accept that asks the members of ``view`` to accept this value."""
        return Accept(view, ballot[1], *ballot, *self._fields())

    def commit(self, view: int, sender: int) -> Commit:
        """The Commit that installs this value as the view after ``view``."""
        return Commit(view, sender, *self._fields())

    def _fields(self) -> tuple[Any, ...]:
        return (self.members, self.bases, self.incarnations, self.needs, self.log)
