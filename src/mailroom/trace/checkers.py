"""Reference checkers: the properties of ``mailroom.trace.properties`` over a trace.

``check`` runs the reference check of each property the registry defines on every
run of a trace. Each violation is one row with its witness; the sets are
canonical, so other checkers (Spark) can be compared with these exactly.

Two modes, as the Spark checks have (``mailroom.spark.checks``): "full" reports
every violating pair; "summary" reports one row per violating later delivery
(fifo, causal) or per violating (p, q, m2) (total), each with one witness from
the full set, chosen exactly as Spark's summary chooses it. The other properties'
rows are the same in both modes. So both engines report the same numbers for the
same trace in the same mode; ``count_words`` names what a count counts
("violating pairs" or "violating deliveries").

This module keeps the names it has always had (the check functions, the property
name tuples, ``Report``, ``Violation``, the clock helpers): they are re-exports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import attrs

from mailroom.trace.clock_check import check_clock
from mailroom.trace.events import Event
from mailroom.trace.history import (
    by_run,
    happened_before,
    propagate_clocks,
    send_clocks,
)
from mailroom.trace.ordering import (
    check_causal,
    check_fifo,
    check_integrity,
    check_liveness,
    check_total,
)
from mailroom.trace.properties import (
    ALL_PROPERTIES,
    CHECKABLE,
    PROPERTIES,
    REGISTRY,
    VIEW_PROPERTIES,
    count_words,
    unknown,
)
from mailroom.trace.records import InvalidRow, invalid_events
from mailroom.trace.report import Report, not_promised_lines
from mailroom.trace.views import (
    check_same_view,
    check_self_inclusion,
    check_view_agreement,
    check_virtual_synchrony,
)
from mailroom.trace.violation import Violation

MODES = ("summary", "full")

#: Each property's reference check, by name (from the registry).
CHECKERS: dict[str, Callable[..., list[Violation]]] = {
    name: p.reference for name, p in REGISTRY.items()
}


def check(
    events: Iterable[Event],
    properties: Sequence[str] | None = None,
    *,
    mode: str = "full",
    in_flight: float | None = None,
    not_promised: Sequence[str] = (),
    protocol: str | None = None,
) -> Report:
    """Check ``properties`` on every run in ``events``, in ``mode`` "full" or "summary".

    ``properties`` defaults to ``PROPERTIES``, plus ``VIEW_PROPERTIES`` when a run
    has view events; any of ``CHECKABLE`` (``clock`` included) may be named.
    ``not_promised`` and ``protocol`` are carried into the report for its summary.
    """
    events = list(events)
    if properties is None:
        views = any(e.kind == "view" for e in events)
        properties = ALL_PROPERTIES if views else PROPERTIES
    why = unknown(properties)
    if why:
        raise ValueError(why)
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    violations: dict[str, list[Violation]] = {p: [] for p in properties}
    invalid: list[InvalidRow] = []
    for run, evs in sorted(by_run(events).items()):
        for prop in properties:
            found = REGISTRY[prop].check(evs, run, summary=mode == "summary", in_flight=in_flight)
            violations[prop].extend(found)
        invalid += invalid_events(evs, run)
    report = Report(tuple(properties), violations, mode, tuple(not_promised), protocol)
    return attrs.evolve(report, invalid=tuple(invalid))


__all__ = [
    "ALL_PROPERTIES",
    "CHECKABLE",
    "CHECKERS",
    "MODES",
    "PROPERTIES",
    "VIEW_PROPERTIES",
    "Report",
    "Violation",
    "by_run",
    "check",
    "check_causal",
    "check_clock",
    "check_fifo",
    "check_integrity",
    "check_liveness",
    "check_same_view",
    "check_self_inclusion",
    "check_total",
    "check_view_agreement",
    "check_virtual_synchrony",
    "count_words",
    "happened_before",
    "not_promised_lines",
    "propagate_clocks",
    "send_clocks",
]
