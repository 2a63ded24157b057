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
  last view; a message a member sent during a flush is held at the sender (a
  dashed arc) until it delivers it in the next view.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import attrs

from mailroom.core.messages import MessageId
from mailroom.diagram.text import message_names
from mailroom.diagram.views import (
    lifelines,
    processes,
    recipients,
    recovered,
    shared_rows,
    view_label,
    view_members,
)
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
    names = dict(names) if names is not None else message_names(events)
    procs = tuple(processes(events))
    labels = labels or {}
    bad_events, bad_copies = violation_targets(violations, events)
    col = {p: float(i) for i, p in enumerate(procs)}

    row_of: dict[int, float] = {}  # index in events -> row
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
        row_of[i] = r
        last[e.process] = (e, r)
    rows = int(row) + 2 if events else 1

    def name(m: MessageId) -> str:
        return names.get(m, str(m))

    sends: dict[MessageId, tuple[Event, float]] = {}
    receipts: dict[tuple[MessageId, int], list[float]] = {}
    deliveries: dict[tuple[MessageId, int], float] = {}
    marks: list[Mark] = []
    for i, e in enumerate(events):
        r = row_of[i]
        point = (col[e.process], r)
        if e.kind == "view":
            marks.append(Mark("view", view_label(e.view, e.dest), e.process, point))
            continue
        if e.kind == "send":
            sends.setdefault(e.message, (e, r))
        elif e.kind == "receive":
            receipts.setdefault((e.message, e.process), []).append(r)
        elif e.kind == "deliver":
            deliveries.setdefault((e.message, e.process), r)
        marks.append(
            Mark(e.kind, name(e.message), e.process, point, (e.process, e.seq) in bad_events)
        )

    members = view_members(events)
    flushed = recovered(events)
    arrows: list[Arrow] = []
    for m, (s, srow) in sends.items():
        start = (col[s.process], srow)
        for q in recipients(s, members):
            bad = (m, q) in bad_copies
            got = receipts.get((m, q), [])
            done = deliveries.get((m, q))
            x = col[q]
            if q == s.process and not got:
                if s.view is not None and done is not None and done > srow:
                    # a group message sent while the view changed waits for the next view
                    arrows.append(Arrow("held", name(m), m, q, start, (x, done), bad))
                continue  # delivered to itself in the same step, or not at all
            if got:
                arrows.append(Arrow("message", name(m), m, q, start, (x, got[0]), bad))
                arrows.extend(
                    Arrow("duplicate", name(m), m, q, start, (x, later), False) for later in got[1:]
                )
                if done is None:
                    arrows.append(Arrow("held", name(m), m, q, (x, got[0]), (x, rows - 0.5), bad))
                elif done > got[0]:
                    arrows.append(Arrow("held", name(m), m, q, (x, got[0]), (x, done), bad))
            elif done is not None:
                kind = "recovered" if (m, q) in flushed else "message"
                arrows.append(Arrow(kind, name(m), m, q, start, (x, done), bad))
            else:
                # Never arrived: a short stub a third of the way towards q.
                end = (start[0] + (x - start[0]) / 3, srow + 0.6)
                arrows.append(Arrow("lost", name(m), m, q, start, end, bad))
    lines: list[tuple[float, float]] = []
    spans = lifelines(events)
    if spans:
        for p in procs:
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
    notes = tuple(_rename(f"[{v.property}] {v.reason}", names) for v in violations)
    return Layout(
        procs,
        tuple(labels.get(p, f"P{p}") for p in procs),
        rows,
        tuple(arrows),
        tuple(marks),
        notes,
        tuple(lines),
    )
