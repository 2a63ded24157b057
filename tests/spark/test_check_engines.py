"""Both engines of ``mailroom check`` say the same thing about the same trace, mode by mode."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mailroom.cli import main
from mailroom.protocols import Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.jsonl import write_jsonl


def _buggy(path: Path) -> None:
    """Unordered broadcast on a reordering network, with a header promising everything."""
    sim = Simulation(
        [Unordered(pid, 4) for pid in range(4)], NetworkModel(delay=(1.0, 30.0)), seed=3
    )
    random_workload(sim, 60, mode="broadcast", seed=3)
    sim.run()
    header = sim.trace_header("unordered", ("integrity", "fifo", "causal", "total", "liveness"))
    write_jsonl(sim.trace, path, header=header)


def _verdict(text: str) -> list[str]:
    """The report without the line that names the engine and the one naming the report."""
    skip = ("checked ", "report written")
    return [line for line in text.splitlines() if not line.startswith(skip)]


# full mode in the full tier (the quick tier has it in test_differential)
@pytest.mark.parametrize("mode", ["summary", pytest.param("full", marks=pytest.mark.slow)])
def test_reference_and_spark_agree_in_numbers_and_words(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    trace = tmp_path / "bug.jsonl"
    _buggy(trace)
    verdicts, summaries = {}, {}
    for engine in ("reference", "spark"):
        out = tmp_path / engine
        argv = ["check", str(trace), "--engine", engine, "--mode", mode, "--out", str(out)]
        assert main([*argv, "--master", "local[2]"]) == 1
        verdicts[engine] = _verdict(capsys.readouterr().out)
        summaries[engine] = json.loads((out / "summary.json").read_text())
        assert sorted(p.name for p in out.iterdir()) == [
            "invalid",
            "summary.json",
            "summary.txt",
            "violations",
        ]
        rows = spark.read.parquet(str(out / "violations")).count()
        assert rows == sum(summaries[engine]["violations"].values())
    ref, spk = summaries["reference"], summaries["spark"]
    assert ref["violations"] == spk["violations"] and ref["invalid"] == spk["invalid"]
    assert ref["violations"]["causal"] > 0 and ref["violations"]["total"] > 0
    assert verdicts["reference"] == verdicts["spark"]
    unit = "violating deliveries" if mode == "summary" else "violating pairs"
    assert any(line.startswith("causal") and unit in line for line in verdicts["spark"])


@pytest.mark.slow  # the full tier: the quick tier's bad rows are test_cli_check's
def test_spark_writes_no_report_without_out_and_refuses_bad_rows_like_the_reference(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _buggy(tmp_path / "bug.jsonl")
    assert main(["check", "bug.jsonl", "--engine", "spark", "--master", "local[2]"]) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bug.jsonl"]
    capsys.readouterr()
    lines = (tmp_path / "bug.jsonl").read_text().splitlines()
    lines[5] = "not json"
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    errors = []
    for engine in ("reference", "spark"):
        assert main(["check", "bad.jsonl", "--engine", engine, "--master", "local[2]"]) == 2
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1] == "mailroom check: bad.jsonl:6: not JSON (Expecting value)\n"
    (tmp_path / "empty.jsonl").write_text("")
    assert main(["check", "empty.jsonl", "--engine", "spark"]) == 2
    assert "no usable events" in capsys.readouterr().err
