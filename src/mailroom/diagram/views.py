"""What a membership trace adds to a diagram: views, recovered messages, lifelines.

Rules, in words (shared by the text, SVG and matplotlib renderers):

- A view installation (an event of kind "view") is a marker on the process's
  line labelled with the view id and its members, ``V2 {0,1}``. Installations of
  one view that follow each other in the trace at the same time (or step) share
  a row: the initial view, installed by every member at once, is one row.
- A broadcast sent in view V goes to V's members (as the trace's installations
  of V say), not to every process of the run.
- A delivery of another process's message with no receipt of it at that process
  (in a trace that records receipts and views) came with the flush: a survivor
  that had it handed it on before the next view was installed. It is drawn as
  a "recovered" arrow and written ``deliver m3 (flush)``.
- Lifelines: in a membership trace a process's line starts at its first event
  (a joiner appears when it joins). A process that is not a member of the last
  view in the trace (it crashed, left or was cut off and never came back) has
  its line end after its last event, with a cross.

Traces without view events are drawn as before: every line runs top to bottom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event


def view_label(view: int | None, members: Sequence[int]) -> str:
    """``V2 {0,1}``: a view's id and its members."""
    return f"V{view} {{{','.join(str(p) for p in members)}}}"


def view_members(events: Sequence[Event]) -> dict[int, tuple[int, ...]]:
    """The members of each view id, as the first installation of it says."""
    members: dict[int, tuple[int, ...]] = {}
    for e in events:
        if e.kind == "view" and e.view is not None:
            members.setdefault(e.view, tuple(e.dest))
    return members


def recipients(send: Event, members: Mapping[int, tuple[int, ...]]) -> tuple[int, ...]:
    """Where a send goes: a broadcast in a known view goes to that view's members."""
    if send.view is not None and send.view in members and len(send.dest) > 1:
        return tuple(q for q in send.dest if q in members[send.view]) or send.dest
    return send.dest


def processes(events: Sequence[Event]) -> list[int]:
    """The processes to draw: those with events and those the messages go to (a broadcast
    in a view goes to its members, not to a joiner that has not joined yet)."""
    members = view_members(events)
    found = {e.process for e in events}
    found.update(d for e in events if e.kind != "view" for d in recipients(e, members))
    return sorted(found)


def recovered(events: Sequence[Event]) -> set[tuple[MessageId, int]]:
    """(message, process) pairs delivered without a receipt: handed on by a flush."""
    kinds = {e.kind for e in events}
    if "view" not in kinds or "receive" not in kinds:
        return set()
    got = {(e.message, e.process) for e in events if e.kind == "receive"}
    return {
        (e.message, e.process)
        for e in events
        if e.kind == "deliver"
        and e.message.origin != e.process
        and (e.message, e.process) not in got
    }


def shared_rows(events: Sequence[Event], steps: Sequence[int] | None = None) -> list[bool]:
    """For each event: does it share the row of the event before it? (Installations of
    one view, at other processes, at the same time or step, next to each other.)"""
    shared = [False] * len(events)
    row_procs: set[int] = set()
    for i, e in enumerate(events):
        if i > 0:
            prev = events[i - 1]
            same_moment = prev.time == e.time if steps is None else steps[i - 1] == steps[i]
            if (
                e.kind == "view"
                and prev.kind == "view"
                and prev.view == e.view
                and same_moment
                and e.process not in row_procs
            ):
                shared[i] = True
                row_procs.add(e.process)
                continue
        row_procs = {e.process}
    return shared


@attrs.frozen
class Lifeline:
    """Where a process's line runs, by index in the trace: from ``first`` to ``last``;
    ``ended``: it is out of the group at the end, so its line stops after ``last``."""

    first: int
    last: int
    ended: bool


def lifelines(events: Sequence[Event]) -> dict[int, Lifeline]:
    """The lifeline of every process that has events (empty for a trace without views)."""
    members = view_members(events)
    if not members:
        return {}
    final = members[max(members)]
    lines: dict[int, Lifeline] = {}
    in_views = {e.process for e in events if e.kind == "view"}
    for i, e in enumerate(events):
        line = lines.get(e.process)
        first = i if line is None else line.first
        ended = e.process in in_views and e.process not in final
        lines[e.process] = Lifeline(first, i, ended)
    return lines
