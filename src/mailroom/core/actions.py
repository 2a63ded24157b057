"""What an endpoint asks its host to do: the only output of a sans-IO endpoint."""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.messages import Message, MessageId


@attrs.frozen
class Transmit:
    """Put ``packet`` on the wire to process ``to``.

    ``message_id`` names the application message the packet carries, or is None
    for control packets (acknowledgements, proposals, sequence numbers).
    """

    to: int
    packet: object
    message_id: MessageId | None


@attrs.frozen
class Deliver:
    """Hand ``message`` to the application."""

    message: Message


@attrs.frozen
class Stable:
    """The listed messages are causally stable (tagged causal broadcast)."""

    messages: tuple[MessageId, ...]


@attrs.frozen
class Backpressure:
    """Flow control: the channel to ``to`` is full; ``waiting`` packets wait to be sent.

    Nothing was lost: the layer keeps what it was given and sends it as the peer
    acknowledges earlier packets. The application should hold back new sends
    until ``can_send(to)`` is true again.
    """

    to: int
    waiting: int


def _members(value: Any) -> tuple[int, ...]:
    return tuple(value)


@attrs.frozen
class View:
    """A group view: ``id`` orders views (each installation adds one); ``members`` are
    the processes' stable identities, ascending; a member's rank is its index."""

    id: int
    members: tuple[int, ...] = attrs.field(converter=_members)

    def rank(self, pid: int) -> int:
        """The rank of member ``pid`` in this view (ValueError if it is not a member)."""
        return self.members.index(pid)


@attrs.frozen
class ViewChange:
    """The group installs ``view`` here, at the same point of every member's delivery
    stream: everything delivered before it was delivered in the previous view.

    ``joined``/``left``: members added and removed since the previous view (at a
    joining member, which had none, every member is new). ``state`` is the
    application state transferred to a joining member (None at members that were
    already in the group); ``dropped`` lists this member's own
    messages of the previous view that no member delivered (send them again if
    they still matter).
    """

    view: View
    joined: tuple[int, ...] = attrs.field(converter=_members)
    left: tuple[int, ...] = attrs.field(converter=_members)
    state: Any = None
    dropped: tuple[MessageId, ...] = ()


@attrs.frozen
class StateRequest:
    """The host must take the application's state now (right after the ViewChange of
    view ``view``, before handling any later action) and pass it to the endpoint's
    ``provide_state(view, state)``, which sends it to the joining members ``to``."""

    view: int
    to: tuple[int, ...] = attrs.field(converter=_members)


@attrs.frozen
class Excluded:
    """This process is no longer a member: the group installed ``view`` without it
    (suspected, cut off in a minority, or it left). ``dropped``: its own messages that
    will never be delivered (those it sent in the view and did not deliver; what it
    queued unsent goes out after it rejoins, unless it left). With ``rejoining`` the
    endpoint now asks to join again as a new incarnation: the application drops its
    state and waits for the ViewChange that brings the transferred state."""

    view: View
    dropped: tuple[MessageId, ...] = ()
    rejoining: bool = False


Action = Transmit | Deliver | Stable | Backpressure | ViewChange | StateRequest | Excluded
