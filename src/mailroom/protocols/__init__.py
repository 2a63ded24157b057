"""The protocols: FIFO, causal (RST, KS, CBCAST), total order, the unordered baseline, detection."""

from mailroom.protocols.causal import (
    CBCAST,
    KS,
    RST,
    CBCASTPacket,
    KSPacket,
    NaiveTagged,
    RSTPacket,
    StabilityAck,
    TaggedCausalBroadcast,
    TaggedPacket,
)
from mailroom.protocols.detect import CausalityDetector, CausalityViolation, is_violation
from mailroom.protocols.fifo import Fifo, FifoPacket
from mailroom.protocols.reliable import Reliable, ReliableAck, ReliablePacket
from mailroom.protocols.total import LamportTotalOrder, Sequencer, Skeen
from mailroom.protocols.unordered import Unordered, UnorderedPacket

__all__ = [
    "CBCAST",
    "KS",
    "RST",
    "CBCASTPacket",
    "CausalityDetector",
    "CausalityViolation",
    "Fifo",
    "FifoPacket",
    "KSPacket",
    "LamportTotalOrder",
    "NaiveTagged",
    "RSTPacket",
    "Reliable",
    "ReliableAck",
    "ReliablePacket",
    "Sequencer",
    "Skeen",
    "StabilityAck",
    "TaggedCausalBroadcast",
    "TaggedPacket",
    "Unordered",
    "UnorderedPacket",
    "is_violation",
]
