"""The core layer: actions, messages, errors, the endpoint contract."""

from mailroom.core.actions import Action, Backpressure, Deliver, Stable, Transmit
from mailroom.core.endpoint import (
    ENDPOINT_TYPES,
    BroadcastEndpoint,
    Endpoint,
    EndpointBase,
    Snapshot,
    UnicastEndpoint,
)
from mailroom.core.errors import LocalError, MailroomError, RemoteError
from mailroom.core.messages import Message, MessageId, Payload, TaggedMessage, check_payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.stack import Stack

__all__ = [
    "ENDPOINT_TYPES",
    "Action",
    "Backpressure",
    "BroadcastEndpoint",
    "Deliver",
    "Endpoint",
    "EndpointBase",
    "LocalError",
    "MailroomError",
    "Message",
    "MessageId",
    "Payload",
    "Pending",
    "RemoteError",
    "Snapshot",
    "Stable",
    "Stack",
    "TaggedMessage",
    "Transmit",
    "UnicastEndpoint",
    "Wait",
    "check_payload",
]
