"""The pairwise definitions of FIFO, causal and total order: the test oracle.

These are the reference checkers as they were first written, comparing every
pair of deliveries (O(d^2) per process). ``mailroom.trace.checkers`` now finds
the same violations by sorting; tests/test_checkers_fast.py checks that the two
agree exactly, row for row and in the same order.
"""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.core.messages import MessageId
from mailroom.trace.checkers import Violation, happened_before, send_clocks
from mailroom.trace.events import Event
from mailroom.trace.history import deliveries as _deliveries


def _order_violations(
    events: Sequence[Event], prop: str, run: str, before: dict[MessageId, dict[int, int]] | None
) -> list[Violation]:
    """Pairs a process delivered out of FIFO (before is None) or causal order."""
    found = []
    for q, ds in _deliveries(events).items():
        first: dict[MessageId, Event] = {}
        for d in ds:
            first.setdefault(d.message, d)
        ordered = list(first.values())
        for i, later in enumerate(ordered):  # later is delivered after earlier...
            for earlier in ordered[:i]:
                m1, m2 = later.message, earlier.message  # ...so m1 must not precede m2
                if before is None:
                    bad = m1.origin == m2.origin and m1.seq < m2.seq
                else:
                    bad = m1 in before and m2 in before and happened_before(before[m1], before[m2])
                if bad:
                    why = "sent" if before is None else "whose send happened"
                    found.append(
                        Violation(
                            prop,
                            run,
                            (q,),
                            (m1, m2),
                            (later.seq, earlier.seq),
                            f"P{q} delivered {m2} before {m1}, {why} before it",
                        )
                    )
    return found


def check_fifo(events: Sequence[Event], run: str = "") -> list[Violation]:
    return _order_violations(events, "fifo", run, None)


def check_causal(events: Sequence[Event], run: str = "") -> list[Violation]:
    return _order_violations(events, "causal", run, send_clocks(events))


def check_total(events: Sequence[Event], run: str = "") -> list[Violation]:
    position: dict[int, dict[MessageId, Event]] = {}
    for q, ds in _deliveries(events).items():
        position[q] = {}
        for d in ds:
            position[q].setdefault(d.message, d)
    found = []
    procs = sorted(position)
    for a, p in enumerate(procs):
        for q in procs[a + 1 :]:
            common = [m for m in position[p] if m in position[q]]  # in p's order
            for i, m1 in enumerate(common):
                for m2 in common[i + 1 :]:
                    if position[q][m2].seq < position[q][m1].seq:
                        found.append(
                            Violation(
                                "total",
                                run,
                                (p, q),
                                (m1, m2),
                                (
                                    position[p][m1].seq,
                                    position[p][m2].seq,
                                    position[q][m1].seq,
                                    position[q][m2].seq,
                                ),
                                f"P{p} delivered {m1} before {m2}, P{q} the other way round",
                            )
                        )
    return found


ORACLES = {
    "fifo": check_fifo,
    "causal": check_causal,
    "total": check_total,
}
