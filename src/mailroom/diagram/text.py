"""Space-time diagrams for the terminal.

One row per event, in the order the trace lists them; one column per process.
A message is named m1, m2, ... in order of sending. A cell reads ``send m1 ─▶ P2``,
``m2 ▶ recv`` (a packet arrived), or ``deliver m2``. While a process holds a
received but undelivered message, its idle cells show ``┊ m3 held`` (the dashed
"held in the mail room" arrow of the diagrams); so does a group member's own
message that it delivers later than it sends it (sent during a flush, it waits
for the next view). Deliveries that take part in a
violation are marked ``✗``. The first column is the event's time, or with
``steps`` the number of the step that caused it (a steady column for a story
told step by step).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from mailroom.core.messages import MessageId
from mailroom.diagram.reading import Reading, message_names
from mailroom.diagram.views import recipients, shared_rows, view_label
from mailroom.trace.checkers import Violation
from mailroom.trace.events import Event

__all__ = ["message_names", "render_text"]


def _cell(e: Event, name: str, bad: bool, dest: tuple[int, ...], flush: bool) -> str:
    if e.kind == "view":
        return view_label(e.view, e.dest)
    if e.kind == "send":
        target = "all" if len(dest) > 1 else f"P{dest[0]}"
        return f"send {name} ─▶ {target}"
    if e.kind == "receive":
        return f"{name} ▶ recv"
    return f"deliver {name}" + (" (flush)" if flush else "") + (" ✗" if bad else "")


def _waiting_sends(events: Sequence[Event]) -> set[int]:
    """Sends (by index) of a group member's own messages that it delivers later, not in
    the step it sends them (sent during a flush, they wait for the next view)."""
    delivered = {(e.process, e.message): i for i, e in enumerate(events) if e.kind == "deliver"}
    return {
        i
        for i, e in enumerate(events)
        if e.kind == "send"
        and e.view is not None
        and delivered.get((e.process, e.message), i + 1) > i + 1
    }


def render_text(
    events: Sequence[Event],
    *,
    labels: Mapping[int, str] | None = None,
    names: Mapping[MessageId, str] | None = None,
    violations: Iterable[Violation] = (),
    width: int = 22,
    steps: Sequence[int] | None = None,
) -> str:
    """Draw ``events`` (one run) as a text space-time diagram.

    ``steps``, one number per event, replaces the time column by a step column.
    """
    if steps is not None and len(steps) != len(events):
        raise ValueError(f"steps has {len(steps)} entries for {len(events)} events")
    read = Reading.of(events, names)
    labels = labels or {}
    bad = {(q, m) for v in violations for q in v.processes for m in v.messages[-1:]}
    rows: list[list[int]] = []
    for i, shared in enumerate(shared_rows(events, steps)):
        if shared:
            rows[-1].append(i)
        else:
            rows.append([i])
    cells = _Cells(events, read, bad, {i: r for r, row in enumerate(rows) for i in row})
    table: list[tuple[str, list[str]]] = []
    for r, row in enumerate(rows):
        e0 = events[row[0]]
        time = "" if e0.time is None else f"{e0.time:g}"
        if steps is not None:
            time = str(steps[row[0]])
        table.append((time, cells.row(r, row)))
    heads = [labels.get(p, f"P{p}") for p in read.processes]
    return _columns("time" if steps is None else "step", heads, table, width)


class _Cells:
    """The cells of each row, left to right by process; it remembers which messages
    each process holds (received, or sent during a flush, and not yet delivered)."""

    def __init__(
        self,
        events: Sequence[Event],
        read: Reading,
        bad: set[tuple[int, MessageId]],
        row_of: dict[int, int],
    ) -> None:
        self.events = events
        self.read = read
        self.bad = bad
        self.row_of = row_of
        self.waiting_sends = _waiting_sends(events)
        self.held: dict[int, list[str]] = {p: [] for p in read.processes}

    def row(self, r: int, row: list[int]) -> list[str]:
        """The cells of row ``r``, which holds the events ``row`` (indices)."""
        events, read, held = self.events, self.read, self.held
        here = {events[i].process: events[i] for i in row}
        cells = [self.cell(r, p, here.get(p)) for p in read.processes]
        for i in row:
            e = events[i]
            name = read.name(e.message)
            if e.kind == "receive" or i in self.waiting_sends:
                held[e.process].append(name)
            elif e.kind == "deliver" and name in held[e.process]:
                held[e.process].remove(name)
        return cells

    def cell(self, r: int, p: int, e: Event | None) -> str:
        """Process ``p``'s cell in row ``r``: its event ``e``, or its line between events."""
        held, line = self.held[p], self.read.lifelines.get(p)
        if e is not None:
            name = "" if e.kind == "view" else self.read.name(e.message)
            cell = _cell(
                e,
                name,
                (p, e.message) in self.bad and e.kind == "deliver",
                recipients(e, self.read.members),
                e.kind == "deliver" and (e.message, p) in self.read.recovered,
            )
            waiting = [h for h in held if h != name]
            return cell + " ┊ " + ",".join(waiting) if waiting else cell
        if line is not None and r < self.row_of[line.first]:
            return ""  # not yet in the group
        if line is not None and line.ended and r > self.row_of[line.last]:
            return "✕ out" if r == self.row_of[line.last] + 1 else ""
        if held:
            return "┊ " + ",".join(held) + " held"
        return "│"


def _columns(first: str, heads: list[str], table: list[tuple[str, list[str]]], width: int) -> str:
    """The table as text: a column is ``width`` wide, or wider if one of its cells
    would not fit; the first column (``first``: time or step) is right-aligned."""
    widths = [
        max(width, len(heads[k]) + 1, *(len(cells[k]) + 1 for _, cells in table))
        for k in range(len(heads))
    ]
    left = max(6, *(len(time) for time, _ in table)) if table else 6
    out = []
    for time, cells in [(first, heads), *table]:
        row_text = "".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))
        out.append(f"{time:>{left}}  {row_text}".rstrip())
    return "\n".join(out)
