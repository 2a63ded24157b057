"""The property registry: each property defined once, and every engine and name reads it."""

from __future__ import annotations

import importlib
import inspect

import pytest

import mailroom.cli.check as cli_check
import mailroom.trace as trace
import mailroom.trace.checkers as checkers
from mailroom.core.messages import MessageId
from mailroom.trace import Event, check
from mailroom.trace.properties import (
    ALL_PROPERTIES,
    CHECKABLE,
    OPTIONS,
    PROPERTIES,
    REGISTRY,
    VIEW_PROPERTIES,
    count_words,
)
from mailroom.trace.records import misrecorded_views, unsent_deliveries
from mailroom.trace.report import Report
from mailroom.trace.violation import Violation, witness_key


def test_every_property_is_defined_once_with_both_checks() -> None:
    assert len(REGISTRY) == len(set(REGISTRY)) == 10
    for name, p in REGISTRY.items():
        assert p.name == name and p.promise and p.witness
        assert set(p.options) <= set(OPTIONS)
        assert set(inspect.signature(p.reference).parameters) >= {"events", "run", *p.options}
        # the Spark check is named by import path (mailroom.spark sits above mailroom.trace)
        module, _, function = p.spark.partition(":")
        assert module.startswith("mailroom.spark.rules.")
        assert callable(getattr(importlib.import_module(module), function))
        assert p.counts[0] and p.counts[1]


def test_the_old_names_are_selections_of_the_registry_and_agree() -> None:
    assert PROPERTIES == ("integrity", "fifo", "causal", "total", "liveness")
    assert VIEW_PROPERTIES == ("view_agreement", "self_inclusion", "same_view", "virtual_synchrony")
    assert (*PROPERTIES, *VIEW_PROPERTIES) == ALL_PROPERTIES
    assert CHECKABLE == (*ALL_PROPERTIES, "clock") == tuple(REGISTRY)
    # the three ALL_PROPERTIES that disagreed: each is now one selection, said once
    assert trace.ALL_PROPERTIES is checkers.ALL_PROPERTIES is ALL_PROPERTIES
    assert cli_check.ALL_PROPERTIES is CHECKABLE
    assert checkers.VIEW_PROPERTIES is trace.VIEW_PROPERTIES is VIEW_PROPERTIES
    assert {n: f for n, f in checkers.CHECKERS.items()} == {
        n: p.reference for n, p in REGISTRY.items()
    }
    assert checkers.check_fifo is REGISTRY["fifo"].reference


def test_who_promises_what_comes_from_the_protocol_registry() -> None:
    assert REGISTRY["total"].promised_by() == "lamport, sequencer, skeen"
    assert "cbcast" in REGISTRY["causal"].promised_by().split(", ")
    assert "Group" in REGISTRY["same_view"].promised_by()
    assert REGISTRY["clock"].promised_by().startswith("no protocol")


def test_counts_are_worded_from_the_registry() -> None:
    assert count_words("fifo", "full", 2) == "2 violating pairs"
    assert count_words("fifo", "summary", 1) == "1 violating delivery"
    assert count_words("clock", "full", 1) == "1 bad clock"
    assert count_words("liveness", "summary", 0) == "ok"


def _ev(p: int, seq: int, kind: str, m: MessageId, vc: dict[int, int] | None = None) -> Event:
    return Event("r", p, seq, kind, m, m.origin, (0, 1), vc)


def test_the_reference_clock_check_finds_a_wrong_clock_and_skips_computed_runs() -> None:
    a = MessageId(0, 1)
    good = [_ev(0, 1, "send", a, {0: 1}), _ev(1, 1, "deliver", a, {0: 1, 1: 1})]
    assert check(good, ["clock"]).ok
    bad = [good[0], _ev(1, 1, "deliver", a, {0: 1, 1: 3})]
    (v,) = check(bad, ["clock"]).violations["clock"]
    assert (v.processes, v.messages, v.positions) == ((1,), (a,), (1,))
    assert v.reason == 'P1 event 1 (deliver P0#1): clock {"0":1,"1":3}, expected {"0":1,"1":1}'
    # a run with a clockless event gets its clocks computed: nothing to find
    assert check([good[0], _ev(1, 1, "deliver", a)], ["clock"]).ok


def test_witnesses_that_tie_on_positions_come_in_one_order() -> None:
    # six senders' first messages to P9, none delivered: every row has positions (1,)
    # and processes (9,), so only the messages tell them apart
    sends = [Event("r", p, 1, "send", MessageId(p, 1), p, (9,)) for p in (5, 3, 0, 4, 1, 2)] + [
        Event("r", 9, 1, "receive", MessageId(0, 1), 0, (9,))
    ]
    report = check(sends, ["liveness"])
    reasons = [v.reason for v in report.first("liveness", 6)]
    assert reasons == [f"P9 never delivered P{p}#1" for p in range(6)]
    shuffled = Report(("liveness",), {"liveness": list(reversed(report.violations["liveness"]))})
    assert shuffled.summary(6) == report.summary(6)
    tie = Violation("x", "r", (1,), (MessageId(0, 1),), (1,), "b")
    assert witness_key(tie) < witness_key(Violation("x", "r", (1,), (MessageId(0, 1),), (1,), "c"))


def test_a_trace_that_lies_about_its_views_is_reported() -> None:
    # P1 records its send of P1#1 in view 2 before it installs view 2 (a send made
    # during the flush, written with the next view)
    installs = ((0, 1, 1), (1, 1, 1), (0, 3, 2), (1, 3, 2))  # (process, seq, view)
    view = [Event("r", p, s, "view", MessageId(0, k), p, (0, 1), view=k) for p, s, k in installs]
    m = MessageId(1, 1)
    lying = [
        *view,
        Event("r", 1, 2, "send", m, 1, (0, 1), view=2),
        Event("r", 0, 4, "deliver", m, 1, (0, 1), view=2),
        Event("r", 1, 4, "deliver", m, 1, (0, 1), view=2),
    ]
    (row,) = misrecorded_views(lying, "r")
    assert (row.process, row.seq, row.where()) == (1, 2, "run r")
    assert (
        row.reason == "send of P1#1 recorded in view 2, but P1 was in view 1 by its installations"
    )
    report = check(lying)
    assert report.ok and [r.reason for r in report.invalid] == [row.reason]
    # the same send recorded after the installation is honest; a field left out claims nothing
    assert misrecorded_views([*view, Event("r", 1, 4, "send", m, 1, (0, 1), view=2)]) == []
    assert misrecorded_views([*view, Event("r", 1, 2, "send", m, 1, (0, 1))]) == []
    outside = Event("r", 0, 0, "deliver", m, 1, (0, 1), view=1)
    assert [r.reason for r in misrecorded_views([*view, outside])] == [
        "delivery of P1#1 recorded in view 1, but P0 was outside any view by its installations"
    ]
    ghost = Event("r", 0, 5, "deliver", MessageId(7, 7), 7, (0,), view=2)
    assert [r.reason for r in unsent_deliveries([*lying, ghost], "r")] == [
        "delivery of P7#7, which was never sent"
    ]


def test_unknown_properties_are_named() -> None:
    with pytest.raises(ValueError, match="unknown properties \\['speed'\\]; choose from"):
        check([], ["speed"])
