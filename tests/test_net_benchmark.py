"""The benchmarks run end to end with tiny durations, and their discipline holds:
alternating rounds, medians and ranges, ratios per round, the load checked.

Nothing here times anything: the runs are smoke runs whose figures mean nothing;
the checks are on what the benchmarks compute and print.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.append(str(BENCH))  # the benchmarks import each other by name

import rounds  # noqa: E402

TINY = [
    "--n",
    "3",
    "--seconds",
    "0.2",
    "--warmup",
    "0.1",
    "--rounds",
    "2",
    "--latency-rounds",
    "1",
    "--latency-seconds",
    "0.3",
    "--load-policy",
    "flag",
]


def bench(
    script: str, *args: str, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run a benchmark script with this interpreter (a failure raises, with ``check``)."""
    return subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=check,
        env=env,
    )


def run(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    return bench(script, *args, env=env).stdout


def net(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[str, Any]:
    """Run net_throughput.py with tiny settings; its output and its JSON summary at n = 3."""
    out = run("net_throughput.py", *TINY, "--json", str(tmp_path / "f.json"), *args, env=env)
    figures = json.loads((tmp_path / "f.json").read_text())
    return out, figures["sizes"]["3"]


def redis_missing() -> str:
    try:
        import hiredis  # noqa: F401
        import redis  # noqa: F401
    except ImportError:
        return "redis-py or hiredis not installed (pip install -e '.[bench]')"
    return "" if shutil.which("redis-server") else "redis-server not installed"


def pysyncobj_missing() -> str:
    try:
        import pysyncobj  # noqa: F401
    except ImportError:
        return "pysyncobj not installed (pip install -e '.[bench]')"
    return ""


# -- the discipline (rounds.py) --------------------------------------------------------------


def test_ratios_are_taken_per_round_and_summarised_by_their_median() -> None:
    row, base = [10.0, 30.0, 20.0], [10.0, 10.0, 40.0]
    assert rounds.ratios(row, base) == [1.0, 3.0, 0.5]
    spread = rounds.ratio_spread({"a": row, "b": base}, "a", "b")
    assert (spread.median, spread.low, spread.high) == (1.0, 0.5, 3.0)
    # not the ratio of the medians (20 / 10 = 2)
    assert spread.median != rounds.Spread.of(row).median / rounds.Spread.of(base).median
    assert rounds.Spread.of([2.0, 1.0, 3.0]).text(".1f") == "2.0 (1.0–3.0)"
    assert rounds.Spread.of([2.0]).text(".1f") == "2.0"


def test_a_run_above_the_load_limit_is_refused_or_flagged(monkeypatch: Any, capsys: Any) -> None:
    monkeypatch.setattr(rounds, "loadavg", lambda: (3.5, 2.0, 1.0))
    args = type("Args", (), {"max_load": 1.0, "load_policy": "refuse", "load_wait": 0.0})()
    with pytest.raises(SystemExit) as exit_:
        rounds.check_load(args)
    assert exit_.value.code == 2 and "3.50 is above --max-load 1" in capsys.readouterr().err
    args.load_policy = "flag"
    assert rounds.check_load(args).startswith("FLAGGED: 1-minute load 3.50")
    args.load_policy = "wait"  # waits at most load_wait (0 s here), then refuses
    with pytest.raises(SystemExit):
        rounds.check_load(args)
    args.max_load = 4.0
    assert rounds.check_load(args) == ""
    assert rounds.settings_flag(5, 1.0) == ""
    assert "2 rounds (fewer than 5) and 0.2 s peak windows" in rounds.settings_flag(2, 0.2)
    assert rounds.flags("", "FLAGGED: a", "FLAGGED: b") == "FLAGGED: a; FLAGGED: b"


def test_a_process_cpu_is_read_from_proc() -> None:
    times = os.times()
    assert abs(rounds.proc_cpu_seconds(os.getpid()) - (times.user + times.system)) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("script", ["net_throughput.py", "bench_delivery.py"])
def test_the_command_line_refuses_a_loaded_machine(script: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), "--max-load", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.startswith("refused: 1-minute load")
    assert len(proc.stderr.strip().splitlines()) == 1


# -- net_throughput.py ------------------------------------------------------------------------

MAILROOM_ROWS = ["CBCAST", "Sequencer", "Skeen", "Lamport"]


@pytest.mark.slow
def test_every_mailroom_row_one_per_call_and_batched_with_latency(tmp_path: Path) -> None:
    out, size = net(tmp_path, "--systems", "plain," + ",".join(MAILROOM_ROWS))
    table = size["summary"]
    for system in MAILROOM_ROWS:
        for row in (system, f"{system}@batch"):
            f = table[row]
            assert f["rounds"] == 2 and f["remote_rate"]["min"] > 0 and f["cpu_us"]["median"] > 0
            assert f["ordered_rate"]["median"] > 0 and f["rss_mb"]["median"] > 0
            for load in ("0.2", "0.8"):
                assert f[f"p50_ms@{load}"]["median"] > 0
                assert f[f"p99_ms@{load}"]["median"] >= f[f"p50_ms@{load}"]["median"]
        assert (
            f"{table[system]['name']}  " in out
            and "broadcast_many(64)" in table[f"{system}@batch"]["name"]
        )
    assert table["plain"]["remote_rate"]["median"] > 0 and "p50_ms@0.2" not in table["plain"]
    # alternating rounds: every row has one peak run per round, in the same order
    assert all(len(runs) == 2 for runs in size["measured"]["peaks"].values())
    for line in (
        "peak round 1/2: start load",
        "peak round 2/2: end   load",
        "latency round 1/1: start load",
        "latency round 1/1: end   load",
    ):
        assert out.count(line) == 1
    assert "FLAGGED: 2 rounds (fewer than 5) and 0.2 s peak windows (under 1 s)" in out
    assert (
        len(size["measured"]["load"]["peak"]) == 2
        and len(size["measured"]["load"]["peak"][1]["end"]) == 3
    )


@pytest.mark.slow
def test_the_redis_row_counts_its_server_and_sets_the_ratio(tmp_path: Path) -> None:
    if why := redis_missing():
        pytest.skip(why)
    out, size = net(tmp_path, "--systems", "redis,CBCAST", "--batch", "1")
    table, peaks = size["summary"], size["measured"]["peaks"]
    assert "Redis Streams (sync, 64 XADD + XREAD a trip)" in out
    assert table["redis"]["vs_redis"]["median"] == 1.0  # each round against itself
    assert all(run["server_cpu"] > 0 for run in peaks["redis"])  # redis-server's CPU counted
    cbcast, redis = peaks["CBCAST"], peaks["redis"]
    per_round = [c["remote_rate"] / r["remote_rate"] for c, r in zip(cbcast, redis, strict=True)]
    assert table["CBCAST"]["vs_redis"]["median"] == pytest.approx(statistics.median(per_round))
    assert table["redis"]["p50_ms@0.2"]["median"] > 0


@pytest.mark.slow
def test_without_a_redis_server_the_row_is_skipped_with_a_reason(tmp_path: Path) -> None:
    env = dict(os.environ, PATH="/nonexistent")
    out, size = net(tmp_path, "--systems", "redis,plain", "--loads", "", env=env)
    # without redis-py the package is named first; without the server, the PATH
    assert re.search(
        r"Redis Streams row skipped: (redis-server is not on PATH|Python package "
        r"'(redis|hiredis)' is missing); install it with",
        out,
    ), out
    assert list(size["summary"]) == ["plain"]


@pytest.mark.slow
def test_the_pysyncobj_rows_count_applied_commands(tmp_path: Path) -> None:
    if why := pysyncobj_missing():
        pytest.skip(why)
    out, size = net(
        tmp_path,
        "--systems",
        "pysyncobj,Sequencer",
        "--batch",
        "1",
        "--pysyncobj-in-flight",
        "20,20:nobatch",
    )
    table = size["summary"]
    assert "PySyncObj (Raft), 20 in flight, appendEntriesUseBatch off" in out
    for row in ("pysyncobj@20", "pysyncobj@20:nobatch"):
        f = table[row]
        assert f["remote_rate"]["min"] > 0 and f["cpu_us"]["median"] > 0
        assert f["p50_ms@0.2"]["median"] > 0
        # a command applied at each of the 3 replicas: 2 remote deliveries, 3 in all
        assert f["ordered_rate"]["median"] == pytest.approx(f["remote_rate"]["median"] / 2, rel=0.5)
    # the ratio is to the faster of the two PySyncObj rows in each round
    fastest = max(
        table["pysyncobj@20"]["vs_pysyncobj"]["max"],
        table["pysyncobj@20:nobatch"]["vs_pysyncobj"]["max"],
    )
    assert fastest == 1.0 and table["Sequencer"]["vs_pysyncobj"]["median"] > 0


@pytest.mark.slow
def test_a_baseline_adds_before_rows_one_per_call_and_batched(tmp_path: Path) -> None:
    out, size = net(
        tmp_path, "--systems", "CBCAST", "--loads", "", "--baseline-src", str(ROOT / "src")
    )
    for row in ("CBCAST", "CBCAST@batch", "CBCAST@before", "CBCAST@batch-before"):
        assert size["summary"][row]["remote_rate"]["median"] > 0
    assert "Stack(Reliable, CBCAST) broadcast_many(64) [before]" in out


# -- the PySyncObj runner (also issue 30's) -------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("batch", [True, False])
def test_pysyncobj_paced_runs_time_every_command_at_every_replica(batch: bool) -> None:
    if why := pysyncobj_missing():
        pytest.skip(why)
    import peer_pysyncobj

    result = peer_pysyncobj.run_paced(3, 50.0, 10, peer_pysyncobj.Setup(1, batch))
    assert len(result["latency"]) == 30 and min(result["latency"]) > 0  # each of 3 x 10
    assert len(result["calls"]) == 30 and min(result["calls"]) > 0


@pytest.mark.slow
def test_pysyncobj_fail_over_after_the_leader_is_killed() -> None:
    if why := pysyncobj_missing():
        pytest.skip(why)
    import peer_pysyncobj

    result = peer_pysyncobj.run_failover(3, 6.0, 1.0)
    assert 0 <= result["leader"] < 3 and result["rss_mb"] > 0
    assert result["failover_s"] is not None and result["failover_s"] > 0


# -- bench_delivery.py and the one command --------------------------------------------------


@pytest.mark.slow
def test_bench_delivery_prints_every_protocol_against_a_no_op(tmp_path: Path) -> None:
    out = run(
        "bench_delivery.py",
        "--burst",
        "50",
        "--sizes",
        "3",
        "8",
        "--rounds",
        "2",
        "--load-policy",
        "flag",
        "--json",
        str(tmp_path / "d.json"),
    )
    rows = json.loads((tmp_path / "d.json").read_text())["rows"]
    names = {(r["protocol"], r["n"]) for r in rows}
    assert names == {
        (p, n)
        for p in ("no-op", "Unordered", "Fifo", "CBCAST", "KS", "RST", "Fifo/64", "CBCAST/64")
        for n in (3, 8)
    }
    for r in rows:
        assert r["in_order_us"]["min"] > 0 and r["reverse_us"]["min"] > 0
        if r["protocol"] == "no-op":
            assert r["in_order_vs_noop"]["median"] == 1.0
    assert out.count("bench_delivery round") == 4 and "KS           8" in out


@pytest.mark.slow
def test_one_command_writes_every_table(tmp_path: Path) -> None:
    run("figures.py", "--smoke", "--load-policy", "flag", "--out", str(tmp_path))
    names = ["bench_delivery", "net_throughput", "replicated_throughput"]
    if pysyncobj_missing():  # the replicated step needs its peer: one line instead
        assert "replicated_throughput skipped:" in (tmp_path / f"{names.pop()}.txt").read_text()
    for name in names:
        assert (tmp_path / f"{name}.txt").read_text().strip()
        assert json.loads((tmp_path / f"{name}.json").read_text())
