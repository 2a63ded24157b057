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


def message_names(events: Iterable[Event]) -> dict[MessageId, str]:
    """m1, m2, ... in the order the messages were sent."""
    names: dict[MessageId, str] = {}
    for e in events:
        if e.kind == "send" and e.message not in names:
            names[e.message] = f"m{len(names) + 1}"
    return names


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
    names = dict(names) if names is not None else message_names(events)
    procs = processes(events)
    labels = labels or {}
    bad = {(q, m) for v in violations for q in v.processes for m in v.messages[-1:]}
    members = view_members(events)
    flushed = recovered(events)
    lines = lifelines(events)
    waiting_sends = _waiting_sends(events)
    rows: list[list[int]] = []
    for i, shared in enumerate(shared_rows(events, steps)):
        if shared:
            rows[-1].append(i)
        else:
            rows.append([i])
    row_of = {i: r for r, row in enumerate(rows) for i in row}
    held: dict[int, list[str]] = {p: [] for p in procs}
    table: list[tuple[str, list[str]]] = []
    for r, row in enumerate(rows):
        here = {events[i].process: events[i] for i in row}
        cells = []
        for p in procs:
            line = lines.get(p)
            e = here.get(p)
            if e is not None:
                name = "" if e.kind == "view" else names.get(e.message, str(e.message))
                cell = _cell(
                    e,
                    name,
                    (p, e.message) in bad and e.kind == "deliver",
                    recipients(e, members),
                    e.kind == "deliver" and (e.message, p) in flushed,
                )
                waiting = [h for h in held[p] if h != name]
                if waiting:
                    cell += " ┊ " + ",".join(waiting)
            elif line is not None and r < row_of[line.first]:
                cell = ""  # not yet in the group
            elif line is not None and line.ended and r > row_of[line.last]:
                cell = "✕ out" if r == row_of[line.last] + 1 else ""
            elif held[p]:
                cell = "┊ " + ",".join(held[p]) + " held"
            else:
                cell = "│"
            cells.append(cell)
        for i in row:
            e = events[i]
            name = names.get(e.message, str(e.message))
            if e.kind == "receive" or i in waiting_sends:
                held[e.process].append(name)
            elif e.kind == "deliver" and name in held[e.process]:
                held[e.process].remove(name)
        e0 = events[row[0]]
        time = "" if e0.time is None else f"{e0.time:g}"
        if steps is not None:
            time = str(steps[row[0]])
        table.append((time, cells))
    heads = [labels.get(p, f"P{p}") for p in procs]
    # a column is ``width`` wide, or wider if one of its cells would not fit
    widths = [
        max(width, len(heads[k]) + 1, *(len(cells[k]) + 1 for _, cells in table))
        for k in range(len(procs))
    ]
    first = "time" if steps is None else "step"
    left = max(6, *(len(time) for time, _ in table)) if table else 6
    out = []
    for time, cells in [(first, heads), *table]:
        row_text = "".join(f"{c:<{w}}" for c, w in zip(cells, widths, strict=True))
        out.append(f"{time:>{left}}  {row_text}".rstrip())
    return "\n".join(out)
