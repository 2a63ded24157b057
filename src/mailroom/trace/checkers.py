"""Reference checkers: the properties of docs/story.md over a trace, short enough to read.

Happens-before is computed from what the application sees, send and deliver
events: a process's events are ordered by ``seq``, and the send of
m happens before every delivery of m. Receive events are ignored.

Each violation is one row with its witness. The sets are canonical, so other
checkers (Spark) can be compared with these exactly:

- integrity: (q, m) delivered at q but never sent, or q not among its
  destinations, or delivered at q more than once (one row per extra delivery);
- fifo: (q, m1, m2) with the same origin, m1 sent before m2, q delivers m2 first;
- causal: (q, m1, m2) with send(m1) -> send(m2), q delivers m2 first;
- total: (p, q, m1, m2) with p < q, p delivers m1 before m2, q delivers m2 first;
- liveness: (q, m) with q a destination of m that never delivered it.

Group membership (trace events of kind "view": a process installs view ``view``
with members ``dest``) adds four properties; a process's *segment* of an event is
(the view it installed last before it, the view it installs next after it):

- view_agreement: (p, q, k), p < q, both installed view k (first time) with
  different members; and (p, k1, k2): p installed k2 right after k1 <= k2;
- self_inclusion: (p, k): p installed view k without being a member;
- same_view: (q, m): q delivered m in a view (the delivery's ``view``) other
  than the one m was sent in (its send's ``view``);
- virtual_synchrony: (p, q, m), p < q, both installed V and then V' with
  nothing between, V' being V's successor (the next higher view id installed in
  the run), and one of them delivered m between the two, the other not (m sent
  to both: a unicast to one of them is not compared).

Runs with view events are scoped as group membership needs (non-uniformity: a
process that crashes or is excluded may have delivered what the survivors did
not): total compares two processes' deliveries only within segments both have,
and never in a segment that a process left into another view than the successor
(it was excluded and came back); liveness owes a message sent in view V (its
send's ``view``) only to the destinations that installed V and then V's
successor, and only if its sender did. Runs without view events have every
segment (None, None) and no send ``view``: the rules above.

Two modes, as the Spark checks have (``mailroom.spark.checks``): "full" reports
every violating pair (the sets above); "summary" reports one row per violating
later delivery (fifo, causal) or per violating (p, q, m2) (total), each with one
witness from the full set, chosen exactly as Spark's summary chooses it (fifo:
the earlier delivery with the highest seq from that origin; causal: the first
earlier delivery whose send followed; total: the m1 that q delivered last).
Integrity and liveness rows are the same in both modes. So both engines report
the same numbers for the same trace in the same mode; ``count_words`` names
what a count counts ("violating pairs" or "violating deliveries").
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import TypeVar

import attrs

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event

T = TypeVar("T")

PROPERTIES = ("integrity", "fifo", "causal", "total", "liveness")
#: The group membership properties, checked on traces with view events.
VIEW_PROPERTIES = ("view_agreement", "self_inclusion", "same_view", "virtual_synchrony")
#: Every property the reference checkers know.
ALL_PROPERTIES = (*PROPERTIES, *VIEW_PROPERTIES)
MODES = ("summary", "full")

#: What one violation row counts, per property: (full mode, summary mode).
_UNITS = {
    "integrity": ("violating deliveries", "violating deliveries"),
    "fifo": ("violating pairs", "violating deliveries"),
    "causal": ("violating pairs", "violating deliveries"),
    "total": ("violating pairs", "violating deliveries"),
    "liveness": ("missing deliveries", "missing deliveries"),
    "clock": ("bad clocks", "bad clocks"),
    "view_agreement": ("bad installations", "bad installations"),
    "self_inclusion": ("bad installations", "bad installations"),
    "same_view": ("violating deliveries", "violating deliveries"),
    "virtual_synchrony": ("missing deliveries", "missing deliveries"),
}
_SINGULAR = {"deliveries": "delivery", "pairs": "pair", "clocks": "clock"}


def count_words(prop: str, mode: str, count: int) -> str:
    """A property's verdict in words: "ok", or the count and what it counts in ``mode``."""
    if not count:
        return "ok"
    full, summary = _UNITS.get(prop, ("violations", "violations"))
    unit = summary if mode == "summary" else full
    if count == 1:
        head, _, last = unit.rpartition(" ")
        unit = f"{head} {_SINGULAR.get(last, last.removesuffix('s'))}".strip()
    return f"{count} {unit}"


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


@attrs.frozen
class Report:
    """Violations per property for the properties that were checked.

    ``mode`` says what a count counts (see ``count_words``); ``not_promised``
    lists properties left unchecked because the trace's protocol does not
    promise them (shown, never a failure); ``protocol`` names that protocol.
    """

    checked: tuple[str, ...]
    violations: dict[str, list[Violation]]
    mode: str = "full"
    not_promised: tuple[str, ...] = ()
    protocol: str | None = None

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def count(self, prop: str) -> int:
        return len(self.violations.get(prop, []))

    def summary(self, k: int = 3) -> str:
        """One line per property (its count in words, or "ok"), with up to ``k`` witnesses."""
        lines = []
        for prop in self.checked:
            found = self.violations[prop]
            lines.append(f"{prop:10s} {count_words(prop, self.mode, len(found))}")
            lines.extend(f"    {v.reason}" for v in found[:k])
        lines.extend(not_promised_lines(self.not_promised, self.protocol))
        return "\n".join(lines)


def not_promised_lines(props: Iterable[str], protocol: str | None) -> list[str]:
    """The lines naming properties that were not checked because nothing promised them."""
    by = f" by {protocol}" if protocol else ""
    return [f"{prop:10s} not promised{by} (not checked)" for prop in props]


def by_run(events: Iterable[Event]) -> dict[str, list[Event]]:
    runs: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        runs[e.run].append(e)
    return dict(runs)


def _histories(events: Sequence[Event]) -> dict[int, list[Event]]:
    hist: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        hist[e.process].append(e)
    for h in hist.values():
        h.sort(key=lambda e: e.seq)
    return hist


def _deliveries(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's deliver events in order."""
    return {p: [e for e in h if e.kind == "deliver"] for p, h in _histories(events).items()}


def _sends(events: Sequence[Event]) -> dict[MessageId, Event]:
    return {e.message: e for e in events if e.kind == "send"}


Segment = tuple[int | None, int | None] | None


def _next_views(events: Sequence[Event]) -> dict[int, int]:
    """Each view id installed in the run -> the next higher one installed (its successor)."""
    ids = sorted({e.view for e in events if e.kind == "view" and e.view is not None})
    return dict(pairwise(ids))


def _segments(events: Sequence[Event]) -> dict[tuple[int, int], Segment]:
    """(process, seq) of each event -> (view installed last before it, view installed next),
    or None when the process left that view into another view than its successor (it was
    excluded and came back): such a segment is shared with no one.

    Both are None in a run without view events, so every event shares one segment.
    """
    succ = _next_views(events)
    out: dict[tuple[int, int], Segment] = {}
    for p, h in _histories(events).items():
        before: list[int | None] = []
        last: int | None = None
        for e in h:
            before.append(last)
            if e.kind == "view":
                last = e.view
        after: int | None = None
        for e, previous in zip(reversed(h), reversed(before), strict=True):
            broken = previous is not None and after is not None and succ.get(previous) != after
            out[(p, e.seq)] = None if broken else (previous, after)
            if e.kind == "view":
                after = e.view
    return out


def _installs(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's view events (those that name their view) in order."""
    return {
        p: [e for e in h if e.kind == "view" and e.view is not None]
        for p, h in _histories(events).items()
    }


def _successions(events: Sequence[Event]) -> set[tuple[int, int, int]]:
    """(process, V, V') for each process that installed V and then V' with no view between,
    V' being V's successor (the next higher view id installed in the run)."""
    succ = _next_views(events)
    return {
        (p, a.view, b.view)
        for p, views in _installs(events).items()
        for a, b in pairwise(views)
        if a.view is not None and b.view is not None and succ.get(a.view) == b.view
    }


def propagate_clocks(
    histories: Mapping[int, Sequence[T]],
    kind: Callable[[T], str],
    message: Callable[[T], Hashable],
    sent: Container[Hashable],
) -> Iterator[tuple[T, dict[int, int] | None]]:
    """Vector time of every send and deliver event, from the processes' histories.

    A process ticks its own entry at each send and deliver, and a delivery first
    takes the entrywise max with its message's send; receive and view events are
    skipped.
    Yields (event, clock after it) in an order that respects happens-before. The
    deliveries of messages never sent get no merge; events stuck behind the
    delivery of a message whose send comes later (no real run shows one) are
    yielded last with None.
    """
    clocks: dict[Hashable, dict[int, int]] = {}
    now: dict[int, dict[int, int]] = {p: {} for p in histories}
    cursor = dict.fromkeys(histories, 0)
    progress = True
    while progress:
        progress = False
        for p, h in histories.items():
            while cursor[p] < len(h):
                e = h[cursor[p]]
                what = kind(e)
                if what in ("send", "deliver"):
                    vc = now[p]
                    m = message(e)
                    if what == "deliver" and m in sent:
                        if m not in clocks:
                            break  # its send is not processed yet
                        for k, v in clocks[m].items():
                            if v > vc.get(k, 0):
                                vc[k] = v
                    vc[p] = vc.get(p, 0) + 1
                    stamp = dict(vc)
                    if what == "send":
                        clocks[m] = stamp
                    yield e, stamp
                cursor[p] += 1
                progress = True
    for p, h in histories.items():
        for e in h[cursor[p] :]:
            if kind(e) in ("send", "deliver"):
                yield e, None


def send_clocks(events: Sequence[Event]) -> dict[MessageId, dict[int, int]]:
    """Vector timestamps of send events, computed from send and deliver events."""
    stamped = propagate_clocks(
        _histories(events), _kind, _message, {e.message for e in events if e.kind == "send"}
    )
    return {e.message: vc for e, vc in stamped if e.kind == "send" and vc is not None}


def _kind(e: Event) -> str:
    return e.kind


def _message(e: Event) -> MessageId:
    return e.message


def happened_before(a: dict[int, int], b: dict[int, int]) -> bool:
    """a -> b for the vector timestamps of two distinct events."""
    return a != b and all(v <= b.get(k, 0) for k, v in a.items())


def check_integrity(events: Sequence[Event], run: str = "") -> list[Violation]:
    sends = _sends(events)
    found = []
    for q, ds in _deliveries(events).items():
        seen: set[MessageId] = set()
        for d in ds:
            m = d.message
            if m not in sends:
                reason = f"P{q} delivered {m}, which was never sent"
            elif q not in sends[m].dest:
                reason = f"P{q} delivered {m}, which was sent only to {list(sends[m].dest)}"
            elif m in seen:
                reason = f"P{q} delivered {m} more than once"
            else:
                seen.add(m)
                continue
            seen.add(m)
            found.append(Violation("integrity", run, (q,), (m,), (d.seq,), reason))
    return found


def _first_deliveries(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's first delivery of each message, in delivery order."""
    out = {}
    for q, ds in _deliveries(events).items():
        first: dict[MessageId, Event] = {}
        for d in ds:
            first.setdefault(d.message, d)
        out[q] = list(first.values())
    return out


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
    for q, ordered in _first_deliveries(events).items():
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


def _send_stamps(events: Sequence[Event]) -> dict[MessageId, tuple[int, dict[int, int]]]:
    """Each message's send clock and the process that sent it (as ``send_clocks``)."""
    stamped = propagate_clocks(
        _histories(events), _kind, _message, {e.message for e in events if e.kind == "send"}
    )
    return {e.message: (e.process, vc) for e, vc in stamped if e.kind == "send" and vc is not None}


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
    stamps = _send_stamps(events)
    found = []
    for q, ordered in _first_deliveries(events).items():
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
                        found.append(
                            _order_violation(
                                "causal", run, q, later, earlier, "whose send happened"
                            )
                        )
                        if summary:
                            break
            for key, value in c1.items():
                if value > seen.get(key, 0):
                    seen[key] = value
    return found


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
    delivered (first) in the same segment (see the header).
    """
    segment = _segments(events)
    position = {q: {d.message: d for d in ds} for q, ds in _first_deliveries(events).items()}
    where: dict[MessageId, list[int]] = defaultdict(list)
    for q in sorted(position):
        for m in position[q]:
            where[m].append(q)
    common: dict[tuple[int, int], list[tuple[MessageId, Event, Event]]] = defaultdict(list)
    for p in sorted(position):
        for m, dp in position[p].items():
            procs = where[m]
            if len(procs) > 1:
                for q in procs:
                    dq = position[q][m]
                    sp = segment[(p, dp.seq)]
                    if q > p and sp is not None and sp == segment[(q, dq.seq)]:
                        common[(p, q)].append((m, dp, dq))
    found = []
    for (p, q), shared in sorted(common.items()):
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
        for i, j in pairs if summary else sorted(pairs):
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
    successions = _successions(events)
    succ = _next_views(events)
    delivered = {(e.process, e.message) for e in events if e.kind == "deliver"}
    times = [e.time for e in events if e.time is not None]
    cutoff = max(times) - in_flight if in_flight is not None and times else None
    found = []
    for m, s in sorted(_sends(events).items(), key=_by_message):
        if cutoff is not None and s.time is not None and s.time > cutoff:
            continue
        owed = s.dest
        if s.view is not None:
            nxt = succ.get(s.view)
            survived = (s.process, s.view, nxt) in successions
            owed = tuple(q for q in s.dest if survived and (q, s.view, nxt) in successions)
        for q in owed:
            if (q, m) not in delivered:
                found.append(
                    Violation("liveness", run, (q,), (m,), (s.seq,), f"P{q} never delivered {m}")
                )
    return found


def _view_id(k: int | None) -> MessageId:
    """A view named as a message id, as view events carry it: [0, view id]."""
    assert k is not None  # _installs keeps only view events that name their view
    return MessageId(0, k)


def check_view_agreement(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, q, k), p < q: both installed view k (first time each) with different members;
    (p, k1, k2): p installed k2 right after k1, and k2 <= k1."""
    found = []
    first: dict[int, dict[int, Event]] = defaultdict(dict)  # view id -> process -> install
    installs = _installs(events)
    for p in sorted(installs):
        views = installs[p]
        for e in views:
            if e.view is not None:
                first[e.view].setdefault(p, e)
        for a, b in pairwise(views):
            if a.view is not None and b.view is not None and b.view <= a.view:
                found.append(
                    Violation(
                        "view_agreement",
                        run,
                        (p,),
                        (_view_id(a.view), _view_id(b.view)),
                        (a.seq, b.seq),
                        f"P{p} installed view {b.view} after view {a.view}",
                    )
                )
    for k in sorted(first):
        by = first[k]
        for p in sorted(by):
            for q in sorted(by):
                mp, mq = sorted(set(by[p].dest)), sorted(set(by[q].dest))
                if p < q and mp != mq:
                    found.append(
                        Violation(
                            "view_agreement",
                            run,
                            (p, q),
                            (_view_id(k),),
                            (by[p].seq, by[q].seq),
                            f"P{p} installed view {k} as {mp} and P{q} as {mq}",
                        )
                    )
    return found


def check_self_inclusion(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, k): p installed view k without being one of its members."""
    return [
        Violation(
            "self_inclusion",
            run,
            (e.process,),
            (_view_id(e.view),),
            (e.seq,),
            f"P{e.process} installed view {e.view} {list(e.dest)}, which does not include it",
        )
        for p, views in sorted(_installs(events).items())
        for e in views
        if p not in e.dest
    ]


def _in_view(view: int | None) -> str:
    return "outside any view" if view is None else f"in view {view}"


def check_same_view(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(q, m): q delivered m in another view than the one m was sent in (field ``view``)."""
    sends = _sends(events)
    found = []
    for q, ds in sorted(_deliveries(events).items()):
        for d in ds:
            s = sends.get(d.message)
            if s is not None and s.view != d.view:
                found.append(
                    Violation(
                        "same_view",
                        run,
                        (q,),
                        (d.message,),
                        (d.seq,),
                        f"P{q} delivered {d.message} {_in_view(d.view)}, "
                        f"but it was sent {_in_view(s.view)}",
                    )
                )
    return found


def check_virtual_synchrony(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, q, m), p < q: both installed V and then V', one delivered m between, the other not.

    The messages a process delivered in V are those it delivered between its
    installations of V and V' (by position, whatever their ``view`` field says).
    A message sent to only one of the two (a unicast) is not compared. V' must be V's
    successor (the next higher view id installed in the run): two processes excluded
    from V that came back together are not compared on what they delivered in V.
    """
    sends = _sends(events)
    succ = _next_views(events)
    groups: dict[tuple[int, int], dict[int, dict[MessageId, Event]]] = defaultdict(dict)
    for p, h in _histories(events).items():
        current: int | None = None
        got: dict[MessageId, Event] = {}
        for e in h:
            if e.kind == "view" and e.view is not None:
                if current is not None and succ.get(current) == e.view:
                    merged = groups[(current, e.view)].setdefault(p, {})
                    for m, d in got.items():
                        merged.setdefault(m, d)
                current, got = e.view, {}
            elif e.kind == "deliver" and current is not None:
                got.setdefault(e.message, e)
    found = []
    for (v, nxt), members in sorted(groups.items()):
        for p in sorted(members):
            for q in sorted(members):
                if p == q:
                    continue
                for m, d in members[p].items():
                    s = sends.get(m)
                    if m not in members[q] and (s is None or {p, q} <= set(s.dest)):
                        found.append(
                            Violation(
                                "virtual_synchrony",
                                run,
                                (min(p, q), max(p, q)),
                                (m,),
                                (d.seq,),
                                f"P{p} delivered {m} in view {v} and P{q} did not; "
                                f"both installed view {nxt} next",
                            )
                        )
    return found


_ORDERED: dict[str, Callable[[Sequence[Event], str, bool], list[Violation]]] = {
    "fifo": check_fifo,
    "causal": check_causal,
    "total": check_total,
}

CHECKERS: dict[str, Callable[[Sequence[Event], str], list[Violation]]] = {
    "integrity": check_integrity,
    "fifo": check_fifo,
    "causal": check_causal,
    "total": check_total,
    "liveness": check_liveness,
    "view_agreement": check_view_agreement,
    "self_inclusion": check_self_inclusion,
    "same_view": check_same_view,
    "virtual_synchrony": check_virtual_synchrony,
}


def check(
    events: Iterable[Event],
    properties: Sequence[str] | None = None,
    *,
    mode: str = "full",
    in_flight: float | None = None,
    not_promised: Sequence[str] = (),
    protocol: str | None = None,
) -> Report:
    """Check ``properties`` on every run in ``events``, in ``mode`` "full" or "summary".

    ``properties`` defaults to ``PROPERTIES``, plus ``VIEW_PROPERTIES`` when a run
    has view events. ``not_promised`` and ``protocol`` are carried into the report
    for its summary.
    """
    events = list(events)
    if properties is None:
        views = any(e.kind == "view" for e in events)
        properties = ALL_PROPERTIES if views else PROPERTIES
    unknown = [p for p in properties if p not in CHECKERS]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {list(ALL_PROPERTIES)}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    summary = mode == "summary"
    violations: dict[str, list[Violation]] = {p: [] for p in properties}
    for run, evs in sorted(by_run(events).items()):
        for prop in properties:
            if prop == "liveness":
                violations[prop].extend(check_liveness(evs, run, in_flight))
            elif prop in ("fifo", "causal", "total"):
                violations[prop].extend(_ORDERED[prop](evs, run, summary))
            else:
                violations[prop].extend(CHECKERS[prop](evs, run))
    return Report(tuple(properties), violations, mode, tuple(not_promised), protocol)
