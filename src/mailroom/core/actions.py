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


Action = Transmit | Deliver | Stable
