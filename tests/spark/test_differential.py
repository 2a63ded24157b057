"""Spark checks against the reference checkers on hundreds of simulator traces.

All runs (correct and buggy protocols, duplicating networks, mutated traces;
half of them stripped of their clocks so that happens-before is computed) are
unioned into one DataFrame and checked in one Spark job per mode.
"""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from spark_traces import corpus

from mailroom.core.messages import MessageId
from mailroom.spark import check_trace, events_frame
from mailroom.trace.checkers import PROPERTIES, check
from mailroom.trace.events import Event

Key = tuple[str, str, tuple[int, ...], tuple[MessageId, ...]]


@pytest.fixture(scope="module")
def runs() -> list[list[Event]]:
    out = corpus(24)
    # every other run without clocks: its happens-before is computed on Spark
    return [[attrs.evolve(e, vc=None) for e in r] if i % 2 else r for i, r in enumerate(out)]


@pytest.fixture(scope="module")
def events(runs: list[list[Event]]) -> list[Event]:
    return [e for r in runs for e in r]


@pytest.fixture(scope="module")
def reference(events: list[Event]) -> set[Key]:
    report = check(events)
    return {
        (v.property, v.run, v.processes, v.messages)
        for p in PROPERTIES
        for v in report.violations[p]
    }


def _keys(rows: list[Any]) -> set[Key]:
    return {
        (
            r.property,
            r.run,
            tuple(r.processes),
            tuple(MessageId(m.origin, m.seq) for m in r.messages),
        )
        for r in rows
    }


@pytest.fixture(scope="module")
def full(spark: Any, events: list[Event]) -> tuple[Any, set[Key]]:
    report = check_trace(spark, events_frame(spark, events), (*PROPERTIES, "clock"), mode="full")
    return report, _keys(report.violations.collect())


@pytest.fixture(scope="module")
def summary(spark: Any, events: list[Event]) -> tuple[Any, set[Key]]:
    report = check_trace(spark, events_frame(spark, events), PROPERTIES, mode="summary")
    return report, _keys(report.violations.collect())


def test_the_corpus_is_large_and_varied(runs: list[list[Event]], reference: set[Key]) -> None:
    assert len(runs) >= 200
    assert {k[0] for k in reference} == set(PROPERTIES)  # every property is violated somewhere
    clean = {r[0].run for r in runs if r} - {k[1] for k in reference}
    assert len(clean) >= 50  # and many runs are correct


def test_full_mode_equals_the_reference(
    full: tuple[Any, set[Key]], reference: set[Key], runs: list[list[Event]]
) -> None:
    report, got = full
    assert {k for k in got if k[0] != "clock"} == reference
    # simulator clocks (given or computed) are consistent; the mutated runs that kept
    # their clocks (dropped, repeated and foreign deliveries) are caught
    bad_clocks = {k[1] for k in got if k[0] == "clock"}
    mutated_with_clocks = {r[0].run for i, r in enumerate(runs) if r and i % 2 == 0} & {
        k[1] for k in reference
    }
    assert bad_clocks and all(run.endswith("-mut") for run in bad_clocks)
    assert bad_clocks <= mutated_with_clocks
    assert report.counts["fifo"] == sum(1 for k in got if k[0] == "fifo")


def test_full_mode_positions_match_the_reference(
    full: tuple[Any, set[Key]], events: list[Event]
) -> None:
    report, _ = full
    ref = check(events, ("fifo", "total"))
    want = {
        (v.property, v.run, v.messages, v.positions)
        for p in ("fifo", "total")
        for v in ref.violations[p]
    }
    rows = report.violations.where("property IN ('fifo', 'total')").collect()
    got = {
        (
            r.property,
            r.run,
            tuple(MessageId(m.origin, m.seq) for m in r.messages),
            tuple(r.positions),
        )
        for r in rows
    }
    assert got == want


def _project(keys: set[Key], prop: str) -> set[tuple[str, tuple[int, ...], MessageId]]:
    """The violating delivery of each pair: m1 for fifo/causal, m2 for total, m otherwise."""
    return {(k[1], k[2], k[3][-1] if prop == "total" else k[3][0]) for k in keys if k[0] == prop}


def test_summary_mode_finds_the_same_deliveries_with_true_witnesses(
    summary: tuple[Any, set[Key]], reference: set[Key]
) -> None:
    _, got = summary
    assert got <= reference  # every witness pair is a real violation
    for prop in PROPERTIES:
        assert _project(got, prop) == _project(reference, prop), prop
    assert len({k for k in got if k[0] == "total"}) < len({k for k in reference if k[0] == "total"})


def test_summary_text_names_properties_and_witnesses(summary: tuple[Any, set[Key]]) -> None:
    report, _ = summary
    text = report.summary()
    for prop in PROPERTIES:
        assert text.count(prop) >= 1
    assert "never delivered" in text and "the other way round" in text


@pytest.mark.parametrize(
    "clock", ["none", pytest.param("same", marks=pytest.mark.slow), "backwards"]
)
def test_total_order_pairs_only_what_may_violate_whatever_the_times(
    spark: Any, runs: list[list[Event]], reference: set[Key], clock: str
) -> None:
    # Spark pairs up only deliveries out of a reference order built from delivery
    # times; times that say nothing (none, all equal) or the opposite of the truth
    # cost speed, never a violation
    def when(e: Event) -> float | None:
        if clock == "none" or e.time is None:
            return None
        return 0.0 if clock == "same" else -e.time

    events = [attrs.evolve(e, time=when(e)) for r in runs for e in r]
    report = check_trace(spark, events_frame(spark, events), ("total",), mode="full")
    got = _keys(report.violations.collect())
    assert got == {k for k in reference if k[0] == "total"}
    assert got  # the corpus has total-order violations to find
