"""One violation row and the order every report lists them in.

The row is the same on both engines (the Spark table has one column per field,
``mailroom.trace.report.VIOLATION_COLUMNS``). Reports list witnesses by
``witness_key``: run, positions, processes, messages, then the reason, so two
rows that tie on the positions still come in one order, the same on both engines
(Spark sorts by the same columns; UTF-8 bytes sort as code points do).
"""

from __future__ import annotations

import attrs

from mailroom.core.messages import MessageId

#: The columns ``witness_key`` sorts by, for engines that sort tables (Spark).
WITNESS_ORDER = ("run", "positions", "processes", "messages", "reason")


@attrs.frozen
class Violation:
    """One violation of ``property`` and its witness."""

    property: str
    run: str
    processes: tuple[int, ...]
    messages: tuple[MessageId, ...]
    positions: tuple[int, ...]
    reason: str

    def explain(self) -> str:
        return f"[{self.property}] run {self.run}: {self.reason}"


def witness_key(
    v: Violation,
) -> tuple[str, tuple[int, ...], tuple[int, ...], tuple[tuple[int, int], ...], str]:
    """The total order of witnesses in every report (``WITNESS_ORDER``)."""
    messages = tuple((m.origin, m.seq) for m in v.messages)
    return v.run, v.positions, v.processes, messages, v.reason
