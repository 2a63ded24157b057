"""The checks on what membership packets carry, and the snapshot kinds of those values.

The values themselves (``NextView``, ``Ballot``) are defined with the packets that
carry them (``packets.py``; this module still exports them). Each check here raises
``RemoteError`` for what a peer sent; its ``snap_`` twin raises ``LocalError`` for the
same value read from a snapshot. What a group does with a well-formed packet is in
``group.py`` and its parts; this module only refuses malformed ones.
"""

from __future__ import annotations

from typing import Any

from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.persist import Kind, snap_counter, snap_list
from mailroom.core.wire import packet_from_data, packet_to_data

# the values the packets carry are defined with them; these names stay importable here
from mailroom.protocols.membership.packets import NO_BALLOT as NO_BALLOT
from mailroom.protocols.membership.packets import PACKETS, Entry
from mailroom.protocols.membership.packets import Ballot as Ballot
from mailroom.protocols.membership.packets import NextView as NextView


# -- checks on what peers send --------------------------------------------------------------
def counter(value: object, what: str) -> int:
    """A counter: an int in 0..2**53."""
    if type(value) is not int or not 0 <= value <= 2**53:
        raise RemoteError(f"{what} must be a counter, got {value!r}")
    return value


def sender(value: object, n: int) -> int:
    """A process of the group (0..n-1)."""
    if type(value) is not int or not 0 <= value < n:
        raise RemoteError(f"sender {value!r} is not a process of this group (0..{n - 1})")
    return value


def members(value: object, n: int) -> tuple[int, ...]:
    """Ascending, distinct pids below ``n``."""
    if not isinstance(value, tuple | list):
        raise RemoteError("members must be a list of pids")
    found = tuple(value)
    if any(type(m) is not int or not 0 <= m < n for m in found):
        raise RemoteError(f"members {list(found)} names a pid outside 0..{n - 1}")
    if list(found) != sorted(set(found)):
        raise RemoteError("members must be ascending and distinct")
    return found


def entries(value: object, n: int) -> list[Entry]:
    """A flush log: [origin, seq, payload] rows naming messages."""
    if not isinstance(value, list):
        raise RemoteError("a flush log must be a list")
    for e in value:
        if not isinstance(e, list) or len(e) != 3:
            raise RemoteError("a flush log entry is [origin, seq, payload]")
        if type(e[0]) is not int or not 0 <= e[0] < n or type(e[1]) is not int or e[1] < 1:
            raise RemoteError(f"flush log entry names no message: {e[:2]!r}")
    return value


def next_view(
    members_: object, bases: object, incs: object, needs: object, log: object, n: int
) -> NextView:
    """A proposed next view from its five parts (as Accept and Commit carry them)."""
    m = members(members_, n)
    if not m:
        raise RemoteError("a view has at least one member")
    b = tuple(counter(x, "base") for x in _sized(bases, len(m), "bases"))
    i = tuple(counter(x, "incarnation") for x in _sized(incs, len(m), "incarnations"))
    nd = members(needs, n)
    if not set(nd) <= set(m):
        raise RemoteError("needs names a process outside the view")
    return NextView(m, b, i, nd, entries(log, n))


def next_view_of(parts: list[Any], n: int) -> NextView:
    """A proposed next view from its data (``NextView.data()``)."""
    if len(parts) != 5:
        raise RemoteError("a view value is [members, bases, incarnations, needs, log]")
    return next_view(parts[0], parts[1], parts[2], parts[3], parts[4], n)


def accepted(value: object, n: int) -> tuple[Ballot, NextView] | None:
    """A Promise's ``accepted`` (attempt, coord, then ``NextView.data()``), or None."""
    if value is None:
        return None
    if not isinstance(value, list) or len(value) != 7:
        raise RemoteError(
            "accepted must be [attempt, coord, members, bases, incarnations, needs, log]"
        )
    ballot = (counter(value[0], "attempt"), counter(value[1], "coord"))
    return ballot, next_view_of(value[2:], n)


def _sized(value: object, size: int, what: str) -> list[Any]:
    if not isinstance(value, tuple | list) or len(value) != size:
        raise RemoteError(f"{what} must have {size} entries")
    return list(value)


# -- the same checks on snapshot data ---------------------------------------------------------
def snap_members(value: object, n: int, what: str) -> tuple[int, ...]:
    try:
        return members(value, n)
    except RemoteError as exc:
        raise LocalError(f"snapshot field {what}: {exc}") from None


def snap_entries(value: object, n: int, what: str) -> list[Entry]:
    try:
        return [list(e) for e in entries(value, n)]
    except RemoteError as exc:
        raise LocalError(f"snapshot field {what}: {exc}") from None


def snap_next_view(value: object, n: int, what: str) -> NextView:
    try:
        return next_view_of(snap_list(value, what), n)
    except (RemoteError, TypeError) as exc:
        raise LocalError(f"snapshot field {what} holds a bad view value: {exc}") from None


def snap_ballot(value: object, n: int, what: str) -> Ballot:
    """[attempt, coord], coord None for NO_BALLOT's -1."""
    attempt, coord = snap_list(value, what, 2)
    if coord is None:
        return (snap_counter(attempt, what), -1)
    if type(coord) is not int or not 0 <= coord < n:
        raise LocalError(f"snapshot field {what} names coordinator {coord!r}")
    return (snap_counter(attempt, what), coord)


def ballot_data(ballot: Ballot) -> list[int | None]:
    attempt, coord = ballot
    return [attempt, None if coord < 0 else coord]


#: Ascending distinct pids of the endpoint's group (a tuple; written as a list).
MEMBERS = Kind(list, lambda d, ep, key: snap_members(d, ep.n, key))
#: A set of pids, written sorted.
MEMBER_SET = Kind(sorted, lambda d, ep, key: set(snap_members(d, ep.n, key)))
#: A ballot, written [attempt, coord or None].
BALLOT = Kind(ballot_data, lambda d, ep, key: snap_ballot(d, ep.n, key))
#: A proposed next view, or None.
NEXT_VIEW = Kind(lambda v: v.data(), lambda d, ep, key: snap_next_view(d, ep.n, key)).optional()
#: A flush log.
ENTRIES = Kind(lambda log: [list(e) for e in log], lambda d, ep, key: snap_entries(d, ep.n, key))

_PACKETS: dict[str, type] = {c.__name__: c for c in PACKETS}


def packet_data(p: object) -> list[Any]:
    """A group packet held in a snapshot: [class name, fields]."""
    return [type(p).__name__, packet_to_data(p)]


def packet_from(value: object, what: str, kind: type | None = None) -> Any:
    """The group packet ``packet_data`` wrote (of class ``kind``, if given)."""
    name, fields = snap_list(value, what, 2)
    cls = _PACKETS.get(name) if isinstance(name, str) else None
    if cls is None:
        raise LocalError(f"snapshot holds an unknown group packet {name!r}")
    if kind is not None and cls is not kind:
        raise LocalError(f"snapshot field {what} holds a {name}, not a {kind.__name__}")
    return packet_from_data(cls, fields)


#: A group packet (any of PACKETS).
PACKET = Kind(packet_data, lambda d, ep, key: packet_from(d, key))
