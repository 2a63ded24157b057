"""``mailroom check`` end to end on the shared SparkSession: report directory and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
from spark_traces import NAMED_LOG

from mailroom.cli import main
from mailroom.core.messages import MessageId
from mailroom.spark import get_session
from mailroom.trace.events import Event
from mailroom.trace.jsonl import write_jsonl
from mailroom.trace.parquet import write_parquet
from mailroom.trace.shiviz import SHIVIZ_PARSER

CLEAN = [
    Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,), {0: 1}),
    Event("r", 1, 1, "receive", MessageId(0, 1), 0, (1,)),
    Event("r", 1, 2, "deliver", MessageId(0, 1), 0, (1,), {0: 1, 1: 1}),
]
FIFO_BROKEN = [
    Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,), {0: 1}),
    Event("r", 0, 2, "send", MessageId(0, 2), 0, (1,), {0: 2}),
    Event("r", 1, 1, "deliver", MessageId(0, 2), 0, (1,), {0: 2, 1: 1}),
    Event("r", 1, 2, "deliver", MessageId(0, 1), 0, (1,), {0: 2, 1: 2}),
]


def test_clean_trace_exits_0_and_writes_a_report(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_jsonl(CLEAN, tmp_path / "t.jsonl")
    out = tmp_path / "report"
    assert main(["check", str(tmp_path / "t.jsonl"), "--engine", "spark", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "checked 3 events in 1 run(s)" in text and "fifo       ok" in text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["violations"] == dict.fromkeys(
        ["integrity", "fifo", "causal", "total", "liveness"], 0
    )
    assert (out / "violations").is_dir() and (out / "invalid").is_dir()


def test_violations_exit_1_with_witnesses(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_parquet(FIFO_BROKEN, tmp_path / "t.parquet")
    out = tmp_path / "report"
    code = main(
        [
            "check",
            str(tmp_path / "t.parquet"),
            "--properties",
            "fifo,causal,clock",
            "--out",
            str(out),
        ]
    )
    assert code == 1
    text = capsys.readouterr().out
    assert "fifo       1 violating delivery" in text
    assert "P1 delivered P0#2 before P0#1, sent before it" in text
    assert "clock      ok" in text
    rows = spark.read.parquet(str(out / "violations")).collect()
    assert sorted((r.property, tuple(r.positions)) for r in rows) == [
        ("causal", (2, 1)),
        ("fifo", (2, 1)),
    ]


def test_shiviz_log_checks_what_its_clocks_allow(
    spark: Any, shiviz_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "check",
            str(shiviz_dir / "simple-reliable-broadcast.log"),
            "--send-regex",
            r"Initiating RBBroadcast\((?<message>DataMessage\(\d+,\w+\))\)",
            "--deliver-regex",
            r"RBDeliver of message (?<message>DataMessage\(\d+,\w+\))",
            "--out",
            str(tmp_path / "r"),
        ]
    )
    text = capsys.readouterr().out
    assert code == 0, text
    assert "checked 39 ShiViz records in 1 execution(s), 3 hosts" in text
    assert "checked: clock, fifo, causal" in text


def test_a_tampered_shiviz_log_has_clock_violations(
    spark: Any, shiviz_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (shiviz_dir / "RpcClientServer.log").read_text().splitlines()
    # the server's 3rd event claims to know the client's 9th, which never happens
    i = next(k for k, line in enumerate(lines) if line.startswith('server {"server":3'))
    lines[i] = 'server {"server":3, "client":9}'
    log = tmp_path / "tampered.log"
    log.write_text("\n".join(lines) + "\n")
    assert main(["check", str(log), "--out", str(tmp_path / "r")]) == 1
    text = capsys.readouterr().out
    assert "clock      " in text and "names event 9 of client, which is not in the log" in text
    assert "fifo and causal need --send-regex/--deliver-regex" in text


@pytest.mark.parametrize("engine", ["spark", "reference"])
def test_shiviz_verdicts_use_the_logs_names_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    log = tmp_path / "named.log"
    log.write_text(SHIVIZ_PARSER + "\n" + NAMED_LOG)
    regexes = ["--send-regex", "^send (?<message>.*)", "--deliver-regex", "^recv (?<message>.*)"]
    argv = ["check", str(log), *regexes, "--engine", engine, "--out", str(tmp_path / "r")]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "checked: clock, fifo, causal" in text
    assert "beta delivered Msg(2) before Msg(1), sent before it" in text
    assert "beta delivered Msg(2) before Msg(1), whose send happened before it" in text
    assert "beta delivered 'Ghost(9)', which no record matched by the send regex sent" in text
    assert "P1" not in text and "P0#" not in text
    nothing = ["--send-regex", "^nothing (?<message>.*)", "--deliver-regex", regexes[3]]
    argv = ["check", str(log), *nothing, "--engine", engine, "--out", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the send regex matched no record" in err and err.count("\n") == 1


@pytest.mark.parametrize("engine", ["spark", "reference"])
def test_a_truncated_parquet_file_is_one_line_on_both_engines(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str
) -> None:
    write_parquet(FIFO_BROKEN, tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "cut.parquet").write_bytes(data[: len(data) // 2])
    argv = ["check", str(tmp_path / "cut.parquet"), "--engine", engine]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cut.parquet" in err
    assert "\tat " not in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["check", "nope.jsonl"], "cannot read nope.jsonl: no such file"),
        (["check", "{trace}", "--properties", "fifo,speed"], "unknown properties ['speed']"),
        (["check", "{empty}"], "e.jsonl:1: missing field 'process'"),
        (["check", "{blank}", "--engine", "spark"], "no usable events"),
        (["check", "{trace}", "--format", "shiviz", "--parser", "(?<host>"], "not a regular"),
        (["check", "{trace}", "--format", "parquet"], "cannot load"),
    ],
)
def test_unusable_input_exits_2_with_one_line(
    spark: Any,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    reason: str,
) -> None:
    write_jsonl(CLEAN, tmp_path / "t.jsonl")
    (tmp_path / "e.jsonl").write_text('{"run": "r"}\n')
    (tmp_path / "b.jsonl").write_text("\n")
    names = {"trace": tmp_path / "t.jsonl", "empty": tmp_path / "e.jsonl"}
    argv = [a.format(**names, blank=tmp_path / "b.jsonl") for a in argv] + [
        "--out",
        str(tmp_path / "r"),
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert reason in err and err.count("\n") == 1


def test_reference_engine_still_works(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_jsonl(FIFO_BROKEN, tmp_path / "t.jsonl")
    assert main(["check", str(tmp_path / "t.jsonl"), "--engine", "reference"]) == 1
    assert "fifo       1 violating delivery" in capsys.readouterr().out


# iterative in the full tier (the quick tier has it in test_iterative_clocks)
@pytest.mark.parametrize(
    "propagation", ["sequential", pytest.param("iterative", marks=pytest.mark.slow)]
)
def test_a_trace_without_clocks_gets_them_either_way(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], propagation: str
) -> None:
    bare = [attrs.evolve(e, vc=None) for e in FIFO_BROKEN]
    write_parquet(bare, tmp_path / "t.parquet")
    args = [
        "check",
        str(tmp_path / "t.parquet"),
        "--properties",
        "fifo,causal",
        "--engine",
        "spark",
    ]
    code = main([*args, "--propagation", propagation, "--out", str(tmp_path / "report")])
    assert code == 1
    text = capsys.readouterr().out
    assert "P1 delivered P0#2 before P0#1, sent before it" in text
    assert "causal     1 violating delivery" in text


def test_an_unknown_propagation_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["check", "t.parquet", "--propagation", "guess"])
    assert exc.value.code == 2
    assert "--propagation" in capsys.readouterr().err


@pytest.mark.slow
def test_a_fresh_jvm_says_nothing_on_stderr_and_leaves_no_directory(tmp_path: Path) -> None:
    # PySpark's shell lines and the JVM's incubator warning are start-up noise, not
    # something the user asked for (a new process: the shared session's JVM is warm);
    # the checkpoint directory the session made for itself goes when the process does
    write_jsonl(CLEAN, tmp_path / "t.jsonl")
    argv = ["check", str(tmp_path / "t.jsonl"), "--engine", "spark", "--master", "local[1]"]
    argv += ["--out", str(tmp_path / "report")]
    temp = tmp_path / "temp"
    temp.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "mailroom", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "TMPDIR": str(temp)},
    )
    assert done.returncode == 0, done.stderr
    assert "checked 3 events" in done.stdout
    assert done.stderr == ""
    assert not list(temp.glob("mailroom-ckpt-*"))


def test_a_reused_session_keeps_its_checkpoint_directory(spark: Any) -> None:
    # asking for the session again (each CLI command and check does) makes no new one
    before = spark.sparkContext.getCheckpointDir()
    again = get_session("local[2]", app="mailroom-tests", shuffle_partitions=2)
    assert again is spark
    assert spark.sparkContext.getCheckpointDir() == before


@pytest.mark.slow
def test_a_jvm_that_cannot_start_says_one_line(tmp_path: Path) -> None:
    # a bad master URL: the JVM prints its stack trace as it exits; the user gets one line
    write_jsonl(CLEAN, tmp_path / "t.jsonl")
    argv = ["check", str(tmp_path / "t.jsonl"), "--engine", "spark", "--master", "bogus://x"]
    done = subprocess.run(
        [sys.executable, "-m", "mailroom", *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("mailroom check: cannot start Spark at bogus://x: ")
    assert done.stderr.count("\n") == 1, done.stderr


def test_a_local_jvm_runs_the_throughput_collector(spark: Any) -> None:
    # a local master's JVM is a batch job: the parallel collector, not the default G1
    beans = spark.sparkContext._jvm.java.lang.management.ManagementFactory
    names = {str(b.getName()) for b in beans.getGarbageCollectorMXBeans()}
    assert names == {"PS Scavenge", "PS MarkSweep"}
