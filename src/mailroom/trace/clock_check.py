"""The reference check of property ``clock``: the vector clocks a trace carries.

Each send or delivery's ``vc`` must be its process's previous clock (that of its
previous send or delivery) with its own entry plus one, merged (entrywise max)
with its message's send clock for a delivery; entries equal to 0 mean nothing. A
run where some send or delivery has no clock gets its clocks computed instead
(as the Spark engine does, ``mailroom.spark.clocks``), and computed clocks are
right by construction: such a run has no clock violation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from mailroom.core.messages import MessageId
from mailroom.trace.events import Event
from mailroom.trace.history import histories
from mailroom.trace.violation import Violation


def _positive(vc: Mapping[int, int] | None) -> dict[int, int]:
    return {k: v for k, v in (vc or {}).items() if v > 0}


def clock_json(vc: Mapping[int, int]) -> str:
    """A clock as a verdict shows it: JSON, keys in order (Spark's ``to_json`` spelling)."""
    return json.dumps({str(k): v for k, v in sorted(vc.items())}, separators=(",", ":"))


def _kept_sends(events: Sequence[Event]) -> dict[MessageId, Event]:
    """Each message's send with the highest seq (the one Spark's by-message window keeps)."""
    kept: dict[MessageId, Event] = {}
    for e in events:
        if e.kind == "send" and (e.message not in kept or e.seq > kept[e.message].seq):
            kept[e.message] = e
    return kept


def check_clock(events: Sequence[Event], run: str = "") -> list[Violation]:
    """(p, e): a send or delivery of p whose clock is not the one its history gives it."""
    app = [e for e in events if e.kind in ("send", "deliver")]
    if any(e.vc is None for e in app):
        return []  # its clocks are computed, hence right
    sent = _kept_sends(app)
    found = []
    for p, history in sorted(histories(app).items()):
        previous: dict[int, int] = {}
        for e in history:
            merged = _positive(sent[e.message].vc) if e.message in sent else {}
            if e.kind != "deliver":
                merged = {}
            want = {k: max(previous.get(k, 0), merged.get(k, 0)) for k in previous.keys() | merged}
            want[p] = previous.get(p, 0) + 1
            want = _positive(want)
            if _positive(e.vc) != want:
                assert e.vc is not None
                reason = (
                    f"P{p} event {e.seq} ({e.kind} {e.message}): clock {clock_json(e.vc)}, "
                    f"expected {clock_json(want)}"
                )
                found.append(Violation("clock", run, (p,), (e.message,), (e.seq,), reason))
            previous = _positive(e.vc)
    return found
