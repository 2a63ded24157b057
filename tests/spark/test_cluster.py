"""``mailroom check`` and ``mailroom sweep`` on a real standalone cluster: a master and two
worker processes on 127.0.0.1 (``mailroom.spark.cluster``), reached through ``--master``.

The CLI runs in a child process (one SparkContext per process; the shared local
session lives in this one). Expensive (four JVMs): marked slow.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from mailroom.core.messages import MessageId
from mailroom.spark.cluster import standalone_cluster
from mailroom.trace.checkers import check
from mailroom.trace.events import Event
from mailroom.trace.parquet import write_parquet

pytestmark = pytest.mark.slow

FIFO_BROKEN = [
    Event("r", 0, 1, "send", MessageId(0, 1), 0, (1, 2), {0: 1}),
    Event("r", 0, 2, "send", MessageId(0, 2), 0, (1, 2), {0: 2}),
    Event("r", 1, 1, "deliver", MessageId(0, 2), 0, (1, 2), {0: 2, 1: 1}),
    Event("r", 1, 2, "deliver", MessageId(0, 1), 0, (1, 2), {0: 2, 1: 2}),
    Event("r", 2, 1, "deliver", MessageId(0, 1), 0, (1, 2), {0: 1, 2: 1}),
]


@pytest.fixture(scope="module")
def master() -> Iterator[str]:
    with standalone_cluster(workers=2, cores=1, memory="1g") as url:
        yield url


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mailroom", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def test_check_runs_on_two_worker_processes(master: str, tmp_path: Path) -> None:
    write_parquet(FIFO_BROKEN, tmp_path / "t.parquet")
    out = tmp_path / "report"
    done = _cli("check", str(tmp_path / "t.parquet"), "--master", master, "--out", str(out))
    assert done.returncode == 1, done.stderr
    assert f"on Spark {master}" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    ref = check(FIFO_BROKEN)
    assert summary["violations"]["fifo"] == ref.count("fifo") == 1
    assert summary["violations"]["liveness"] == ref.count("liveness") == 1
    assert "P1 delivered P0#2 before P0#1" in done.stdout
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if " WARN " in line] == []  # quiet Spark


def test_sweep_runs_on_two_worker_processes(master: str, tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    done = _cli(
        "sweep",
        "--protocol",
        "rst,cbcast",
        "--n",
        "3",
        "--seeds",
        "2",
        "--messages",
        "6",
        "--master",
        master,
        "--out",
        str(out),
        "--quiet",
    )
    assert done.returncode == 0, done.stderr
    rows = pq.read_table(str(out / "runs.parquet")).to_pylist()
    assert len(rows) == 4 and {r["protocol"] for r in rows} == {"rst", "cbcast"}
    assert all(r["violations"] == 0 for r in rows)
