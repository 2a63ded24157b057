"""The reference checks of the group membership properties (trace events of kind "view").

A process installs view ``view`` with members ``dest``; ``mailroom.trace.properties``
says what each property promises and what a row is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event
from mailroom.trace.history import deliveries, histories, installs, next_views, sends
from mailroom.trace.violation import Violation


def _view_id(k: int | None) -> MessageId:
    """A view named as a message id, as view events carry it: [0, view id]."""
    assert k is not None  # installs keeps only view events that name their view
    return MessageId(0, k)


def _going_back(p: int, views: list[Event], run: str) -> list[Violation]:
    """(p, k1, k2): p installed k2 right after k1, and k2 <= k1."""
    return [
        Violation(
            "view_agreement",
            run,
            (p,),
            (_view_id(a.view), _view_id(b.view)),
            (a.seq, b.seq),
            f"P{p} installed view {b.view} after view {a.view}",
        )
        for a, b in pairwise(views)
        if a.view is not None and b.view is not None and b.view <= a.view
    ]


def check_view_agreement(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, q, k), p < q: both installed view k (first time each) with different members;
    (p, k1, k2): p installed k2 right after k1, and k2 <= k1."""
    found = []
    first: dict[int, dict[int, Event]] = defaultdict(dict)  # view id -> process -> install
    installed = installs(events)
    for p in sorted(installed):
        for e in installed[p]:
            if e.view is not None:
                first[e.view].setdefault(p, e)
        found += _going_back(p, installed[p], run)
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
        for p, views in sorted(installs(events).items())
        for e in views
        if p not in e.dest
    ]


def _in_view(view: int | None) -> str:
    return "outside any view" if view is None else f"in view {view}"


def check_same_view(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(q, m): q delivered m in another view than the one m was sent in (field ``view``).

    The fields themselves are checked against each process's installations by
    ``mailroom.trace.records.misrecorded_views`` (invalid rows, never trusted silently).
    """
    sent = sends(events)
    found = []
    for q, ds in sorted(deliveries(events).items()):
        for d in ds:
            s = sent.get(d.message)
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


def _delivered_between(
    events: Sequence[Event],
) -> dict[tuple[int, int], dict[int, dict[MessageId, Event]]]:
    """(V, V') -> process -> the messages it delivered between installing V and then V's
    successor V' (first delivery of each, whatever its ``view`` field says)."""
    succ = next_views(events)
    groups: dict[tuple[int, int], dict[int, dict[MessageId, Event]]] = defaultdict(dict)
    for p, h in histories(events).items():
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
    return groups


def check_virtual_synchrony(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, q, m), p < q: both installed V and then V', one delivered m between, the other not.

    The messages a process delivered in V are those it delivered between its
    installations of V and V' (by position, whatever their ``view`` field says).
    A message sent to only one of the two (a unicast) is not compared. V' must be V's
    successor (the next higher view id installed in the run): two processes excluded
    from V that came back together are not compared on what they delivered in V.
    """
    sent = sends(events)
    found = []
    for (v, nxt), members in sorted(_delivered_between(events).items()):
        for p in sorted(members):
            for q in sorted(members):
                if p == q:
                    continue
                for m, d in members[p].items():
                    s = sent.get(m)
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
