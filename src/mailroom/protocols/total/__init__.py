"""Total order: coordinator-based (Sequencer), Skeen's multicast, Lamport's acknowledgements."""

from mailroom.protocols.total.lamport import LamportAck, LamportMessage, LamportTotalOrder
from mailroom.protocols.total.sequencer import Sequencer, SequencerOrder, SequencerRequest
from mailroom.protocols.total.skeen import Skeen, SkeenFinal, SkeenMessage, SkeenProposal

__all__ = [
    "LamportAck",
    "LamportMessage",
    "LamportTotalOrder",
    "Sequencer",
    "SequencerOrder",
    "SequencerRequest",
    "Skeen",
    "SkeenFinal",
    "SkeenMessage",
    "SkeenProposal",
]
