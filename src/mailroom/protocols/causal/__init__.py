"""Causal order: RST and KS unicast, CBCAST broadcast, tagged causal stable broadcast."""

from mailroom.protocols.causal.broadcast import CBCAST, CBCASTBatch, CBCASTPacket
from mailroom.protocols.causal.ks import KS, KSBatch, KSPacket
from mailroom.protocols.causal.tagged import (
    StabilityAck,
    TaggedBatch,
    TaggedCausalBroadcast,
    TaggedPacket,
)
from mailroom.protocols.causal.unicast import RST, RSTBatch, RSTPacket

__all__ = [
    "CBCAST",
    "KS",
    "RST",
    "CBCASTBatch",
    "CBCASTPacket",
    "KSBatch",
    "KSPacket",
    "RSTBatch",
    "RSTPacket",
    "StabilityAck",
    "TaggedBatch",
    "TaggedCausalBroadcast",
    "TaggedPacket",
]
