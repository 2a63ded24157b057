"""Total order: coordinator-based (Sequencer), Skeen's multicast, Lamport's acknowledgements."""

from mailroom.protocols.total.lamport import LamportAck, LamportMessage, LamportTotalOrder
from mailroom.protocols.total.sequencer import (
    Sequencer,
    SequencerOrder,
    SequencerOrderBatch,
    SequencerRequest,
    SequencerRequestBatch,
)
from mailroom.protocols.total.skeen import Skeen, SkeenFinal, SkeenMessage, SkeenProposal

__all__ = [
    "LamportAck",
    "LamportMessage",
    "LamportTotalOrder",
    "Sequencer",
    "SequencerOrder",
    "SequencerOrderBatch",
    "SequencerRequest",
    "SequencerRequestBatch",
    "Skeen",
    "SkeenFinal",
    "SkeenMessage",
    "SkeenProposal",
]
