"""The core layer: actions, messages, errors, the endpoint contract, and what a protocol
author builds on: ``EndpointBase``, ``packet``, the persistent-field table (``Field`` and
its kinds), the ``validate`` checks and the ``hook`` mark (docs/writing-a-protocol.md)."""

from mailroom.core import persist, validate
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
    BatchSending,
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
    send_batch,
)
from mailroom.core.errors import BackpressureError, LocalError, MailroomError, RemoteError
from mailroom.core.hooks import hook, hooks
from mailroom.core.messages import Message, MessageId, Payload, TaggedMessage, check_payload
from mailroom.core.packets import PACKET_TYPES, is_packet, packet
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import COUNTER, COUNTS, FLAG, PID, PIDS, POSITIVE, TIME, Field, Kind
from mailroom.core.registry import PROTOCOLS, register_protocol, restore_endpoint
from mailroom.core.stack import Stack

__all__ = [
    "CAPABILITIES",
    "COUNTER",
    "COUNTS",
    "ENDPOINT_TYPES",
    "FLAG",
    "PACKET_TYPES",
    "PID",
    "PIDS",
    "POSITIVE",
    "PROTOCOLS",
    "TIME",
    "Action",
    "Backpressure",
    "BackpressureError",
    "BatchBroadcasting",
    "BatchSending",
    "BroadcastEndpoint",
    "ConsumingEndpoint",
    "Deliver",
    "Endpoint",
    "EndpointBase",
    "Excluded",
    "Field",
    "FlowControlled",
    "Kind",
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
    "is_packet",
    "packet",
    "persist",
    "register_protocol",
    "restore_endpoint",
    "send_batch",
    "validate",
]
