"""benchmarks/net_throughput.py runs end to end (tiny counts) and prints its ratios."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_benchmark_prints_peak_ratio_and_latency_per_system() -> None:
    script = ROOT / "benchmarks" / "net_throughput.py"
    out = subprocess.run(
        [sys.executable, str(script), "--n", "3", "--count", "40", "--repeat", "1",
         "--seconds", "0.3"],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if "  " in line}
    for name in ("CBCAST", "Skeen", "Sequencer", "LamportTotalOrder"):
        line = rows[f"Stack(Reliable, {name})"]
        assert len(line.split()) == 10  # name (2 words), order, rate, ratio, CPU, 4 latencies
        batched = rows[f"Stack(Reliable, {name}) batched"]  # --batch 64 by default
        fields = batched.split()  # name (3 words), order, rate, ratio, CPU, 4 latencies
        assert len(fields) == 11 and float(fields[4]) > 0
        assert all(float(x) > 0 for x in fields[7:])  # paced batches have latencies too
    assert "plain asyncio TCP echo" in rows
    try:
        import redis  # noqa: F401
    except ImportError:
        has_redis = False
    else:
        has_redis = shutil.which("redis-server") is not None
    if has_redis:
        assert "Redis Streams (XADD/XREAD)" in rows
    else:
        assert "Redis Streams row skipped" in out and "apt-get install -y redis-server" in out


def test_a_baseline_adds_before_rows_batched_and_not() -> None:
    script = ROOT / "benchmarks" / "net_throughput.py"
    out = subprocess.run(
        [sys.executable, str(script), "--n", "3", "--count", "40", "--repeat", "1",
         "--loads", "", "--systems", "CBCAST", "--baseline-src", str(ROOT / "src")],
        capture_output=True, text=True, timeout=600, check=True,
    ).stdout  # fmt: skip
    rows = {line.split("  ")[0].strip(): line for line in out.splitlines() if "  " in line}
    for name in ("", " batched", " [before]", " batched [before]"):
        fields = rows[f"Stack(Reliable, CBCAST){name}"].split()
        assert float(fields[-1]) > 0 and float(fields[-3]) > 0  # CPU µs, remote/s
