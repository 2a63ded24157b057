"""Rows a trace records wrongly: what both engines report as invalid, never silently use.

Besides the rows a reader rejects (with their file and line), two kinds of event
are reported as invalid rows, on both engines and in the same words:

- a delivery of a message that was never sent (it is also an integrity violation);
- a send or delivery whose ``view`` field names another view than the one its
  process installed last before it: the field is checked against the process's
  own installation order, not trusted. A message the application sends during a
  flush must be recorded when it is sent, after the next view's installation.

Both are rows of ``INVALID_COLUMNS`` with source ``UNSENT`` ("trace") and no line;
a report shows them as ``run R: reason``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from mailroom.trace.events import Event
from mailroom.trace.history import histories, sends, views_at

#: The source of the invalid rows found in the events (not rejected by a reader).
UNSENT = "trace"


@attrs.frozen
class InvalidRow:
    """A row the checks could not use, or an event the trace records wrongly."""

    source: str
    line: int | None
    run: str | None
    process: int | None
    seq: int | None
    reason: str

    def where(self) -> str:
        return f"{self.source}:{self.line}" if self.line is not None else f"run {self.run}"

    def key(self) -> tuple[tuple[bool, Any], ...]:
        """The order reports list invalid rows in: by every column, nulls first (as Spark)."""
        return tuple((v is not None, v) for v in attrs.astuple(self))


def _in_view(view: int | None) -> str:
    return "outside any view" if view is None else f"in view {view}"


def unsent_deliveries(events: Sequence[Event], run: str = "") -> list[InvalidRow]:
    """The deliveries of messages no send event names."""
    sent = sends(events)
    return [
        InvalidRow(
            UNSENT, None, run, e.process, e.seq, f"delivery of {e.message}, which was never sent"
        )
        for e in events
        if e.kind == "deliver" and e.message not in sent
    ]


#: How a reason names an event of each kind.
_ACTS = {"send": "send", "deliver": "delivery"}


def misrecorded_views(events: Sequence[Event], run: str = "") -> list[InvalidRow]:
    """The sends and deliveries whose ``view`` is not the view their process installed
    last before them (events without a ``view`` claim none and are not checked)."""
    if all(e.view is None or e.kind not in _ACTS for e in events):
        return []  # nothing claims a view: a run without membership
    at = views_at(events)
    found = []
    for p, history in sorted(histories(events).items()):
        for e in history:
            if e.kind in _ACTS and e.view is not None and e.view != at[(p, e.seq)]:
                reason = (
                    f"{_ACTS[e.kind]} of {e.message} recorded in view {e.view}, "
                    f"but P{p} was {_in_view(at[(p, e.seq)])} by its installations"
                )
                found.append(InvalidRow(UNSENT, None, run, p, e.seq, reason))
    return found


def invalid_events(events: Sequence[Event], run: str = "") -> list[InvalidRow]:
    """Both kinds of invalid rows of one run."""
    return unsent_deliveries(events, run) + misrecorded_views(events, run)
