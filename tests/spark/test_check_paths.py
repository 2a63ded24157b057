"""``mailroom check`` says the same thing on both engines, on every path: the report
directory (``--out``) for every format, traces that lie or deliver what nobody sent,
witnesses that tie, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spark_traces import NAMED_LOG

from mailroom.cli import main
from mailroom.core.messages import MessageId
from mailroom.trace.events import Event
from mailroom.trace.jsonl import write_jsonl
from mailroom.trace.parquet import write_parquet
from mailroom.trace.shiviz import SHIVIZ_PARSER

#: error paths on both engines, each a Spark job or several: the full suite runs them,
#: the quick tier keeps the engines' exact-value tests (test_differential, ...)
pytestmark = pytest.mark.slow

ENGINES = ("reference", "spark")

#: P1 delivers P0#2 before P0#1 (fifo, causal), and P0#9, which nobody sent.
BROKEN = [
    Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,), {0: 1}),
    Event("r", 0, 2, "send", MessageId(0, 2), 0, (1,), {0: 2}),
    Event("r", 1, 1, "deliver", MessageId(0, 2), 0, (1,), {0: 2, 1: 1}),
    Event("r", 1, 2, "deliver", MessageId(0, 1), 0, (1,), {0: 2, 1: 2}),
    Event("r", 1, 3, "deliver", MessageId(0, 9), 0, (1,), {0: 2, 1: 3}),
]
REGEXES = ["--send-regex", "^send (?<message>.*)", "--deliver-regex", "^recv (?<message>.*)"]


def _trace(tmp_path: Path, fmt: str) -> list[str]:
    """The broken trace in ``fmt``, and the options it needs."""
    if fmt == "shiviz":
        (tmp_path / "t.log").write_text(SHIVIZ_PARSER + "\n" + NAMED_LOG)
        return [str(tmp_path / "t.log"), *REGEXES]
    path = tmp_path / f"t.{fmt}"
    (write_jsonl if fmt == "jsonl" else write_parquet)(BROKEN, path)
    return [str(path)]


def _run(
    argv: list[str], capsys: pytest.CaptureFixture[str], engine: str
) -> tuple[int, list[str], str]:
    """Exit code, the verdict's lines (not the one naming the engine) and stderr."""
    code = main(["check", *argv, "--engine", engine, "--master", "local[2]", "--witnesses", "9"])
    captured = capsys.readouterr()
    lines = [line for line in captured.out.splitlines() if not line.startswith("checked ")]
    return code, lines, captured.err


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "shiviz"])
def test_out_writes_the_same_report_on_every_path(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    argv = _trace(tmp_path, fmt)
    seen = {}
    for engine in ENGINES:
        out = tmp_path / f"report-{engine}"
        code, lines, err = _run([*argv, "--out", str(out)], capsys, engine)
        assert (code, err) == (1, ""), (lines, err)
        written = f"report written to {out}/ (summary.json, summary.txt, violations/, invalid/)"
        assert lines[-1] == written
        assert sorted(p.name for p in out.iterdir()) == [
            "invalid",
            "summary.json",
            "summary.txt",
            "violations",
        ]
        summary = json.loads((out / "summary.json").read_text())
        assert summary.pop("engine") == engine
        text = (out / "summary.txt").read_text().splitlines()
        assert (
            text[0].startswith("checked ")
            and text[1:]
            == [line for line in lines[:-1] if not line.startswith("trace of")][-len(text) + 1 :]
        )
        rows = spark.read.parquet(str(out / "violations")).count()
        assert rows == sum(summary["violations"].values()) > 0
        assert spark.read.parquet(str(out / "invalid")).count() == summary["invalid"] == 1
        seen[engine] = (lines[:-1], summary)
    assert seen["reference"] == seen["spark"]


def test_a_delivery_nobody_sent_is_a_violation_and_an_invalid_row_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [*_trace(tmp_path, "jsonl"), "--properties", "integrity"]
    verdicts = [_run(argv, capsys, engine) for engine in ENGINES]
    assert verdicts[0] == verdicts[1]
    assert verdicts[0] == (
        1,
        [
            "integrity  1 violating delivery",
            "    run r: P1 delivered P0#9, which was never sent",
            "invalid    1 row(s)",
            "    run r: delivery of P0#9, which was never sent",
        ],
        "",
    )


def _view(p: int, seq: int, k: int) -> Event:
    return Event("r", p, seq, "view", MessageId(0, k), p, (0, 1), view=k)


def test_a_trace_that_lies_about_its_views_gets_the_same_verdict_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """P1 writes its send of P1#1 with view 2 before installing view 2 (a send made in a
    flush, recorded with the next view); the field is checked, not trusted."""
    m = MessageId(1, 1)
    lying = [
        *(_view(p, 1, 1) for p in (0, 1)),
        Event("r", 1, 2, "send", m, 1, (0, 1), view=2),
        *(_view(p, 3, 2) for p in (0, 1)),
        *(Event("r", p, 4, "deliver", m, 1, (0, 1), view=2) for p in (0, 1)),
    ]
    write_jsonl(lying, tmp_path / "lie.jsonl")
    verdicts = [_run([str(tmp_path / "lie.jsonl")], capsys, engine) for engine in ENGINES]
    assert verdicts[0] == verdicts[1]
    code, lines, _ = verdicts[0]
    assert code == 1 and "same_view  ok" in lines
    assert lines[-2:] == [
        "invalid    1 row(s)",
        "    run r: send of P1#1 recorded in view 2, but P1 was in view 1 by its installations",
    ]
    # the same send, recorded once view 2 is installed, is honest
    honest = [e for e in lying if e.kind != "send"] + [
        Event("r", 1, 5, "send", m, 1, (0, 1), view=2)
    ]
    write_jsonl(honest, tmp_path / "honest.jsonl")
    assert [_run([str(tmp_path / "honest.jsonl")], capsys, e)[0] for e in ENGINES] == [0, 0]


def test_witnesses_that_tie_come_in_the_same_order_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every liveness row has positions (1,) and processes (9,): only the message differs
    sends = [Event("r", p, 1, "send", MessageId(p, 1), p, (9,)) for p in (7, 3, 0, 5, 1, 8, 2)]
    receive = Event("r", 9, 1, "receive", MessageId(0, 1), 0, (9,))
    write_jsonl([*sends, receive], tmp_path / "t.jsonl")
    argv = [str(tmp_path / "t.jsonl"), "--properties", "liveness"]
    verdicts = [_run(argv, capsys, engine) for engine in ENGINES]
    assert verdicts[0] == verdicts[1]
    witnesses = [line.strip() for line in verdicts[0][1] if line.startswith("    ")]
    assert witnesses == [f"run r: P9 never delivered P{p}#1" for p in (0, 1, 2, 3, 5, 7, 8)]


#: A send row with its run and seq left to fill in.
ROW = (
    b'{"run": %s, "process": 0, "seq": %s, "kind": "send", "message": [0, 2], '
    b'"sender": 0, "dest": [1]}'
)


@pytest.mark.parametrize(
    ("run", "seq", "words"),
    [
        (b'"r\\ud800"', b"2", "not text: a lone surrogate escape (such as \\ud800)"),
        (b'"r"', b"9" * 5000, "not JSON (a number longer than 4300 digits)"),
        (b'"r"', b"9" * 30, "field 'seq' holds a number above 2**63 - 1"),
    ],
)
def test_bad_rows_are_one_line_and_exit_2_on_both_engines(
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    run: bytes,
    seq: bytes,
    words: str,
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(ROW % (b'"r"', b"1") + b"\n" + ROW % (run, seq) + b"\n")
    errors = []
    for engine in ENGINES:
        code, lines, err = _run([str(path)], capsys, engine)
        assert code == 2 and not lines
        errors.append(err)
    assert errors[0] == errors[1] == f"mailroom check: {path}:2: {words}\n"


def test_a_shiviz_clock_of_thousands_of_digits_is_the_same_invalid_row_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "big.log"
    records = ['a {"a":1}', "x", 'b {"b":' + "9" * 5000 + "}", "y"]
    log.write_text(SHIVIZ_PARSER + "\n" + "\n".join(records) + "\n")
    verdicts = [_run([str(log)], capsys, engine) for engine in ENGINES]
    assert verdicts[0] == verdicts[1]
    assert verdicts[0][0] == 1
    assert f"    {log}:4: clock is not JSON (a number longer than 4300 digits)" in verdicts[0][1]
