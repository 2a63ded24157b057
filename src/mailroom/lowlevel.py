"""The protocol author's API: what a new protocol, or a variant of a built-in one, is
written with (docs/writing-a-protocol.md).

``mailroom`` itself is the user's API (the protocols, the clocks, the actions an
endpoint returns); this namespace holds what only a protocol's author needs: the packet
decorator and its data conversions, ``EndpointBase`` (whose public helpers ``next_id``,
``next_ids``, ``check_dest`` and ``check_payload`` number and check sends),
``Receivers`` (the table ``receive`` dispatches by), the persistent-field table
(``Field``, its kinds, ``Kind`` for your own), ``validate`` (the checks for packets from
the network), the extension points (``hook``, ``hooks``) and ``register_protocol``. The
older paths (``mailroom.packet``, ``mailroom.core.hook``, ...) keep working: these are
the same objects.
"""

from __future__ import annotations

from mailroom.core import validate
from mailroom.core.actions import Action, Deliver, Stable, Transmit
from mailroom.core.dispatch import Receivers
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook, hooks
from mailroom.core.messages import Message, MessageId, Payload, check_payload
from mailroom.core.packets import is_packet, packet
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import COUNTER, COUNTS, FLAG, PID, PIDS, POSITIVE, TIME, Field, Kind
from mailroom.core.registry import register_protocol
from mailroom.core.wire import packet_from_data, packet_to_data

__all__ = [
    "COUNTER",
    "COUNTS",
    "FLAG",
    "PID",
    "PIDS",
    "POSITIVE",
    "TIME",
    "Action",
    "Deliver",
    "EndpointBase",
    "Field",
    "Kind",
    "LocalError",
    "Message",
    "MessageId",
    "Payload",
    "Pending",
    "Receivers",
    "RemoteError",
    "Stable",
    "Transmit",
    "Wait",
    "check_payload",
    "hook",
    "hooks",
    "is_packet",
    "packet",
    "packet_from_data",
    "packet_to_data",
    "register_protocol",
    "validate",
]
