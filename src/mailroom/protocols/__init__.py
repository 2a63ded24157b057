"""The protocols: FIFO, causal (RST, KS, CBCAST), total order, the unordered baseline, detection."""

from mailroom.core.registry import register_protocol
from mailroom.protocols import causal
from mailroom.protocols.causal import CBCAST as CBCAST
from mailroom.protocols.causal import KS as KS
from mailroom.protocols.causal import RST as RST
from mailroom.protocols.causal import CBCASTBatch as CBCASTBatch
from mailroom.protocols.causal import CBCASTPacket as CBCASTPacket
from mailroom.protocols.causal import KSBatch as KSBatch
from mailroom.protocols.causal import KSPacket as KSPacket
from mailroom.protocols.causal import RSTBatch as RSTBatch
from mailroom.protocols.causal import RSTPacket as RSTPacket
from mailroom.protocols.causal import StabilityAck as StabilityAck
from mailroom.protocols.causal import TaggedBatch as TaggedBatch
from mailroom.protocols.causal import TaggedCausalBroadcast as TaggedCausalBroadcast
from mailroom.protocols.causal import TaggedPacket as TaggedPacket
from mailroom.protocols.detect import CausalityDetector, CausalityViolation, is_violation
from mailroom.protocols.fifo import Fifo, FifoBatch, FifoPacket
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
    "CausalityDetector",
    "CausalityViolation",
    "Fifo",
    "FifoBatch",
    "FifoPacket",
    "Group",
    "LamportTotalOrder",
    "Reliable",
    "ReliableAck",
    "ReliablePacket",
    "Sequencer",
    "Skeen",
    "Unordered",
    "UnorderedPacket",
    "is_violation",
]
__all__ += causal.__all__  # the causal protocols and their packets
