"""Causal order: RST unicast and CBCAST broadcast."""

from mailroom.protocols.causal.broadcast import CBCAST, CBCASTPacket
from mailroom.protocols.causal.unicast import RST, RSTPacket

__all__ = ["CBCAST", "RST", "CBCASTPacket", "RSTPacket"]
