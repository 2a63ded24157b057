"""The replicated-object benchmark runs end to end against PySyncObj with tiny settings:
its table has a row per setting and measure and a column per system, and every
figure it computes is positive. Nothing here times anything (its figures mean
nothing on a smoke run).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "replicated_throughput.py"
SYSTEMS = ["mailroom", "mailroom-sync", "mailroom-majority", "pysyncobj", "pysyncobj-nobatch"]
MEASURES = ["call_rate", "call_p50_ms", "call_p99_ms", "cpu_per_call_us", "rss_mb"]


def pysyncobj_missing() -> str:
    try:
        import pysyncobj  # noqa: F401
    except ImportError:
        return "pysyncobj not installed (pip install -e '.[bench]')"
    return ""


def positive(spread: dict[str, float]) -> bool:
    return all(not math.isnan(v) and v > 0 for v in spread.values())


@pytest.mark.slow
@pytest.mark.skipif(bool(pysyncobj_missing()), reason=pysyncobj_missing())
def test_the_smoke_run_prints_a_full_table_of_positive_figures(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--smoke",
            "--in-flight",
            "1,4",
            "--nobatch-at",
            "1",
            "--load-policy",
            "flag",
            "--json",
            str(tmp_path / "r.json"),
            "--gc-freeze",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=True,
    ).stdout
    figures: dict[str, Any] = json.loads((tmp_path / "r.json").read_text())
    assert figures["protocol"] == "sequencer" and list(figures["n"]) == ["3"]
    assert figures["gc_freeze"] and "freezes its heap after start-up" in out
    assert "FLAGGED" in figures["flag"]  # one round: never quotable
    at3 = figures["n"]["3"]
    summary = at3["summary"]
    expected = [f"{w}/{m}" for w in ("1", "4") for m in MEASURES] + ["failover/failover_s"]
    assert list(summary) == expected
    for key, entry in summary.items():
        setting = key.split("/")[0]
        systems = {
            "1": SYSTEMS,
            "4": SYSTEMS[:4],  # PySyncObj with batching off runs only at --nobatch-at
            "failover": ["mailroom", "pysyncobj"],
        }[setting]
        assert list(entry["systems"]) == systems, key
        mine = [s for s in systems if s.startswith("mailroom")]
        assert list(entry["ratios"]) == mine, key
        for spread in [*entry["systems"].values(), *entry["ratios"].values()]:
            assert positive(spread), (key, entry)
    # every run of the round ran, and the load was recorded at its start and end
    assert all(len(runs) == 1 and runs[0] for runs in at3["runs"].values())
    assert len(at3["load"]) == 1 and {"start", "end"} <= set(at3["load"][0])
    # the printed table: a header, a rule, and a row per summary entry
    lines = [line for line in out.splitlines() if line.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    assert head[:2] == ["in flight per member", "measure"] and len(head) == 2 + 5 + 3
    assert set(lines[1]) <= set("|-") and len(lines) == 2 + len(expected)
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [r[0] for r in rows] == [k.split("/")[0] for k in expected]
    for row in rows:
        assert len(row) == len(head)
        for cell in row[2:]:
            if cell != "—":  # a number (a tiny ratio prints as 0.00: positive above)
                assert float(cell.split()[0]) >= 0, row
    assert "ratios mailroom / PySyncObj per round" in out and "load" in out


@pytest.mark.parametrize(
    ("systems", "says"),
    [
        ("mailroom,redis", "--systems: no system redis"),
        ("mailroom", "--systems must include pysyncobj"),
    ],
)
def test_a_bad_systems_list_is_one_line_and_exit_2(systems: str, says: str) -> None:
    got = subprocess.run(
        [sys.executable, str(SCRIPT), "--systems", systems],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert got.returncode == 2 and says in got.stderr.splitlines()[-1]


def test_baseline_src_adds_a_before_row_of_every_mailroom_row(tmp_path: Path) -> None:
    sys.path.append(str(SCRIPT.parent))  # the benchmarks import each other by name
    import replicated_throughput as rt

    args = rt.parse(
        [
            "--systems",
            "mailroom-majority,pysyncobj,pysyncobj-nobatch",
            "--baseline-src",
            str(ROOT / "src"),
        ]
    )
    assert args.systems == [
        "mailroom-majority",
        "pysyncobj",
        "pysyncobj-nobatch",
        "mailroom-majority-before",
    ]
    assert rt.label("mailroom-majority-before") == f"{rt.SYSTEMS['mailroom-majority']} [before]"
    with pytest.raises(SystemExit):  # no mailroom package there: refused at once
        rt.parse(["--baseline-src", str(tmp_path)])
