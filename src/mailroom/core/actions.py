"""What an endpoint asks its host to do: the only output of a sans-IO endpoint."""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.core.messages import Message, MessageId


@attrs.frozen
class Transmit:
    """Put ``packet`` on the wire to process ``to``.

    ``message_id`` names the application message the packet carries, or is None
    for control packets (acknowledgements, proposals, sequence numbers). ``lazy``
    marks a control packet nothing waits on soon (an acknowledgement, a report no
    delivery needs yet): a host may hold its write a moment, to send it with the next
    packet for the same peer; sending it at once is always correct.
    """

    to: int
    packet: object
    message_id: MessageId | None
    lazy: bool = attrs.field(default=False, kw_only=True)


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
    they still matter). ``incarnations``: the members' incarnations, in member order
    (empty if the group does not say): a restarted process leaves in one view and
    its next incarnation joins in a later one.
    """

    view: View
    joined: tuple[int, ...] = attrs.field(converter=_members)
    left: tuple[int, ...] = attrs.field(converter=_members)
    state: Any = None
    dropped: tuple[MessageId, ...] = ()
    incarnations: tuple[int, ...] = attrs.field(default=(), converter=_members)


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
    (suspected, cut off in a minority, or it left). ``dropped``: its own messages this
    process did not deliver and will not: ``unsent``, those it issued and never sent
    (only when it left: a member that rejoins keeps its queue, with its ids, for the
    first view its next incarnation runs in with the state), and the others
    (``in_doubt``), which it sent and which the members of ``view`` may or may not have
    delivered. With ``rejoining`` the endpoint now asks to join again as a new
    incarnation: the application drops its state and waits for the ViewChange that
    brings the transferred state."""

    view: View
    dropped: tuple[MessageId, ...] = ()
    rejoining: bool = False
    unsent: tuple[MessageId, ...] = ()

    @property
    def in_doubt(self) -> tuple[MessageId, ...]:
        """Its messages it sent whose outcome it cannot know (``dropped`` less ``unsent``)."""
        unsent = set(self.unsent)
        return tuple(m for m in self.dropped if m not in unsent)


Action = Transmit | Deliver | Stable | Backpressure | ViewChange | StateRequest | Excluded


# -- building a delivery on the per-message path -------------------------------------------
# A frozen attrs class's generated ``__init__`` sets each field through
# ``object.__setattr__``; creating the three objects of a delivery that way costs about
# what the rest of an in-order receipt does. ``delivery`` creates the same objects and
# fills their slots directly. The classes have no defaults, converters or validators to
# skip (checked at import: ``_check_builders``).
_new = object.__new__
_ID_ORIGIN, _ID_SEQ = (MessageId.__dict__[f].__set__ for f in ("origin", "seq"))
_MSG_ID, _MSG_SENDER, _MSG_PAYLOAD = (
    Message.__dict__[f].__set__ for f in ("id", "sender", "payload")
)
_DELIVER_MESSAGE = Deliver.__dict__["message"].__set__


def delivery(origin: int, seq: int, payload: Any) -> Deliver:
    """``Deliver(Message(MessageId(origin, seq), origin, payload))``, built directly."""
    mid = _new(MessageId)
    _ID_ORIGIN(mid, origin)
    _ID_SEQ(mid, seq)
    message = _new(Message)
    _MSG_ID(message, mid)
    _MSG_SENDER(message, origin)
    _MSG_PAYLOAD(message, payload)
    action = _new(Deliver)
    _DELIVER_MESSAGE(action, message)
    return action


def _check_builders() -> None:
    """AssertionError unless the builders make exactly what the constructors make."""
    for cls, names in (
        (MessageId, ("origin", "seq")),
        (Message, ("id", "sender", "payload")),
        (Deliver, ("message",)),
    ):
        fields = attrs.fields(cls)
        assert tuple(f.name for f in fields) == names, cls
        assert all(
            f.default is attrs.NOTHING and f.converter is None and f.validator is None
            for f in fields
        ), cls
    assert delivery(1, 2, "x") == Deliver(Message(MessageId(1, 2), 1, "x"))
    built = delivery(3, 4, "y").message.id
    assert built == MessageId(3, 4) and hash(built) == hash(MessageId(3, 4))


_check_builders()
