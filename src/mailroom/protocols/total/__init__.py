"""Total order: coordinator-based (Sequencer), Skeen's multicast, Lamport's acknowledgements."""

from mailroom.protocols.total.lamport import (
    LamportAck,
    LamportBatch,
    LamportMessage,
    LamportTotalOrder,
)
from mailroom.protocols.total.sequencer import (
    Sequencer,
    SequencerOrder,
    SequencerOrderBatch,
    SequencerRequest,
    SequencerRequestBatch,
)
from mailroom.protocols.total.skeen import Skeen, SkeenFinal, SkeenMessage, SkeenProposal
from mailroom.protocols.total.skeen_packets import SkeenBatch, SkeenFinalBatch, SkeenProposalBatch

__all__ = [
    "LamportAck",
    "LamportBatch",
    "LamportMessage",
    "LamportTotalOrder",
    "Sequencer",
    "SequencerOrder",
    "SequencerOrderBatch",
    "SequencerRequest",
    "SequencerRequestBatch",
    "Skeen",
    "SkeenBatch",
    "SkeenFinal",
    "SkeenFinalBatch",
    "SkeenMessage",
    "SkeenProposal",
    "SkeenProposalBatch",
]
