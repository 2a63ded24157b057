"""benchmarks/net_throughput.py runs end to end (tiny counts) and prints its ratios."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow


def test_benchmark_prints_a_ratio_per_protocol() -> None:
    script = ROOT / "benchmarks" / "net_throughput.py"
    out = subprocess.run(
        [sys.executable, str(script), "--count", "40", "--repeat", "1"],
        capture_output=True, text=True, timeout=180, check=True,
    ).stdout  # fmt: skip
    assert "plain asyncio TCP echo" in out
    assert "Stack(Reliable, CBCAST)" in out
    assert "Stack(Reliable, Skeen)" in out  # Skeen is merged into this branch
    assert out.count("%") == 3
