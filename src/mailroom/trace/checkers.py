"""Reference checkers: the properties of DESIGN.md over a trace, short enough to read.

Happens-before is computed from what the application sees, send and deliver
events (seed 002): a process's events are ordered by ``seq``, and the send of
m happens before every delivery of m. Receive events are ignored.

Each violation is one row with its witness. The sets are canonical, so other
checkers (Spark) can be compared with these exactly:

- integrity: (q, m) delivered at q but never sent, or q not among its
  destinations, or delivered at q more than once (one row per extra delivery);
- fifo: (q, m1, m2) with the same origin, m1 sent before m2, q delivers m2 first;
- causal: (q, m1, m2) with send(m1) -> send(m2), q delivers m2 first;
- total: (p, q, m1, m2) with p < q, p delivers m1 before m2, q delivers m2 first;
- liveness: (q, m) with q a destination of m that never delivered it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence
from typing import TypeVar

import attrs

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event

T = TypeVar("T")

PROPERTIES = ("integrity", "fifo", "causal", "total", "liveness")


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
    """Violations per property for the properties that were checked."""

    checked: tuple[str, ...]
    violations: dict[str, list[Violation]]

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def count(self, prop: str) -> int:
        return len(self.violations.get(prop, []))

    def summary(self) -> str:
        lines = []
        for prop in self.checked:
            found = self.violations[prop]
            verdict = "ok" if not found else f"{len(found)} violation(s)"
            lines.append(f"{prop:10s} {verdict}")
            lines.extend(f"    {v.reason}" for v in found[:3])
        return "\n".join(lines)


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


def propagate_clocks(
    histories: Mapping[int, Sequence[T]],
    kind: Callable[[T], str],
    message: Callable[[T], Hashable],
    sent: Container[Hashable],
) -> Iterator[tuple[T, dict[int, int] | None]]:
    """Vector time of every send and deliver event, from the processes' histories.

    A process ticks its own entry at each send and deliver, and a delivery first
    takes the entrywise max with its message's send; receive events are skipped.
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
                if what != "receive":
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
            if kind(e) != "receive":
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


def check_liveness(events: Sequence[Event], run: str = "") -> list[Violation]:
    delivered = {(e.process, e.message) for e in events if e.kind == "deliver"}
    found = []
    for m, s in sorted(_sends(events).items()):
        for q in s.dest:
            if (q, m) not in delivered:
                found.append(
                    Violation("liveness", run, (q,), (m,), (s.seq,), f"P{q} never delivered {m}")
                )
    return found


CHECKERS = {
    "integrity": check_integrity,
    "fifo": check_fifo,
    "causal": check_causal,
    "total": check_total,
    "liveness": check_liveness,
}


def check(events: Iterable[Event], properties: Sequence[str] = PROPERTIES) -> Report:
    """Check ``properties`` on every run in ``events``."""
    unknown = [p for p in properties if p not in CHECKERS]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {list(PROPERTIES)}")
    violations: dict[str, list[Violation]] = {p: [] for p in properties}
    for run, evs in sorted(by_run(events).items()):
        for prop in properties:
            violations[prop].extend(CHECKERS[prop](evs, run))
    return Report(tuple(properties), violations)
