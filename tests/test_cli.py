"""The mailroom command: demo, simulate, check, and clear errors for bad arguments."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mailroom import KS, Unordered
from mailroom.cli import PROTOCOLS, main
from mailroom.sim import NetworkModel, Simulation, random_workload
from mailroom.trace import PROPERTIES, Event, TraceError, check, write_jsonl
from mailroom.trace.header import read_header


def _exit_code(argv: list[str]) -> int | str | None:
    """The command's exit code, whether it returns it or raises SystemExit."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_demo_tells_the_story(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    # Unordered: Carol delivers m3 first and the checker and detector say so
    parts = out.split("=" * 78)  # banner, title, banner, body, ...
    unordered, rst, cbcast = parts[2], parts[4], parts[6]
    assert "m3 reaches Carol  (delivers m3)" in out
    assert "P2 delivered m3 before m1" in out
    assert "the causality detector at Carol: m1 arrived stamped [1, 0, 0]" in out
    assert out.startswith("mailroom demo: Alice (P0), Bob (P1) and Carol (P2)")
    assert "How to read the steps:" in rst and "┊ m3 held       m3 waits in the mail room" in rst
    # RST: m3 waits, the story's final matrices appear
    assert "Carol's mail room: m3 waits for 1 message from Alice (its 1st message to Carol)" in rst
    assert "m1 reaches Carol  (delivers m1, m3)" in rst
    assert "causal     ok" in rst and "causal     ok" in cbcast
    assert "SENT      0 1 1             0 1 1             0 1 1" in rst
    assert "deliver m3 ✗" in unordered
    assert "clock" in cbcast and "┊" in rst


def test_demo_one_protocol(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--protocol", "CBCAST"]) == 0
    out = capsys.readouterr().out
    assert "CBCAST: causal broadcast" in out and "Raynal" not in out


def test_simulate_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.jsonl"
    assert (
        main(
            ["simulate", "--protocol", "rst", "-n", "4", "--messages", "40", "--trace", str(trace)]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "packets_per_message" in out and "causal     ok" in out
    out_dir = str(tmp_path / "report")
    assert main(["check", str(trace), "--engine", "reference", "--out", out_dir]) == 0
    assert (
        main(
            [
                "simulate",
                "--protocol",
                "unordered",
                "-n",
                "4",
                "--messages",
                "80",
                "--trace",
                str(trace),
                "--delay",
                "1",
                "30",
            ]
        )
        == 0
    )  # promises no order
    assert (
        main(
            [
                "check",
                str(trace),
                "--properties",
                "causal",
                "--engine",
                "reference",
                "--out",
                out_dir,
            ]
        )
        == 1
    )
    assert "violating deliveries" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["check", "/nonexistent.jsonl", "--engine", "reference"], "nonexistent"),
        (["check", "BAD", "--properties", "speed", "--engine", "reference"], "speed"),
        (["simulate", "--processes", "0"], "--processes"),
        (["simulate", "--delay", "5", "1"], "--delay"),
        (["simulate", "--protocol", "nope"], "invalid choice"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _exit_code(argv) == 2
    err = capsys.readouterr().err
    assert words in err


def test_bad_trace_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"run": "r"}\n')
    assert _exit_code(["check", str(bad), "--engine", "reference", "--out", str(tmp_path)]) == 2
    assert "missing field" in capsys.readouterr().err


def test_console_script_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mailroom", "demo", "--protocol", "rst"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Raynal-Schiper-Toueg" in done.stdout


def test_check_without_pyspark_uses_the_reference_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    trace = tmp_path / "t.jsonl"
    assert main(["simulate", "--messages", "5", "--trace", str(trace)]) == 0
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    assert _exit_code(["check", str(trace)]) == 0
    assert "with the reference engine" in capsys.readouterr().out
    assert _exit_code(["check", str(trace), "--engine", "spark"]) == 2
    assert "pip install 'mailroom[spark]'" in capsys.readouterr().err


@pytest.mark.parametrize("protocol", sorted(PROTOCOLS))
def test_every_protocol_simulated_then_checked_exits_0(
    protocol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = tmp_path / "t.jsonl"
    argv = ["simulate", "--protocol", protocol, "-n", "4", "--messages", "40"]
    assert main([*argv, "--duplicate", "0.1", "--trace", str(trace)]) == 0
    header = read_header(trace)
    assert header is not None and header.protocol == protocol and header.n == 4
    assert header.promises == PROTOCOLS[protocol][2]
    assert header.settings["duplicate"] == 0.1 and header.settings["seed"] == 0
    capsys.readouterr()
    for mode in ("summary", "full"):
        assert main(["check", str(trace), "--engine", "reference", "--mode", mode]) == 0
        out = capsys.readouterr().out
        for prop in PROPERTIES:
            if prop in header.promises:
                assert f"{prop:10s} ok" in out
            else:
                assert f"{prop:10s} not promised by {protocol} (not checked)" in out


def test_the_readme_flow_checks_what_cbcast_promises(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "--protocol", "CBCAST", "-n", "8", "--messages", "500"]
    assert main([*argv, "--duplicate", "0.1", "--trace", "run.jsonl"]) == 0
    out = capsys.readouterr().out
    assert "total      not promised by cbcast" in out
    assert main(["check", "run.jsonl", "--out", "report/"]) == 0
    out = capsys.readouterr().out
    assert "checked 8350 events in 1 run(s) with the reference engine (summary mode" in out
    assert "report written to report/ (" in out and "report//" not in out
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["violations"] == dict.fromkeys(["integrity", "fifo", "causal", "liveness"], 0)
    assert summary["not_promised"] == ["total"] and summary["engine"] == "reference"
    # what it does not promise can still be asked for, and the words say what is counted
    assert main(["check", "run.jsonl", "--properties", "total"]) == 1
    summary_out = capsys.readouterr().out
    assert main(["check", "run.jsonl", "--properties", "total", "--mode", "full"]) == 1
    full_out = capsys.readouterr().out
    assert re.search(r"total +\d+ violating deliveries", summary_out)
    assert re.search(r"total +\d+ violating pairs", full_out)


def _buggy_trace() -> list[Event]:
    sim = Simulation([Unordered(pid, 4) for pid in range(4)], NetworkModel(delay=(1.0, 30.0)))
    random_workload(sim, 120, mode="broadcast", seed=3)
    sim.run()
    return sim.trace


def test_summary_mode_counts_violating_deliveries_of_the_full_set() -> None:
    events = _buggy_trace()
    full = check(events, ["fifo", "causal", "total"], mode="full")
    summary = check(events, ["fifo", "causal", "total"], mode="summary")
    for prop in ("fifo", "causal"):
        later = {(v.run, v.processes, v.messages[0]) for v in full.violations[prop]}
        assert summary.count(prop) == len(later) > 0
        assert set(summary.violations[prop]) <= set(full.violations[prop])
    later = {(v.run, v.processes, v.messages[1]) for v in full.violations["total"]}
    assert summary.count("total") == len(later) > 0
    assert set(summary.violations["total"]) <= set(full.violations["total"])
    assert full.count("causal") > summary.count("causal")


def test_reference_report_files_and_no_report_without_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    write_jsonl(_buggy_trace(), "bug.jsonl")
    assert main(["check", "bug.jsonl", "--engine", "reference"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bug.jsonl"]
    assert main(["check", "bug.jsonl", "--engine", "reference", "--out", "r"]) == 1
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["mode"] == "summary" and summary["violations"]["causal"] > 0
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "r" / "violations").to_pylist()
    assert sum(r["property"] == "causal" for r in rows) == summary["violations"]["causal"]
    assert (tmp_path / "r" / "summary.txt").read_text().startswith("checked ")


#: One valid JSON Lines row (a send nobody delivers), for the bad variants below.
ROW = (
    b'{"run": "r", "process": 0, "seq": 1, "kind": "send", "message": [0, 1], '
    b'"sender": 0, "dest": [1]}\n'
)


def _exit_and_err(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str]:
    code = _exit_code(argv)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("engine", ["reference", "auto"])
@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"", "no usable events"),
        (b"\n\n", "no usable events"),
        (b'{"header": {"producer": "me", "protocol": "rst"}}\n', "no usable events"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", ":1: nested too deeply"),
        (b'{"run": "r"}\nnot json\n', ":1: missing field 'process'"),
        (b"\xff\xfe\n", ":1: not UTF-8 text"),
        (ROW.replace(b'"r"', b'"r\\ud800"'), ":1: not text: a lone surrogate escape"),
        (ROW.replace(b'"r"', b'{"\\udc00": 1}'), ":1: not text: a lone surrogate escape"),
        (ROW.replace(b'"seq": 1', b'"seq": ' + b"9" * 5000), ":1: not JSON (a number longer"),
        (ROW.replace(b'"seq": 1', b'"seq": ' + b"9" * 30), ":1: field 'seq' holds a number"),
        (ROW.replace(b'"dest": [1]', b'"dest": [1, 9223372036854775808]'), ":1: field 'dest'"),
        (b'{"header": {"producer": "\\ud800"}}\n' + ROW, ":1: not text"),
    ],
)
def test_bad_traces_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], engine: str, content: bytes, words: str
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(content)
    code, err = _exit_and_err(["check", str(trace), "--engine", engine], capsys)
    assert code == 2 and words in err and err.count("\n") == 1, err


def test_a_directory_or_a_device_is_refused_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path, words in ((str(tmp_path), "it is a directory"), ("/dev/zero", "not a regular")):
        for engine in ("reference", "auto"):
            argv = ["check", path, "--format", "jsonl", "--engine", engine]
            code, err = _exit_and_err(argv, capsys)
            assert code == 2 and words in err and err.count("\n") == 1, err


def test_a_line_over_the_budget_is_refused(tmp_path: Path) -> None:
    from mailroom.trace.jsonl import read_jsonl_trace

    trace = tmp_path / "t.jsonl"
    trace.write_bytes(b"\n" + b"0" * 5000)
    with pytest.raises(TraceError, match=r"t.jsonl:2: line longer than 4096 bytes"):
        read_jsonl_trace(trace, max_line=4096)


def test_simulate_fails_fast_on_an_unwritable_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["simulate", "--messages", "5", "--trace", "/nonexistent/dir/x.jsonl"]
    code, err = _exit_and_err(argv, capsys)
    assert code == 2 and "cannot write /nonexistent/dir/x.jsonl" in err
    assert err.count("\n") == 1 and capsys.readouterr().out == ""


def test_demo_into_a_closed_pipe_has_no_traceback() -> None:
    done = subprocess.run(
        f"{sys.executable} -m mailroom demo | head -3",
        shell=True,
        capture_output=True,
        text=True,
        check=True,
    )
    assert len(done.stdout.splitlines()) == 3 and done.stderr == ""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    import mailroom

    assert _exit_code(["--version"]) == 0
    build = "compiled with mypyc" if mailroom.compiled else "pure Python"
    assert capsys.readouterr().out.strip() == f"mailroom {mailroom.__version__} ({build})"
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert f'version = "{mailroom.__version__}"' in pyproject


def test_papercuts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _exit_and_err(["simulate", "-n", "0"], capsys)
    assert code == 2 and err.startswith("usage: mailroom simulate")
    code, err = _exit_and_err(["simulate", "-n", "1"], capsys)
    assert code == 2 and "at least 2" in err
    assert main(["simulate", "--protocol", "RST", "-n", "3", "--messages", "20"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"mean_delay +[\d.]+ time units", out)
    assert re.search(r"metadata_bytes_per_data_packet +[\d.]+ bytes/data packet", out)
    argv = ["simulate", "--protocol", "cbcast", "-n", "3", "--messages", "20", "--loss", "0.2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "over the reliable layer" in out and "liveness   ok" in out
    assert not re.search(r"dropped +0 ", out)


def test_simulate_and_sweep_measure_metadata_alike() -> None:
    from mailroom.sim.sweep import NetworkSetting, RunConfig, run_one

    row = run_one(RunConfig("ks", 4, NetworkSetting((1.0, 10.0)), 30, 0, False))
    sim = Simulation([KS(pid, 4) for pid in range(4)], NetworkModel(delay=(1.0, 10.0)))
    random_workload(sim, 30, mode="unicast", seed=0)
    sim.run()
    summary = sim.metrics.summary()
    assert summary["metadata_bytes_per_data_packet"] == pytest.approx(row.meta_mean)
    assert summary["metadata_bytes_per_message"] == pytest.approx(row.meta_per_message)


def test_a_parquet_trace_keeps_its_promises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyarrow")
    from mailroom.trace.jsonl import read_jsonl_trace
    from mailroom.trace.parquet import write_parquet

    assert main(["simulate", "--protocol", "fifo", "--trace", str(tmp_path / "t.jsonl")]) == 0
    header, events = read_jsonl_trace(tmp_path / "t.jsonl")
    write_parquet(events, tmp_path / "t.parquet", header=header)
    capsys.readouterr()
    assert main(["check", str(tmp_path / "t.parquet")]) == 0
    out = capsys.readouterr().out
    assert "causal     not promised by fifo (not checked)" in out and "fifo       ok" in out


@pytest.mark.parametrize(
    ("option", "words"),
    [
        (["--witnesses", "-1"], "--witnesses must be between 0 and 1000"),
        (["--witnesses", "5000"], "--witnesses must be between 0 and 1000"),
        (["--in-flight", "nan"], "--in-flight must be a finite number"),
        (["--in-flight", "inf"], "--in-flight must be a finite number"),
        (["--in-flight", "-1"], "--in-flight must be a finite number"),
    ],
)
def test_bad_options_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], option: list[str], words: str
) -> None:
    trace = tmp_path / "t.jsonl"
    trace.write_bytes(ROW)
    for engine in ("reference", "spark"):
        code, err = _exit_and_err(["check", str(trace), "--engine", engine, *option], capsys)
        assert code == 2 and words in err and err.count("\n") == 1, err


def test_a_shiviz_clock_of_thousands_of_digits_is_an_invalid_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from mailroom.trace.shiviz import SHIVIZ_PARSER

    log = tmp_path / "big.log"
    records = ['a {"a":1}', "x", 'b {"b":' + "9" * 5000 + "}", "y", 'c {"\\ud800":1}', "z"]
    log.write_text(SHIVIZ_PARSER + "\n" + "\n".join(records) + "\n")
    code = main(["check", str(log), "--engine", "reference", "--witnesses", "5"])
    out = capsys.readouterr().out
    assert code == 1, out
    assert f"    {log}:4: clock is not JSON (a number longer than 4300 digits)" in out
    assert f"    {log}:6: clock is not text: a lone surrogate escape (such as \\ud800)" in out
    assert "invalid    2 row(s)" in out
