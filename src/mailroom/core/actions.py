"""What an endpoint asks its host to do: the only output of a sans-IO endpoint."""

from __future__ import annotations

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


Action = Transmit | Deliver | Stable | Backpressure
