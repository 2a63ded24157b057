"""mailroom: ordered message delivery (FIFO, causal, total order) as sans-IO state machines.

Every process has a mail clerk (an endpoint) that accepts packets from the
network and either delivers them or lets them wait in the mail room. The
public API is re-exported here; the simulator, trace tools and test harness
live in ``mailroom.sim``, ``mailroom.trace`` and ``mailroom.testing``. What a protocol
author builds on (``EndpointBase``, ``packet``, ``Field`` and its kinds, ``validate``)
is here too: docs/writing-a-protocol.md builds a protocol with it.

The names are imported when first used (PEP 562), so ``import mailroom`` (and so
``mailroom --version``) does not load the protocols; ``from mailroom import X`` works
for every ``X`` in ``__all__``. The library configures no logging: one logger per
subsystem (``mailroom.net``, ``mailroom.replicated``, ...) under ``mailroom``, which
carries only a ``NullHandler``; the application decides where their lines go and
with what time (``mailroom node`` logs them with the wall-clock time).
"""

import logging as _logging
import typing as _typing

from mailroom._build import COMPILED as _COMPILED
from mailroom._exports import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:
    from mailroom.clocks import DelivVector, LamportClock, SentMatrix, VectorClock
    from mailroom.core import (
        COUNTER,
        COUNTS,
        FLAG,
        PID,
        PIDS,
        POSITIVE,
        TIME,
        Action,
        Backpressure,
        BackpressureError,
        BroadcastEndpoint,
        ConsumingEndpoint,
        Deliver,
        Endpoint,
        EndpointBase,
        Excluded,
        Field,
        FlowControlled,
        Kind,
        LocalError,
        MailroomError,
        Message,
        MessageId,
        MulticastEndpoint,
        Pending,
        RemoteError,
        Stable,
        Stack,
        StateRequest,
        TaggedMessage,
        Transmit,
        UnicastEndpoint,
        View,
        ViewChange,
        Wait,
        packet,
        restore_endpoint,
        validate,
    )
    from mailroom.protocols import (
        CBCAST,
        KS,
        RST,
        CausalityDetector,
        CausalityViolation,
        Fifo,
        Group,
        LamportTotalOrder,
        Reliable,
        Sequencer,
        Skeen,
        TaggedCausalBroadcast,
        Unordered,
    )

__version__ = "0.3.0"

#: True when this is the build compiled by mypyc (``MAILROOM_COMPILE=1 pip install .``,
#: docs/compiled.md), False in the pure-Python package, the default and the reference.
compiled: bool = _COMPILED

#: Where each public name lives (imported on first use).
_HOMES: dict[str, str] = {
    "DelivVector": "mailroom.clocks",
    "LamportClock": "mailroom.clocks",
    "SentMatrix": "mailroom.clocks",
    "VectorClock": "mailroom.clocks",
    "COUNTER": "mailroom.core",
    "COUNTS": "mailroom.core",
    "FLAG": "mailroom.core",
    "PID": "mailroom.core",
    "PIDS": "mailroom.core",
    "POSITIVE": "mailroom.core",
    "TIME": "mailroom.core",
    "Action": "mailroom.core",
    "Backpressure": "mailroom.core",
    "BackpressureError": "mailroom.core",
    "BroadcastEndpoint": "mailroom.core",
    "ConsumingEndpoint": "mailroom.core",
    "Deliver": "mailroom.core",
    "Endpoint": "mailroom.core",
    "EndpointBase": "mailroom.core",
    "Excluded": "mailroom.core",
    "Field": "mailroom.core",
    "FlowControlled": "mailroom.core",
    "Kind": "mailroom.core",
    "LocalError": "mailroom.core",
    "MailroomError": "mailroom.core",
    "Message": "mailroom.core",
    "MessageId": "mailroom.core",
    "MulticastEndpoint": "mailroom.core",
    "Pending": "mailroom.core",
    "RemoteError": "mailroom.core",
    "Stable": "mailroom.core",
    "Stack": "mailroom.core",
    "StateRequest": "mailroom.core",
    "TaggedMessage": "mailroom.core",
    "Transmit": "mailroom.core",
    "UnicastEndpoint": "mailroom.core",
    "View": "mailroom.core",
    "ViewChange": "mailroom.core",
    "Wait": "mailroom.core",
    "packet": "mailroom.core",
    "restore_endpoint": "mailroom.core",
    "validate": "mailroom.core",
    "CBCAST": "mailroom.protocols",
    "KS": "mailroom.protocols",
    "RST": "mailroom.protocols",
    "CausalityDetector": "mailroom.protocols",
    "CausalityViolation": "mailroom.protocols",
    "Fifo": "mailroom.protocols",
    "Group": "mailroom.protocols",
    "LamportTotalOrder": "mailroom.protocols",
    "Reliable": "mailroom.protocols",
    "Sequencer": "mailroom.protocols",
    "Skeen": "mailroom.protocols",
    "TaggedCausalBroadcast": "mailroom.protocols",
    "Unordered": "mailroom.protocols",
}


if not _typing.TYPE_CHECKING:  # (type checkers see the imports above, and no other name)
    __getattr__, __dir__ = _lazy_exports(__name__, _HOMES, globals())


_logging.getLogger("mailroom").addHandler(_logging.NullHandler())

__all__ = [
    "CBCAST",
    "COUNTER",
    "COUNTS",
    "FLAG",
    "KS",
    "PID",
    "PIDS",
    "POSITIVE",
    "RST",
    "TIME",
    "Action",
    "Backpressure",
    "BackpressureError",
    "BroadcastEndpoint",
    "CausalityDetector",
    "CausalityViolation",
    "ConsumingEndpoint",
    "DelivVector",
    "Deliver",
    "Endpoint",
    "EndpointBase",
    "Excluded",
    "Field",
    "Fifo",
    "FlowControlled",
    "Group",
    "Kind",
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
    "StateRequest",
    "TaggedCausalBroadcast",
    "TaggedMessage",
    "Transmit",
    "UnicastEndpoint",
    "Unordered",
    "VectorClock",
    "View",
    "ViewChange",
    "Wait",
    "__version__",
    "compiled",
    "packet",
    "restore_endpoint",
    "validate",
]
