"""Group membership: views, flush and view-synchronous delivery around any ordering protocol."""

from mailroom.protocols.membership.detector import Heartbeat, HeartbeatDetector
from mailroom.protocols.membership.flush import Freeze, Round
from mailroom.protocols.membership.group import Group
from mailroom.protocols.membership.packets import (
    Accept,
    Accepted,
    Commit,
    GroupData,
    Join,
    Leave,
    Nack,
    Prepare,
    Promise,
    Query,
    Stability,
    StateTransfer,
    Suspect,
)
from mailroom.protocols.membership.status import GroupStatus

__all__ = [
    "Accept",
    "Accepted",
    "Commit",
    "Freeze",
    "Group",
    "GroupData",
    "GroupStatus",
    "Heartbeat",
    "HeartbeatDetector",
    "Join",
    "Leave",
    "Nack",
    "Prepare",
    "Promise",
    "Query",
    "Round",
    "Stability",
    "StateTransfer",
    "Suspect",
]
