"""The protocols: FIFO, causal (RST, KS, CBCAST), total order, the unordered baseline, detection."""

from mailroom.core.registry import register_protocol
from mailroom.protocols.causal import (
    CBCAST,
    KS,
    RST,
    CBCASTBatch,
    CBCASTPacket,
    KSPacket,
    RSTPacket,
    StabilityAck,
    TaggedCausalBroadcast,
    TaggedPacket,
)
from mailroom.protocols.detect import CausalityDetector, CausalityViolation, is_violation
from mailroom.protocols.fifo import Fifo, FifoPacket
from mailroom.protocols.membership import Group
from mailroom.protocols.reliable import Reliable, ReliableAck, ReliablePacket
from mailroom.protocols.total import LamportTotalOrder, Sequencer, Skeen
from mailroom.protocols.unordered import Unordered, UnorderedPacket

_CAUSAL = ("integrity", "fifo", "causal", "liveness")
_TOTAL = ("integrity", "total", "liveness")
for _name, _factory, _mode, _promises in (
    ("unordered", Unordered, "unicast", ("integrity", "liveness")),
    ("fifo", Fifo, "unicast", ("integrity", "fifo", "liveness")),
    ("rst", RST, "unicast", _CAUSAL),
    ("ks", KS, "unicast", _CAUSAL),
    ("cbcast", CBCAST, "broadcast", _CAUSAL),
    ("tagged", TaggedCausalBroadcast, "broadcast", _CAUSAL),
    ("sequencer", Sequencer, "broadcast", _TOTAL),
    ("skeen", Skeen, "broadcast", _TOTAL),
    (
        "lamport",
        LamportTotalOrder.stack,
        "broadcast",
        ("integrity", "fifo", "causal", "total", "liveness"),
    ),
):
    register_protocol(_name, _factory, _mode, _promises)

__all__ = [
    "CBCAST",
    "KS",
    "RST",
    "CBCASTBatch",
    "CBCASTPacket",
    "CausalityDetector",
    "CausalityViolation",
    "Fifo",
    "FifoPacket",
    "Group",
    "KSPacket",
    "LamportTotalOrder",
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
