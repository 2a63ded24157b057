"""The protocols: FIFO, causal (RST, CBCAST), total order, the unordered baseline, detection."""

from mailroom.protocols.causal import (
    CBCAST,
    RST,
    CBCASTPacket,
    NaiveTagged,
    RSTPacket,
    StabilityAck,
    TaggedCausalBroadcast,
    TaggedPacket,
)
from mailroom.protocols.detect import CausalityDetector, CausalityViolation, is_violation
from mailroom.protocols.fifo import Fifo, FifoPacket
from mailroom.protocols.total import LamportTotalOrder, Sequencer, Skeen
from mailroom.protocols.unordered import Unordered, UnorderedPacket

__all__ = [
    "CBCAST",
    "RST",
    "CBCASTPacket",
    "CausalityDetector",
    "CausalityViolation",
    "Fifo",
    "FifoPacket",
    "LamportTotalOrder",
    "NaiveTagged",
    "RSTPacket",
    "Sequencer",
    "Skeen",
    "StabilityAck",
    "TaggedCausalBroadcast",
    "TaggedPacket",
    "Unordered",
    "UnorderedPacket",
    "is_violation",
]
