"""The protocols: FIFO, causal (RST, CBCAST), the unordered baseline and detection."""

from mailroom.protocols.causal import CBCAST, KS, RST, CBCASTPacket, KSPacket, RSTPacket
from mailroom.protocols.detect import CausalityDetector, CausalityViolation, is_violation
from mailroom.protocols.fifo import Fifo, FifoPacket
from mailroom.protocols.reliable import Reliable, ReliableAck, ReliablePacket
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
    "RSTPacket",
    "Reliable",
    "ReliableAck",
    "ReliablePacket",
    "Unordered",
    "UnorderedPacket",
    "is_violation",
]
