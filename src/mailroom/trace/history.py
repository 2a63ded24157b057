"""What the reference checkers read off a trace: histories, sends, views and clocks.

A process's *history* is its events in ``seq`` order. Happens-before is computed
from what the application sees, send and deliver events: a process's events are
ordered by ``seq``, and the send of m happens before every delivery of m.

Group membership: a process's *segment* of an event is (the view it installed
last before it, the view it installs next after it); a view's *successor* is the
next higher view id installed in the run.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import TypeVar

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event

T = TypeVar("T")

#: (view installed last before an event, view installed next), or None (see ``segments``).
Segment = tuple[int | None, int | None] | None


def by_run(events: Iterable[Event]) -> dict[str, list[Event]]:
    runs: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        runs[e.run].append(e)
    return dict(runs)


def histories(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's events in ``seq`` order."""
    hist: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        hist[e.process].append(e)
    for h in hist.values():
        h.sort(key=lambda e: e.seq)
    return hist


def deliveries(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's deliver events in order."""
    return {p: [e for e in h if e.kind == "deliver"] for p, h in histories(events).items()}


def first_deliveries(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's first delivery of each message, in delivery order."""
    out = {}
    for q, ds in deliveries(events).items():
        first: dict[MessageId, Event] = {}
        for d in ds:
            first.setdefault(d.message, d)
        out[q] = list(first.values())
    return out


def sends(events: Sequence[Event]) -> dict[MessageId, Event]:
    """Each message's send (the last one listed, if a message is sent twice)."""
    return {e.message: e for e in events if e.kind == "send"}


def next_views(events: Sequence[Event]) -> dict[int, int]:
    """Each view id installed in the run -> the next higher one installed (its successor)."""
    ids = sorted({e.view for e in events if e.kind == "view" and e.view is not None})
    return dict(pairwise(ids))


def _installed_before(history: Sequence[Event]) -> list[int | None]:
    """For each event of a history, the view its process installed last before it."""
    before: list[int | None] = []
    last: int | None = None
    for e in history:
        before.append(last)
        if e.kind == "view":
            last = e.view
    return before


def views_at(events: Sequence[Event]) -> dict[tuple[int, int], int | None]:
    """(process, seq) of each event -> the view its process installed last before it."""
    return {
        (p, e.seq): v
        for p, h in histories(events).items()
        for e, v in zip(h, _installed_before(h), strict=True)
    }


def segments(events: Sequence[Event]) -> dict[tuple[int, int], Segment]:
    """(process, seq) of each event -> (view installed last before it, view installed next),
    or None when the process left that view into another view than its successor (it was
    excluded and came back): such a segment is shared with no one.

    Both are None in a run without view events, so every event shares one segment.
    """
    succ = next_views(events)
    out: dict[tuple[int, int], Segment] = {}
    for p, h in histories(events).items():
        before = _installed_before(h)
        after: int | None = None
        for e, previous in zip(reversed(h), reversed(before), strict=True):
            broken = previous is not None and after is not None and succ.get(previous) != after
            out[(p, e.seq)] = None if broken else (previous, after)
            if e.kind == "view":
                after = e.view
    return out


def installs(events: Sequence[Event]) -> dict[int, list[Event]]:
    """Each process's view events (those that name their view) in order."""
    return {
        p: [e for e in h if e.kind == "view" and e.view is not None]
        for p, h in histories(events).items()
    }


def successions(events: Sequence[Event]) -> set[tuple[int, int, int]]:
    """(process, V, V') for each process that installed V and then V' with no view between,
    V' being V's successor (the next higher view id installed in the run)."""
    succ = next_views(events)
    return {
        (p, a.view, b.view)
        for p, views in installs(events).items()
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


def _kind(e: Event) -> str:
    return e.kind


def _message(e: Event) -> MessageId:
    return e.message


def send_stamps(events: Sequence[Event]) -> dict[MessageId, tuple[int, dict[int, int]]]:
    """Each message's send clock (computed from send and deliver events) and its sender."""
    stamped = propagate_clocks(
        histories(events), _kind, _message, {e.message for e in events if e.kind == "send"}
    )
    return {e.message: (e.process, vc) for e, vc in stamped if e.kind == "send" and vc is not None}


def send_clocks(events: Sequence[Event]) -> dict[MessageId, dict[int, int]]:
    """Vector timestamps of send events, computed from send and deliver events."""
    return {m: vc for m, (_, vc) in send_stamps(events).items()}


def happened_before(a: dict[int, int], b: dict[int, int]) -> bool:
    """a -> b for the vector timestamps of two distinct events."""
    return a != b and all(v <= b.get(k, 0) for k, v in a.items())
