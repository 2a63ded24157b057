"""Bad rows land in the ``invalid`` table with their reason; the rest is still checked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.messages import MessageId
from mailroom.spark import check_trace, load_trace
from mailroom.trace.checkers import PROPERTIES, check
from mailroom.trace.events import Event
from mailroom.trace.jsonl import write_jsonl
from mailroom.trace.parquet import write_parquet

#: error paths on both engines, each a Spark job or several: the full suite runs them,
#: the quick tier keeps the engines' exact-value tests (test_differential, ...)
pytestmark = pytest.mark.slow

GOOD = [
    Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,), {0: 1}),
    Event("r", 0, 2, "send", MessageId(0, 2), 0, (1,), {0: 2}),
    Event("r", 1, 1, "deliver", MessageId(0, 2), 0, (1,), {0: 2, 1: 1}),
    Event("r", 1, 2, "deliver", MessageId(0, 1), 0, (1,), {0: 2, 1: 2}),
]


def _keys(rows: list[Any]) -> set[tuple[str, str, tuple[int, ...], tuple[MessageId, ...]]]:
    return {
        (
            r.property,
            r.run,
            tuple(r.processes),
            tuple(MessageId(m.origin, m.seq) for m in r.messages),
        )
        for r in rows
    }


def test_jsonl_bad_rows_are_reported_and_the_rest_checked(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    write_jsonl(GOOD, path)
    bad = [
        {"run": "r", "process": 1, "seq": 3, "kind": "deliver", "sender": 0, "dest": [1]},
        {
            "run": "r",
            "process": 1,
            "seq": 4,
            "kind": "teleport",
            "message": [0, 1],
            "sender": 0,
            "dest": [1],
        },
        {
            "run": "r",
            "process": 1,
            "seq": 5,
            "kind": "deliver",
            "message": [0, 9],
            "sender": 0,
            "dest": [1],
            "vc": {"0": 2, "1": 3},
        },
        {
            "run": "r",
            "process": 1,
            "seq": 6,
            "kind": "deliver",
            "message": [0, 1],
            "sender": 0,
            "dest": [1],
            "vc": {"x": -1},
        },
    ]
    with open(path, "a") as out:
        for row in bad:
            out.write(json.dumps(row) + "\n")
        out.write("{not json\n")
    report = check_trace(
        spark, load_trace(spark, [str(path)], "jsonl"), (*PROPERTIES, "clock"), mode="full"
    )
    reasons = sorted(r.reason for r in report.invalid.collect())
    assert reasons == sorted(
        [
            "missing field 'message'",
            "unknown kind 'teleport' (expected one of send, receive, deliver, view)",
            "delivery of P0#9, which was never sent",
            "malformed clock: field 'vc' must map pids to counters",
            "not JSON (Expecting property name enclosed in double quotes)",
        ]
    )
    lines = sorted(r.line for r in report.invalid.collect() if r.line is not None)
    assert lines == [5, 6, 8, 9]
    # the usable rows: GOOD, the never-sent delivery and the clockless duplicate delivery
    usable = [
        *GOOD,
        Event("r", 1, 5, "deliver", MessageId(0, 9), 0, (1,), {0: 2, 1: 3}),
        Event("r", 1, 6, "deliver", MessageId(0, 1), 0, (1,)),
    ]
    ref = check(usable)
    want = {
        (v.property, v.run, v.processes, v.messages) for p in PROPERTIES for v in ref.violations[p]
    }
    got = _keys(report.violations.collect())
    assert {k for k in got if k[0] != "clock"} == want
    assert ("fifo", "r", (1,), (MessageId(0, 1), MessageId(0, 2))) in want
    assert ("integrity", "r", (1,), (MessageId(0, 9),)) in want
    assert ("integrity", "r", (1,), (MessageId(0, 1),)) in want
    # the run lost a clock, so its clocks were computed: no clock violations
    assert report.counts["clock"] == 0


def test_parquet_bad_rows_and_a_wrong_clock(spark: Any, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    from mailroom.trace.parquet import event_row

    rows = [event_row(e) for e in GOOD]
    rows[3]["vc"] = [(0, 2), (1, 5)]  # P1's own entry jumps from 1 to 5
    rows.append({**event_row(GOOD[0]), "seq": 7, "kind": None})
    rows.append({**event_row(GOOD[0]), "seq": 8, "kind": "bounce"})
    rows.append({**event_row(GOOD[0]), "run": "r2", "seq": 9, "vc": [(0, -3)]})
    path = tmp_path / "bad.parquet"
    write_parquet(rows, path)
    assert pa.parquet.read_table(str(path)).num_rows == 7
    report = check_trace(
        spark, load_trace(spark, [str(path)], "parquet"), (*PROPERTIES, "clock"), mode="full"
    )
    reasons = sorted(r.reason for r in report.invalid.collect())
    assert reasons == [
        "malformed clock: field 'vc' must map pids to non-negative counters",
        "missing field 'kind'",
        "unknown kind 'bounce'",
    ]
    clock = [r for r in report.violations.collect() if r.property == "clock"]
    assert [(tuple(r.processes), tuple(r.positions)) for r in clock] == [((1,), (2,))]
    assert "expected" in clock[0].reason
    assert report.counts["fifo"] == 1
    # run r2 lost its only clock and is still checked (its clocks are computed)
    assert report.counts["integrity"] == 0


@pytest.mark.parametrize("bad", [0, 2])
def test_parquet_bad_rows_counted_as_the_check_reads_them(
    spark: Any, tmp_path: Path, bad: int
) -> None:
    """With every clock given, the check counts the rejected rows as it reads the trace
    and reads them only if there are some: the same rows, reasons and counts."""
    pytest.importorskip("pyarrow")
    from mailroom.trace.parquet import event_row

    rows = [event_row(e) for e in GOOD]
    rows += [{**event_row(GOOD[0]), "seq": 7, "kind": None}] * (bad > 0)
    rows += [{**event_row(GOOD[0]), "seq": 8, "kind": "bounce"}] * (bad > 1)
    path = tmp_path / "bad.parquet"
    write_parquet(rows, path)
    loaded = load_trace(spark, [str(path)], "parquet")
    assert loaded.split is not None  # the path under test
    report = check_trace(spark, loaded, ("integrity", "fifo"), mode="full")
    reasons = sorted(r.reason for r in report.invalid.collect())
    assert reasons == ["missing field 'kind'", "unknown kind 'bounce'"][:bad]
    assert report.invalid_count == bad
    assert report.found is not None
    assert len(report.found.invalid_first) == bad
    assert (report.found.events, report.found.runs) == (len(GOOD), 1)
    assert report.counts["fifo"] == 1


def test_parquet_a_clockless_bad_row_leaves_the_given_clocks_alone(
    spark: Any, tmp_path: Path
) -> None:
    """The probe for clockless events reads two columns, so a rejected row without a
    clock answers yes; the runs to compute are then looked for among the events,
    and there are none: the given clocks are checked (one is wrong)."""
    pytest.importorskip("pyarrow")
    from mailroom.trace.parquet import event_row

    rows = [event_row(e) for e in GOOD]
    rows[3]["vc"] = [(0, 2), (1, 5)]  # P1's own entry jumps from 1 to 5
    rows.append({**event_row(GOOD[0]), "seq": 8, "kind": "bounce", "vc": None})
    path = tmp_path / "bad.parquet"
    write_parquet(rows, path)
    report = check_trace(spark, load_trace(spark, [str(path)], "parquet"), ("fifo", "clock"))
    assert report.counts == {"fifo": 1, "clock": 1}
    assert [r.reason for r in report.invalid.collect()] == ["unknown kind 'bounce'"]


def test_jsonl_line_numbers_across_blocks_and_the_header_line(spark: Any, tmp_path: Path) -> None:
    """Spark splits the file into many blocks; bad lines keep their true line numbers,
    and the trace header line is neither an event nor invalid."""
    path = tmp_path / "many.jsonl"
    good = [
        Event("r", 0, k, "send", MessageId(0, k), 0, (1,), {0: k}).to_dict() for k in range(1, 301)
    ]
    lines = [json.dumps({"header": {"producer": "test", "promises": ["fifo"]}})]
    lines += [json.dumps(row) for row in good]
    for at in (7, 123, 250):  # 1-based line numbers of the broken lines
        lines[at - 1] = "{broken"
    lines.insert(199, "")  # a blank line counts as a line, never as invalid
    path.write_text("\n".join(lines) + "\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "2048")
    try:
        loaded = load_trace(spark, [str(path)], "jsonl")
        assert loaded.events.count() == 300 - 3  # three rows broken; the header is no event
        bad = sorted((r.line, r.reason[:8]) for r in loaded.invalid.collect())
        assert spark.read.text(str(path)).rdd.getNumPartitions() > 5
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert bad == [(7, "not JSON"), (123, "not JSON"), (251, "not JSON")]
