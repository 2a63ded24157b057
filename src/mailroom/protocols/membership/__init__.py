"""Group membership: views, flush and view-synchronous delivery around any ordering protocol."""

from mailroom.protocols.membership.group import Group
from mailroom.protocols.membership.packets import (
    Accept,
    Accepted,
    Commit,
    GroupData,
    Join,
    Leave,
    Prepare,
    Promise,
    Query,
    Stability,
    StateTransfer,
    Suspect,
)

__all__ = [
    "Accept",
    "Accepted",
    "Commit",
    "Group",
    "GroupData",
    "Join",
    "Leave",
    "Prepare",
    "Promise",
    "Query",
    "Stability",
    "StateTransfer",
    "Suspect",
]
