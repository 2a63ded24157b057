"""The core layer: actions, messages, errors, the endpoint contract."""

from mailroom.core.actions import (
    Action,
    Backpressure,
    Deliver,
    Excluded,
    Stable,
    StateRequest,
    Transmit,
    View,
    ViewChange,
)
from mailroom.core.endpoint import (
    CAPABILITIES,
    ENDPOINT_TYPES,
    BatchBroadcasting,
    BroadcastEndpoint,
    ConsumingEndpoint,
    Endpoint,
    EndpointBase,
    FlowControlled,
    MulticastEndpoint,
    Snapshot,
    UnicastEndpoint,
    broadcast_batch,
    capabilities,
)
from mailroom.core.errors import LocalError, MailroomError, RemoteError
from mailroom.core.hooks import hook, hooks
from mailroom.core.messages import Message, MessageId, Payload, TaggedMessage, check_payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.registry import PROTOCOLS, register_protocol, restore_endpoint
from mailroom.core.stack import Stack

__all__ = [
    "CAPABILITIES",
    "ENDPOINT_TYPES",
    "PROTOCOLS",
    "Action",
    "Backpressure",
    "BatchBroadcasting",
    "BroadcastEndpoint",
    "ConsumingEndpoint",
    "Deliver",
    "Endpoint",
    "EndpointBase",
    "Excluded",
    "FlowControlled",
    "LocalError",
    "MailroomError",
    "Message",
    "MessageId",
    "MulticastEndpoint",
    "Payload",
    "Pending",
    "RemoteError",
    "Snapshot",
    "Stable",
    "Stack",
    "StateRequest",
    "TaggedMessage",
    "Transmit",
    "UnicastEndpoint",
    "View",
    "ViewChange",
    "Wait",
    "broadcast_batch",
    "capabilities",
    "check_payload",
    "hook",
    "hooks",
    "register_protocol",
    "restore_endpoint",
]
