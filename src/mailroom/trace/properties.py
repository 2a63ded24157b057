"""The property registry: every property either engine checks, each defined once.

A ``Property`` holds a property's name, what it promises in words, which
protocols promise it, what one violation row is (its witness), what a row
counts in each mode, its reference check (``mailroom.trace``) and its Spark
check (named by import path: ``mailroom.spark`` sits above this package). The
reference engine (``mailroom.trace.check``), the Spark engine
(``mailroom.spark.check_trace``) and ``mailroom check`` all read ``REGISTRY``;
``PROPERTIES``, ``VIEW_PROPERTIES``, ``ALL_PROPERTIES`` and ``CHECKABLE`` are
selections of it by kind.

Kinds: "order" properties are promised by protocols (the protocol registry,
``mailroom.core.registry``, lists each protocol's promises); "view" properties by
every protocol run in a ``Group`` (group membership, traces with view events);
"trace" properties are promised by no protocol: they check what the trace
itself records (``clock``: its vector clocks).

Runs with view events are scoped as group membership needs (non-uniformity: a
process that crashes or is excluded may have delivered what the survivors did
not): total compares two processes' deliveries only within segments both have
(``mailroom.trace.history.segments``), and never in a segment that a process
left into another view than the successor; liveness owes a message sent in view
V only to the destinations that installed V and then V's successor, and only if
its sender did. Runs without view events have one segment: the plain rules.

Adding a property: write its reference check (``(events, run, ...) ->
list[Violation]``, one run's rows in a canonical order) and its Spark check (a
function of ``mailroom.spark.tables.Tables`` returning violation rows), add one
``Property`` to ``REGISTRY`` below, and extend the differential tests
(tests/spark/test_differential.py, test_views_spark.py) so that both engines are
compared on traces that break it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import attrs

from mailroom.trace.clock_check import check_clock
from mailroom.trace.events import Event
from mailroom.trace.ordering import (
    check_causal,
    check_fifo,
    check_integrity,
    check_liveness,
    check_total,
)
from mailroom.trace.views import (
    check_same_view,
    check_self_inclusion,
    check_view_agreement,
    check_virtual_synchrony,
)
from mailroom.trace.violation import Violation

KINDS = ("order", "view", "trace")
#: The options a reference check may take, besides the events and the run.
OPTIONS = ("summary", "in_flight")
_SINGULAR = {"deliveries": "delivery", "pairs": "pair", "clocks": "clock"}


@attrs.frozen
class Property:
    """One property: what it promises, who promises it, its witness, and its two checks."""

    name: str
    kind: str = attrs.field(validator=attrs.validators.in_(KINDS))
    promise: str
    witness: str
    #: what one row counts: (in full mode, in summary mode)
    counts: tuple[str, str]
    reference: Callable[..., list[Violation]]
    #: "module:function" of the Spark check (``mailroom.spark.rules``)
    spark: str
    #: which of ``OPTIONS`` the reference check takes
    options: tuple[str, ...] = ()

    def check(
        self,
        events: Sequence[Event],
        run: str = "",
        *,
        summary: bool = False,
        in_flight: float | None = None,
    ) -> list[Violation]:
        """The reference check on one run's events."""
        given: dict[str, Any] = {"summary": summary, "in_flight": in_flight}
        return self.reference(events, run, **{o: given[o] for o in self.options})

    def unit(self, mode: str) -> str:
        """What one row counts in ``mode`` ("full" or "summary")."""
        return self.counts[1] if mode == "summary" else self.counts[0]

    def promised_by(self) -> str:
        """Who promises this property, in words (from the protocol registry for "order")."""
        if self.kind == "view":
            return "every protocol run in a Group (group membership)"
        if self.kind == "trace":
            return "no protocol: it checks what the trace records"
        import mailroom.protocols  # noqa: F401  (registers the protocols)
        from mailroom.core.registry import PROTOCOLS

        names = [
            name for name, (_, _, promises) in sorted(PROTOCOLS.items()) if self.name in promises
        ]
        return ", ".join(names) or "no registered protocol"


_SPARK = "mailroom.spark.rules"

#: Every property, in the order reports list them.
REGISTRY: dict[str, Property] = {
    p.name: p
    for p in (
        Property(
            "integrity",
            "order",
            "a process delivers only messages sent to it, each at most once",
            "(q, m): the delivery of m at q that was never sent, not addressed to q, or "
            "a repeat (one row per extra delivery); its position",
            ("violating deliveries", "violating deliveries"),
            check_integrity,
            f"{_SPARK}.order:integrity",
        ),
        Property(
            "fifo",
            "order",
            "a process delivers the messages of one sender in the order they were sent",
            "(q, m1, m2): same origin, m1 sent first, q delivers m2 first; both positions",
            ("violating pairs", "violating deliveries"),
            check_fifo,
            f"{_SPARK}.order:fifo",
            ("summary",),
        ),
        Property(
            "causal",
            "order",
            "a process delivers m2 after m1 whenever send(m1) happened before send(m2)",
            "(q, m1, m2): send(m1) -> send(m2), q delivers m2 first; both positions",
            ("violating pairs", "violating deliveries"),
            check_causal,
            f"{_SPARK}.order:causal",
            ("summary",),
        ),
        Property(
            "total",
            "order",
            "two processes deliver the messages both deliver in the same order",
            "(p, q, m1, m2), p < q: p delivers m1 before m2, q the other way round; "
            "the four positions",
            ("violating pairs", "violating deliveries"),
            check_total,
            f"{_SPARK}.order:total",
            ("summary",),
        ),
        Property(
            "liveness",
            "order",
            "every destination of a message delivers it (in a group: every destination "
            "that installed the send's view and then its successor, if the sender did)",
            "(q, m): q a destination of m that never delivered it; the send's position",
            ("missing deliveries", "missing deliveries"),
            check_liveness,
            f"{_SPARK}.order:liveness",
            ("in_flight",),
        ),
        Property(
            "view_agreement",
            "view",
            "processes that install a view id install it with the same members, and a "
            "process installs ever higher view ids",
            "(p, q, k), p < q: both installed view k with different members; or (p, k1, "
            "k2): p installed k2 right after k1, k2 <= k1; the installations' positions",
            ("bad installations", "bad installations"),
            check_view_agreement,
            f"{_SPARK}.views:view_agreement",
        ),
        Property(
            "self_inclusion",
            "view",
            "a process installs only views it is a member of",
            "(p, k): p installed view k without being a member; the installation's position",
            ("bad installations", "bad installations"),
            check_self_inclusion,
            f"{_SPARK}.views:self_inclusion",
        ),
        Property(
            "same_view",
            "view",
            "a message is delivered in the view it was sent in, and every send and "
            "delivery is recorded in the view its process had installed last",
            "(q, m): q delivered m in another view (its `view`) than m was sent in, or "
            "recorded a send or delivery of m in a view its installations contradict; "
            "the event's position",
            ("violating deliveries", "violating deliveries"),
            check_same_view,
            f"{_SPARK}.views:same_view",
        ),
        Property(
            "virtual_synchrony",
            "view",
            "two processes that install V and then its successor V' deliver the same "
            "messages (sent to both) between the two",
            "(p, q, m), p < q: both installed V then V', one delivered m between, the "
            "other not; the delivery's position",
            ("missing deliveries", "missing deliveries"),
            check_virtual_synchrony,
            f"{_SPARK}.views:virtual_synchrony",
        ),
        Property(
            "clock",
            "trace",
            "each send or delivery's vector clock is its process's previous one with its "
            "own entry plus one, merged with the send's clock for a delivery",
            "(p, m): the event whose clock is wrong, with the clock expected; its position",
            ("bad clocks", "bad clocks"),
            check_clock,
            f"{_SPARK}.clock:clock",
        ),
    )
}


def _names(kind: str) -> tuple[str, ...]:
    return tuple(name for name, p in REGISTRY.items() if p.kind == kind)


#: The ordering properties (promised by protocols).
PROPERTIES = _names("order")
#: The group membership properties, checked on traces with view events.
VIEW_PROPERTIES = _names("view")
#: Every property a protocol can promise (the reference engine's default set).
ALL_PROPERTIES = (*PROPERTIES, *VIEW_PROPERTIES)
#: Every property either engine checks (``clock`` included).
CHECKABLE = tuple(REGISTRY)


def count_words(prop: str, mode: str, count: int) -> str:
    """A property's verdict in words: "ok", or the count and what it counts in ``mode``."""
    if not count:
        return "ok"
    unit = REGISTRY[prop].unit(mode) if prop in REGISTRY else "violations"
    if count == 1:
        head, _, last = unit.rpartition(" ")
        unit = f"{head} {_SINGULAR.get(last, last.removesuffix('s'))}".strip()
    return f"{count} {unit}"


def unknown(names: Sequence[str], known: Sequence[str] = CHECKABLE) -> str | None:
    """Why ``names`` cannot be checked (one line), or None when every one is known."""
    bad = [p for p in names if p not in known]
    return f"unknown properties {bad}; choose from {list(known)}" if bad else None
