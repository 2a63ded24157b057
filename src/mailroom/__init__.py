"""mailroom: ordered message delivery (FIFO, causal, total order) as sans-IO state machines.

Every process has a mail clerk (an endpoint) that accepts packets from the
network and either delivers them or lets them wait in the mail room. The
public API is re-exported here; the simulator, trace tools and test harness
live in ``mailroom.sim``, ``mailroom.trace`` and ``mailroom.testing``.
"""

from mailroom.clocks import DelivVector, LamportClock, SentMatrix, VectorClock
from mailroom.core import (
    Action,
    Backpressure,
    BroadcastEndpoint,
    ConsumingEndpoint,
    Deliver,
    Endpoint,
    FlowControlled,
    LocalError,
    MailroomError,
    Message,
    MessageId,
    MulticastEndpoint,
    Pending,
    RemoteError,
    Stable,
    Stack,
    TaggedMessage,
    Transmit,
    UnicastEndpoint,
    Wait,
    restore_endpoint,
)
from mailroom.protocols import (
    CBCAST,
    KS,
    RST,
    CausalityDetector,
    CausalityViolation,
    Fifo,
    LamportTotalOrder,
    Reliable,
    Sequencer,
    Skeen,
    TaggedCausalBroadcast,
    Unordered,
)

__version__ = "0.2.0"

__all__ = [
    "CBCAST",
    "KS",
    "RST",
    "Action",
    "Backpressure",
    "BroadcastEndpoint",
    "CausalityDetector",
    "CausalityViolation",
    "ConsumingEndpoint",
    "DelivVector",
    "Deliver",
    "Endpoint",
    "Fifo",
    "FlowControlled",
    "LamportClock",
    "LamportTotalOrder",
    "LocalError",
    "MailroomError",
    "Message",
    "MessageId",
    "MulticastEndpoint",
    "Pending",
    "Reliable",
    "RemoteError",
    "SentMatrix",
    "Sequencer",
    "Skeen",
    "Stable",
    "Stack",
    "TaggedCausalBroadcast",
    "TaggedMessage",
    "Transmit",
    "UnicastEndpoint",
    "Unordered",
    "VectorClock",
    "Wait",
    "__version__",
    "restore_endpoint",
]
