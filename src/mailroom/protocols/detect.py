"""Detecting causality violations after the fact (the detector of docs/story.md).

A host knows the entrywise maximum of the vector timestamps it has received.
A newly received message whose timestamp is strictly below that knowledge is a
(potential) causality violation: someone who had already seen this message's
send told us something before the message itself arrived.
"""

from __future__ import annotations

import attrs

from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId


@attrs.frozen
class CausalityViolation:
    """``message`` arrived with ``timestamp`` below what the receiver ``known`` already."""

    process: int
    message: MessageId
    timestamp: VectorClock
    known: VectorClock

    def explain(self) -> str:
        return (
            f"P{self.process} received {self.message} stamped {self.timestamp.tolist()} "
            f"after already knowing {self.known.tolist()}: a causality violation"
        )


def is_violation(timestamp: VectorClock, known: VectorClock) -> bool:
    """The detector's rule: the timestamp is less than the local knowledge."""
    return timestamp < known


class CausalityDetector:
    """Watches the timestamps a process receives and flags violations."""

    def __init__(self, pid: int, n: int) -> None:
        self.pid = pid
        self.known = VectorClock.zero(n)
        self.violations: list[CausalityViolation] = []

    def observe(self, message: MessageId, timestamp: VectorClock) -> CausalityViolation | None:
        """Record one received timestamp; return the violation it shows, if any."""
        found = None
        if is_violation(timestamp, self.known):
            found = CausalityViolation(self.pid, message, timestamp, self.known)
            self.violations.append(found)
        self.known = self.known.merge(timestamp)
        return found
