"""The reference checks of the ordering properties: integrity, FIFO, causal, total, liveness.

Each returns the canonical violation rows of one run (``mailroom.trace.properties``
says what each property promises and what a row is). FIFO, causal and total look at
each process's *first* delivery of each message. With ``summary``, they report one
row per violating later delivery (fifo, causal) or per violating (p, q, m2) (total),
each with one witness from the full set, chosen exactly as Spark's summary chooses
it (fifo: the earlier delivery with the highest seq from that origin; causal: the
first earlier delivery whose send followed; total: the m1 that q delivered last).
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Sequence

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event
from mailroom.trace.history import (
    deliveries,
    first_deliveries,
    next_views,
    segments,
    send_stamps,
    sends,
    successions,
)
from mailroom.trace.violation import Violation


def check_integrity(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(q, m): delivered at q but never sent, or q not among its destinations, or
    delivered at q more than once (one row per extra delivery)."""
    sent = sends(events)
    found = []
    for q, ds in deliveries(events).items():
        seen: set[MessageId] = set()
        for d in ds:
            m = d.message
            if m not in sent:
                reason = f"P{q} delivered {m}, which was never sent"
            elif q not in sent[m].dest:
                reason = f"P{q} delivered {m}, which was sent only to {list(sent[m].dest)}"
            elif m in seen:
                reason = f"P{q} delivered {m} more than once"
            else:
                seen.add(m)
                continue
            seen.add(m)
            found.append(Violation("integrity", run, (q,), (m,), (d.seq,), reason))
    return found


def _order_violation(
    prop: str, run: str, q: int, later: Event, earlier: Event, why: str
) -> Violation:
    m1, m2 = later.message, earlier.message
    return Violation(
        prop,
        run,
        (q,),
        (m1, m2),
        (later.seq, earlier.seq),
        f"P{q} delivered {m2} before {m1}, {why} before it",
    )


def check_fifo(events: Sequence[Event], run: str = "", summary: bool = False) -> list[Violation]:
    """(q, m1, m2): same origin, m1 sent first (lower seq), q delivers m2 first.

    Sort-based rather than pairwise: per process and origin, the seqs delivered so
    far are kept sorted, so each delivery finds the higher seqs delivered before it
    by bisection; the cost is O(d log d) plus the violations reported. With
    ``summary``, one row per violating delivery, its witness the highest seq.
    """
    found = []
    for q, ordered in first_deliveries(events).items():
        seen: dict[int, list[tuple[int, int]]] = {}  # origin -> sorted (seq, index)
        for i, later in enumerate(ordered):
            m1 = later.message
            earlier = seen.setdefault(m1.origin, [])
            at = bisect.bisect_right(earlier, (m1.seq, len(ordered)))
            if summary and at < len(earlier):
                best = ordered[earlier[-1][1]]
                found.append(_order_violation("fifo", run, q, later, best, "sent"))
            elif not summary:
                for j in sorted(index for _, index in earlier[at:]):
                    found.append(_order_violation("fifo", run, q, later, ordered[j], "sent"))
            if at == len(earlier):
                earlier.append((m1.seq, i))
            else:
                bisect.insort(earlier, (m1.seq, i))
    return found


def check_causal(events: Sequence[Event], run: str = "", summary: bool = False) -> list[Violation]:
    """(q, m1, m2): send(m1) -> send(m2), q delivers m2 first.

    With ``summary``, one row per violating delivery, its witness the first
    earlier delivery whose send followed send(m1).

    With clocks from ``propagate_clocks``, send(m1) at process p happened before
    send(m2) iff sc(m2)[p] >= sc(m1)[p]. Each process keeps the entrywise maximum
    of the send clocks it has delivered so far, so a delivery that violates
    nothing costs one lookup; only a violating one scans the earlier deliveries
    for its witnesses. Cost: O(d * n) plus O(d) per violating delivery.
    """
    stamps = send_stamps(events)
    found = []
    for q, ordered in first_deliveries(events).items():
        seen: dict[int, int] = {}  # entrywise max of the send clocks delivered so far
        for i, later in enumerate(ordered):
            stamp = stamps.get(later.message)
            if stamp is None:
                continue
            p, c1 = stamp
            k = c1[p]
            if seen.get(p, 0) >= k:
                for earlier in ordered[:i]:
                    other = stamps.get(earlier.message)
                    if other is not None and other[1].get(p, 0) >= k:
                        why = "whose send happened"
                        found.append(_order_violation("causal", run, q, later, earlier, why))
                        if summary:
                            break
            for key, value in c1.items():
                if value > seen.get(key, 0):
                    seen[key] = value
    return found


Shared = list[tuple[MessageId, Event, Event]]


def _shared_deliveries(events: Sequence[Event]) -> dict[tuple[int, int], Shared]:
    """(p, q), p < q -> the messages both delivered (first) in one segment, in p's order,
    with p's and q's deliveries of each."""
    segment = segments(events)
    position = {q: {d.message: d for d in ds} for q, ds in first_deliveries(events).items()}
    where: dict[MessageId, list[int]] = defaultdict(list)
    for q in sorted(position):
        for m in position[q]:
            where[m].append(q)
    common: dict[tuple[int, int], Shared] = defaultdict(list)
    for p in sorted(position):
        for m, dp in position[p].items():
            procs = where[m]
            if len(procs) > 1:
                for q in procs:
                    dq = position[q][m]
                    sp = segment[(p, dp.seq)]
                    if q > p and sp is not None and sp == segment[(q, dq.seq)]:
                        common[(p, q)].append((m, dp, dq))
    return common


def _crossed(shared: Shared, summary: bool) -> list[tuple[int, int]]:
    """(i, j): indices into ``shared`` of m1 before m2 at p that q delivered the other way
    round (with ``summary``, one per j: the m1 that q delivered last)."""
    seen: list[tuple[int, int]] = []  # sorted (q's position, index in p's order)
    pairs: list[tuple[int, int]] = []
    for j, (_, _, dq) in enumerate(shared):
        at = bisect.bisect_right(seen, (dq.seq, len(shared)))
        if summary and at < len(seen):
            pairs.append((seen[-1][1], j))
        elif not summary:
            pairs.extend((i, j) for _, i in seen[at:])
        if at == len(seen):
            seen.append((dq.seq, j))
        else:
            bisect.insort(seen, (dq.seq, j))
    return pairs if summary else sorted(pairs)


def check_total(events: Sequence[Event], run: str = "", summary: bool = False) -> list[Violation]:
    """(p, q, m1, m2), p < q: p delivers m1 before m2, q delivers m2 first.

    With ``summary``, one row per violating (p, q, m2), its witness the m1 that q
    delivered last.

    Only messages delivered at two or more processes are compared. For each pair
    of processes, the messages both delivered are walked in p's order while q's
    positions seen so far are kept sorted, so the earlier messages that q
    delivered later are found by bisection: O(c log c) per pair for c common
    messages, plus the violations reported (in the pairwise order).

    In a run with view events two processes are compared only on messages both
    delivered (first) in the same segment (``mailroom.trace.history.segments``).
    """
    found = []
    for (p, q), shared in sorted(_shared_deliveries(events).items()):
        for i, j in _crossed(shared, summary):
            m1, p1, q1 = shared[i]
            m2, p2, q2 = shared[j]
            found.append(
                Violation(
                    "total",
                    run,
                    (p, q),
                    (m1, m2),
                    (p1.seq, p2.seq, q1.seq, q2.seq),
                    f"P{p} delivered {m1} before {m2}, P{q} the other way round",
                )
            )
    return found


def _by_message(item: tuple[MessageId, Event]) -> tuple[int, int]:
    return item[0].origin, item[0].seq


def check_liveness(
    events: Sequence[Event], run: str = "", in_flight: float | None = None
) -> list[Violation]:
    """(q, m): q a destination of m that never delivered it.

    With ``in_flight`` = T, a message sent less than T before the run's last
    timed event is still in flight, not missing (as Spark's ``in_flight``).

    A send that names its view V (group membership) is owed only to the
    destinations that installed V and then V's successor, and only if its sender did.
    """
    kept = successions(events)
    succ = next_views(events)
    delivered = {(e.process, e.message) for e in events if e.kind == "deliver"}
    times = [e.time for e in events if e.time is not None]
    cutoff = max(times) - in_flight if in_flight is not None and times else None
    found = []
    for m, s in sorted(sends(events).items(), key=_by_message):
        if cutoff is not None and s.time is not None and s.time > cutoff:
            continue
        owed = s.dest
        if s.view is not None:
            nxt = succ.get(s.view)
            survived = (s.process, s.view, nxt) in kept
            owed = tuple(q for q in s.dest if survived and (q, s.view, nxt) in kept)
        for q in owed:
            if (q, m) not in delivered:
                found.append(
                    Violation("liveness", run, (q,), (m,), (s.seq,), f"P{q} never delivered {m}")
                )
    return found
