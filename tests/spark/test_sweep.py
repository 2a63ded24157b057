"""``mailroom sweep`` on the shared SparkSession: one Parquet row per run, equal to the
pure runner's; the summary, progress lines, plots and the CLI's exit codes."""

from __future__ import annotations

import importlib.util
import io
import re
from pathlib import Path
from typing import Any

import attrs
import pyarrow.parquet as pq
import pytest

from mailroom.cli import main
from mailroom.sim.sweep import COLUMNS, SweepGrid, run_one
from mailroom.spark.sweep import SUMMARY_MEANS, run_sweep

GRID = SweepGrid(("rst", "cbcast"), (3, 4), seeds=(0, 1), messages=8)


@pytest.fixture(scope="module")
def swept(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, str]:
    progress = io.StringIO()
    result = run_sweep(
        spark, GRID, tmp_path_factory.mktemp("sweep"), progress=progress, interval=0.05
    )
    return result, progress.getvalue()


def test_one_row_per_run_with_the_schema_and_the_pure_runners_values(
    spark: Any, swept: tuple[Any, str]
) -> None:
    result, _ = swept
    table = spark.read.parquet(str(result.path))
    assert result.runs == table.count() == len(GRID.runs()) == 8
    types = {"str": "string", "int": "bigint", "float": "double", "bool": "boolean"}
    assert table.dtypes == [(name, types[kind]) for name, kind in COLUMNS]
    got = {(r.protocol, r.n, r.seed): r.asDict() for r in table.collect()}
    for config in GRID.runs():
        want = attrs.asdict(run_one(config))
        row = got[(config.protocol, config.n, config.seed)]
        assert row.pop("wall_s") > 0 and want.pop("wall_s") > 0
        assert row == want


def test_the_summary_is_the_mean_over_seeds(spark: Any, swept: tuple[Any, str]) -> None:
    result, _ = swept
    rows = {(r["protocol"], r["n"]): r for r in result.summary}
    assert sorted(rows) == [("cbcast", 3), ("cbcast", 4), ("rst", 3), ("rst", 4)]
    for (protocol, n), summary in rows.items():
        runs = [run_one(c) for c in GRID.runs() if (c.protocol, c.n) == (protocol, n)]
        assert summary["runs"] == 2 and summary["violations"] == 0
        for column in SUMMARY_MEANS[:-1]:  # all but wall_s
            mean = sum(getattr(r, column) for r in runs) / 2
            assert summary[column] == pytest.approx(mean), column


def test_progress_counts_runs_up_to_the_total(swept: tuple[Any, str]) -> None:
    _, text = swept
    counts = [int(k) for k, total in re.findall(r"runs done (\d+)/(\d+)", text) if total == "8"]
    assert counts and counts[-1] == 8 and text.endswith("runs done 8/8\n")
    assert counts == sorted(counts) and len(set(counts)) == len(counts)  # one line per change


def test_cli_writes_rows_summary_and_plots(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grid = tmp_path / "grid.toml"
    grid.write_text('protocol = ["ks", "rst"]\nn = [3, 5]\nseeds = 1\nmessages = 6\n')
    out = tmp_path / "out[1]"  # [ ] would be a glob to Hadoop: the summary must not read back
    argv = ["sweep", "--grid", str(grid), "--loss", "0,0.1", "--out", str(out)]
    assert main([*argv, "--master", "local[2]", "--quiet"]) == 0
    text = capsys.readouterr().out
    assert "sweeping 8 runs over the reliable layer on Spark local[2]" in text
    table = [line.split() for line in text.splitlines() if line.lstrip().startswith(("ks", "rst"))]
    # by protocol, then network (6 words: "delay 1:10 loss 0 dup 0"), then n
    assert [(t[0], t[4], t[7]) for t in table] == [
        (p, loss, n) for p in ("ks", "rst") for loss in ("0", "0.1") for n in ("3", "5")
    ]
    assert pq.read_table(out / "runs.parquet").num_rows == 8
    assert (out / "summary.csv").read_text().count("\n") == 9
    assert (out / "summary.md").read_text().startswith("| protocol | network | n |")
    if importlib.util.find_spec("matplotlib") is not None:
        names = ("delay.png", "buffer.png", "metadata.png", "sweep.png", "sweep.svg")
        assert f"plots: {', '.join(str(out / name) for name in names)}" in text
        assert (out / "sweep.png").stat().st_size > 1000
