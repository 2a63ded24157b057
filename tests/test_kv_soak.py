"""The key-value soak runs end to end on real processes with tiny settings: a row per
window, every write acknowledged, the replicas equal at the end, every member ended.
Nothing here times anything (a smoke run's figures mean nothing)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "kv_soak.py"


def test_a_short_soak_prints_its_windows_and_ends_with_equal_replicas() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--minutes",
            "0.1",
            "--every",
            "2",
            "--clients",
            "2",
            "--keys",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line for line in done.stdout.splitlines() if re.match(r"\| \d+ \|", line)]
    assert len(rows) >= 3
    assert all(int(row.split("|")[3]) == 0 for row in rows)  # no failed write
    written = re.search(r"([\d,]+) writes acknowledged, 0 failed", done.stdout)
    assert written is not None and int(written[1].replace(",", "")) > 0
    assert "replicas equal: P0 applied" in done.stdout
    pids = [int(p) for p in re.findall(r"pid (\d+)", done.stdout)]
    assert all(not Path(f"/proc/{pid}").exists() for pid in pids)


def test_bad_arguments_are_one_line() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--clients", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "--clients" in done.stderr.splitlines()[-1]
