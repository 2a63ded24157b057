"""Causal order: RST unicast, CBCAST broadcast, tagged causal stable broadcast."""

from mailroom.protocols.causal.broadcast import CBCAST, CBCASTPacket
from mailroom.protocols.causal.tagged import (
    NaiveTagged,
    StabilityAck,
    TaggedCausalBroadcast,
    TaggedPacket,
)
from mailroom.protocols.causal.unicast import RST, RSTPacket

__all__ = [
    "CBCAST",
    "RST",
    "CBCASTPacket",
    "NaiveTagged",
    "RSTPacket",
    "StabilityAck",
    "TaggedCausalBroadcast",
    "TaggedPacket",
]
