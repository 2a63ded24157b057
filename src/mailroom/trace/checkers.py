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

from mailroom.trace.clock_check import check_clock as check_clock
from mailroom.trace.events import Event
from mailroom.trace.history import by_run as by_run
from mailroom.trace.history import happened_before as happened_before
from mailroom.trace.history import propagate_clocks as propagate_clocks
from mailroom.trace.history import send_clocks as send_clocks
from mailroom.trace.ordering import check_causal as check_causal
from mailroom.trace.ordering import check_fifo as check_fifo
from mailroom.trace.ordering import check_integrity as check_integrity
from mailroom.trace.ordering import check_liveness as check_liveness
from mailroom.trace.ordering import check_total as check_total
from mailroom.trace.properties import ALL_PROPERTIES as ALL_PROPERTIES
from mailroom.trace.properties import CHECKABLE as CHECKABLE
from mailroom.trace.properties import PROPERTIES as PROPERTIES
from mailroom.trace.properties import REGISTRY, unknown
from mailroom.trace.properties import VIEW_PROPERTIES as VIEW_PROPERTIES
from mailroom.trace.properties import count_words as count_words
from mailroom.trace.records import InvalidRow, invalid_events
from mailroom.trace.report import Report as Report
from mailroom.trace.report import not_promised_lines as not_promised_lines
from mailroom.trace.views import check_same_view as check_same_view
from mailroom.trace.views import check_self_inclusion as check_self_inclusion
from mailroom.trace.views import check_view_agreement as check_view_agreement
from mailroom.trace.views import check_virtual_synchrony as check_virtual_synchrony
from mailroom.trace.violation import Violation as Violation

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
