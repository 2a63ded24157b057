"""The geometry of a space-time diagram, shared by the SVG and matplotlib renderers.

Rules, in words:

- One vertical line per process, left to right by pid; time runs downwards.
  Every event of the trace gets its own row, in trace order, except that a
  delivery that directly follows the receipt (or the send) of the same message
  at the same process shares that event's row: it happened in the same step.
- A message is an arrow from its send to each destination: to the first
  receipt there if the trace records receipts, else to the delivery.
- A message received before it could be delivered was "held in the mail room"
  (the dashed arrow of docs/story.md): a dashed segment runs down the receiver's line
  from the receipt to the delivery. One that was received but never delivered
  is held to the bottom of the diagram.
- A copy that never arrived (lost, or still in flight) is a short arrow
  ending in a cross. Later receipts of the same copy are duplicates, drawn faint.
- Violations from the checkers are highlighted: their deliveries are marked,
  and the arrows of the messages they name, into the processes they name, are red.
- Group membership (``mailroom.diagram.views``): a view installation is a mark
  of kind "view" named ``V2 {0,1}``; installations of one view at the same time
  share a row; a broadcast in a view goes to that view's members; a delivery the
  flush handed on is a "recovered" arrow; a process's line starts at its first
  event, and ends after its last one (a mark of kind "end") if it is not in the
  last view; a send recorded in a later view than its process is in (a trace that
  records a send at the call, not when it goes out) is held at the sender (a
  dashed arc) until it delivers it in that view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from mailroom.core.messages import MessageId
from mailroom.diagram.reading import Reading
from mailroom.diagram.views import recipients, shared_rows, view_label
from mailroom.trace.checkers import Violation
from mailroom.trace.events import Event

Point = tuple[float, float]

#: Arrow kinds: a message reaching its destination, a held interval, a lost
#: copy, a duplicate receipt, a message the flush handed on.
KINDS = ("message", "held", "lost", "duplicate", "recovered")


@attrs.frozen
class Arrow:
    """One arrow of the diagram, in layout units (x = process index, y = row)."""

    kind: str
    name: str
    message: MessageId
    dest: int
    start: Point
    end: Point
    bad: bool = False


@attrs.frozen
class Mark:
    """A dot for one event: ``kind`` is send, receive, deliver or view (``name`` is
    then ``V2 {0,1}``), or "end": the end of a line of a process out of the group."""

    kind: str
    name: str
    process: int
    at: Point
    bad: bool = False


@attrs.frozen
class Layout:
    """Everything a renderer needs; ``rows`` is the height in rows; ``lines`` (one per
    process, when the trace has views) says from which row to which row its line runs."""

    processes: tuple[int, ...]
    labels: tuple[str, ...]
    rows: int
    arrows: tuple[Arrow, ...]
    marks: tuple[Mark, ...]
    notes: tuple[str, ...] = ()
    lines: tuple[tuple[float, float], ...] = ()

    def line(self, process: int) -> tuple[float, float]:
        """The rows ``process``'s line runs between (top to bottom when not given)."""
        if self.lines:
            return self.lines[self.processes.index(process)]
        return (-0.35, float(self.rows))

    def x(self, process: int) -> float:
        return float(self.processes.index(process))


def violation_targets(
    violations: Iterable[Violation], events: Sequence[Event]
) -> tuple[set[tuple[int, int]], set[tuple[MessageId, int]]]:
    """The (process, seq) events and (message, dest) copies that violations name."""
    bad_events: set[tuple[int, int]] = set()
    bad_copies: set[tuple[MessageId, int]] = set()
    delivered_at = {(e.process, e.message): e.seq for e in events if e.kind == "deliver"}
    for v in violations:
        if v.property == "liveness":
            bad_copies.update((m, q) for m in v.messages for q in v.processes)
            continue
        for q in v.processes:
            for m in v.messages:
                if (q, m) in delivered_at:
                    bad_copies.add((m, q))
                    bad_events.add((q, delivered_at[(q, m)]))
    return bad_events, bad_copies


def _rename(text: str, names: Mapping[MessageId, str]) -> str:
    """Replace message ids (P1#1) in ``text`` by their diagram names (m3)."""
    for m in sorted(names, key=lambda m: -len(str(m))):
        text = text.replace(str(m), names[m])
    return text


def layout(
    events: Sequence[Event],
    *,
    labels: Mapping[int, str] | None = None,
    names: Mapping[MessageId, str] | None = None,
    violations: Iterable[Violation] = (),
) -> Layout:
    """Lay out one run's ``events`` (see the module docstring for the rules)."""
    read = Reading.of(events, names)
    labels = labels or {}
    bad_events, bad_copies = violation_targets(violations, events)
    row_of = _rows(events)
    rows = int(max(row_of)) + 2 if events else 1
    col = {p: float(i) for i, p in enumerate(read.processes)}
    ends = _Ends()
    marks = [ends.add(e, row_of[i], col, read, bad_events) for i, e in enumerate(events)]
    arrows = _arrows(ends, read, col, rows, bad_copies)
    lines = _lines(read, row_of, col, rows, marks)
    notes = tuple(_rename(f"[{v.property}] {v.reason}", read.names) for v in violations)
    return Layout(
        read.processes,
        tuple(labels.get(p, f"P{p}") for p in read.processes),
        rows,
        tuple(arrows),
        tuple(marks),
        notes,
        tuple(lines),
    )


def _rows(events: Sequence[Event]) -> list[float]:
    """Each event's row: its own, in trace order, unless it is a delivery in the same
    step as the receipt (or send) before it, or a view installation that shares a row."""
    row_of: list[float] = []
    last: dict[int, tuple[Event, float]] = {}
    row = -1.0
    shared = shared_rows(events)
    for i, e in enumerate(events):
        prev = last.get(e.process)
        same_step = (
            e.kind == "deliver"
            and prev is not None
            and prev[0].message == e.message
            and prev[0].kind in ("send", "receive")
            and i > 0
            and events[i - 1] is prev[0]
        )
        if same_step and prev is not None:
            r = prev[1]
        elif shared[i]:
            r = row
        else:
            row += 1.0
            r = row
        row_of.append(r)
        last[e.process] = (e, r)
    return row_of


@attrs.define
class _Ends:
    """Where the arrows start and end: each message's first send, the rows of its
    receipts and of its delivery at each process."""

    sends: dict[MessageId, tuple[Event, float]] = attrs.field(factory=dict)
    receipts: dict[tuple[MessageId, int], list[float]] = attrs.field(factory=dict)
    deliveries: dict[tuple[MessageId, int], float] = attrs.field(factory=dict)

    def add(
        self,
        e: Event,
        r: float,
        col: Mapping[int, float],
        read: Reading,
        bad_events: set[tuple[int, int]],
    ) -> Mark:
        """Take in event ``e``, at row ``r``; its mark."""
        point = (col[e.process], r)
        if e.kind == "view":
            return Mark("view", view_label(e.view, e.dest), e.process, point)
        if e.kind == "send":
            self.sends.setdefault(e.message, (e, r))
        elif e.kind == "receive":
            self.receipts.setdefault((e.message, e.process), []).append(r)
        elif e.kind == "deliver":
            self.deliveries.setdefault((e.message, e.process), r)
        return Mark(
            e.kind, read.name(e.message), e.process, point, (e.process, e.seq) in bad_events
        )


def _arrows(
    ends: _Ends,
    read: Reading,
    col: Mapping[int, float],
    rows: int,
    bad_copies: set[tuple[MessageId, int]],
) -> list[Arrow]:
    """The arrows of every copy of every message sent."""
    arrows: list[Arrow] = []
    for m, (s, srow) in ends.sends.items():
        name = read.name(m)
        start = (col[s.process], srow)
        for q in recipients(s, read.members):
            bad = (m, q) in bad_copies
            got = ends.receipts.get((m, q), [])
            done = ends.deliveries.get((m, q))
            x = col[q]
            if q == s.process and not got:
                if s.view is not None and done is not None and done > srow:
                    # a group message sent while the view changed waits for the next view
                    arrows.append(Arrow("held", name, m, q, start, (x, done), bad))
                continue  # delivered to itself in the same step, or not at all
            if got:
                arrows.append(Arrow("message", name, m, q, start, (x, got[0]), bad))
                arrows.extend(
                    Arrow("duplicate", name, m, q, start, (x, later), False) for later in got[1:]
                )
                if done is None:
                    arrows.append(Arrow("held", name, m, q, (x, got[0]), (x, rows - 0.5), bad))
                elif done > got[0]:
                    arrows.append(Arrow("held", name, m, q, (x, got[0]), (x, done), bad))
            elif done is not None:
                kind = "recovered" if (m, q) in read.recovered else "message"
                arrows.append(Arrow(kind, name, m, q, start, (x, done), bad))
            else:
                # Never arrived: a short stub a third of the way towards q.
                end = (start[0] + (x - start[0]) / 3, srow + 0.6)
                arrows.append(Arrow("lost", name, m, q, start, end, bad))
    return arrows


def _lines(
    read: Reading, row_of: Sequence[float], col: Mapping[int, float], rows: int, marks: list[Mark]
) -> list[tuple[float, float]]:
    """Where each process's line runs (none given for a trace without views); a line
    that ends gets an "end" mark in ``marks``."""
    lines: list[tuple[float, float]] = []
    spans = read.lifelines
    if not spans:
        return lines
    for p in read.processes:
        span = spans.get(p)
        if span is None:  # named in a destination only: no line of its own
            lines.append((-0.35, -0.35))
            continue
        top = -0.35 if row_of[span.first] == 0 else row_of[span.first] - 0.35
        if span.ended:
            stop = row_of[span.last] + 0.5
            marks.append(Mark("end", "out", p, (col[p], stop)))
            lines.append((top, stop))
        else:
            lines.append((top, float(rows)))
    return lines
