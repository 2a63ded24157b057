"""The benchmarks run the pure and the compiled build side by side (``--compiled
PYTHON``): every mailroom row a second time, marked ``[compiled]``, right after its pure
row in every round; each process runs the build its row names, or refuses in one line;
the ratios compiled / pure are taken per round; ``speed_bars.py`` judges each row's
median ratio against its bar.

The compiled build is only here in CI's compiled phase (``scripts/test-compiled``, whose
interpreter is the compiled build, MAILROOM_EXPECT_COMPILED=1): there the compiled rows
run; in the pure package, naming this interpreter as the compiled one is refused, in
one line, before any round. Nothing here times anything.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

import mailroom
from tests.test_net_benchmark import bench

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
sys.path.append(str(BENCH))  # the benchmarks import each other by name

import net_throughput as net  # noqa: E402
import peer_run  # noqa: E402
import replicated_throughput as rt  # noqa: E402
import speed_bars  # noqa: E402

THIS = "compiled" if mailroom.compiled else "pure"
OTHER = "pure" if mailroom.compiled else "compiled"


def net_args(*argv: str) -> argparse.Namespace:
    return net.parser().parse_args(list(argv))


def figures(rate: float) -> dict[str, float]:
    """A peak run's figures (``peer_run.peak_figures``) with this remote rate."""
    return {"remote_rate": rate, "all_rate": 1.5 * rate, "cpu_us": 10.0, "rss_mb": 40.0}


# -- rows, names and processes ----------------------------------------------------------------


def test_each_build_of_a_row_runs_right_after_it_and_is_marked() -> None:
    args = net_args(
        "--producers", "4", "--compiled", "/x/python", "--baseline-src", str(ROOT / "src")
    )
    rows = net.rows_of(args, ["redis", "CBCAST"])
    assert rows == [
        "redis",
        *("CBCAST", "CBCAST@compiled", "CBCAST@before"),
        *("CBCAST@batch", "CBCAST@batch-compiled", "CBCAST@batch-before"),
        *("CBCAST@tasks", "CBCAST@tasks-compiled", "CBCAST@tasks-before"),
    ]
    assert net.name_of("CBCAST@compiled", args) == "Stack(Reliable, CBCAST) [compiled]"
    assert (
        net.name_of("CBCAST@tasks-compiled", args)
        == "Stack(Reliable, CBCAST), 4 producer tasks [compiled]"
    )
    assert (
        net.name_of("CBCAST@batch-before", args)
        == "Stack(Reliable, CBCAST) broadcast_many(64) [before]"
    )
    for row in rows[1:]:  # a tag says the same row back
        system, _, tag = row.partition("@")
        assert net.row_of(system, net.Variant.parse(tag)) == row
    assert net.pure_twin("CBCAST@tasks-compiled") == "CBCAST@tasks"
    assert net.pure_twin("CBCAST@compiled") == "CBCAST"
    with pytest.raises(ValueError, match="no row variant"):
        net.Variant.parse("batch-fast")
    # the latency runs: compiled as pure; never the producer tasks' rows (peak only)
    assert net.has_latency("CBCAST@compiled") and net.has_latency("CBCAST@batch-compiled")
    assert not net.has_latency("CBCAST@tasks") and not net.has_latency("CBCAST@tasks-compiled")
    # without --compiled, the rows are as before
    plain = net.rows_of(net_args(), ["CBCAST"])
    assert plain == ["CBCAST", "CBCAST@batch"]


def test_each_build_runs_its_own_interpreter_and_library() -> None:
    args = net_args("--producers", "4", "--compiled", "/x/python")
    server = net.RedisServer()
    for row, python, build in [
        ("CBCAST@tasks-compiled", "/x/python", "compiled"),
        ("CBCAST@tasks", sys.executable, "pure"),
    ]:
        cmds, socks = net.child_commands(row, 3, ["--seconds", "1"], args, server)
        for s in socks:
            s.close()
        assert len(cmds) == 3
        for cmd in cmds:
            assert cmd[0] == python
            assert cmd[cmd.index("--build") + 1] == build
            assert cmd[cmd.index("--producers") + 1] == "4"
    compiled = net.child_env("CBCAST@compiled", args)
    pure = net.child_env("CBCAST", args)
    assert "PYTHONPATH" not in compiled  # it imports its interpreter's installed build
    assert pure["PYTHONPATH"].split(os.pathsep)[0] == str(ROOT / "src")
    before = net.child_env("CBCAST@before", net_args("--baseline-src", "/tmp/old/src"))
    assert before["PYTHONPATH"] == "/tmp/old/src"


def test_a_process_refuses_to_run_the_other_build_in_one_line() -> None:
    assert peer_run.build_refusal(THIS) == "" and peer_run.build_refusal("") == ""
    assert peer_run.build_refusal(OTHER).startswith(f"refused: {sys.executable} imports the {THIS}")
    common = ["--pid", "0", "--n", "3", "--ports", "1,2,3", "--fd", "99", "--build", OTHER]
    for script, role in (("peer_mailroom.py", "CBCAST"), ("peer_replicated.py", "mailroom")):
        got = bench(script, "--role", role, *common, check=False)
        assert got.returncode == 2 and got.stdout == "", (script, got.stderr)
        assert got.stderr.count("\n") == 1 and f"not the {OTHER} one" in got.stderr


def test_the_replicated_rows_of_each_build(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rt, "check_compiled", lambda python: None)  # no compiled build here
    args = rt.parse(
        [
            "--systems",
            "mailroom-majority,pysyncobj,pysyncobj-nobatch",
            "--compiled",
            "/x/python",
            "--baseline-src",
            str(ROOT / "src"),
        ]
    )
    assert args.systems == [
        "mailroom-majority",
        "mailroom-majority-compiled",
        "pysyncobj",
        "pysyncobj-nobatch",
        "mailroom-majority-before",
    ]
    assert rt.label("mailroom-majority-compiled") == f"{rt.SYSTEMS['mailroom-majority']} [compiled]"
    assert rt.split("mailroom-sync-compiled") == ("mailroom-sync", "compiled")
    # each member of a [compiled] row: the compiled interpreter, its build checked
    from peer_replicated import Setup

    setup = Setup(1, compiled="/x/python")
    assert setup.build == "compiled" and setup.tag == "1-compiled"
    assert Setup(1, pythonpath="/tmp/old").tag == "1-before" and Setup(1).build == "pure"


def test_the_replicated_table_has_a_compiled_over_pure_column() -> None:
    args = argparse.Namespace(in_flight=[1], nobatch_at=[1], failover=False, systems=[])
    args.systems = ["mailroom", "mailroom-compiled", "pysyncobj", "pysyncobj-nobatch"]

    def run(rate: float) -> dict[str, float]:
        return dict.fromkeys(m for m, _, _ in rt.MEASURES) | {"call_rate": rate}

    runs: dict[str, list[Any]] = {
        "mailroom@1": [run(100), run(200), run(300)],
        "mailroom-compiled@1": [run(150), run(200), run(600)],
        "pysyncobj@1": [run(100), run(100), run(100)],
        "pysyncobj-nobatch@1": [run(50), run(400), run(50)],
    }
    for runs_ in runs.values():
        for r in runs_:
            r.update(call_p50_ms=1.0, call_p99_ms=2.0, cpu_per_call_us=3.0, rss_mb=4.0)
    summary = rt.summarise(runs, args)
    rate = summary["1/call_rate"]
    assert rate["vs_pure"] == {"mailroom-compiled": {"median": 1.5, "min": 1.0, "max": 2.0}}
    # to PySyncObj's faster variant per round: 150/100, 200/400, 600/100
    assert rate["ratios"]["mailroom-compiled"]["median"] == 1.5
    text = rt.table(3, summary, "", 3, args.systems)
    head = text.splitlines()[1]
    assert head.endswith("| mailroom, no checkpoint [compiled] / pure |")
    assert "| 1 | ops/s |" in text and "1.50 (1.00–2.00) |" in text.splitlines()[3]


# -- ratios per round -------------------------------------------------------------------------


def test_compiled_over_pure_is_taken_per_round(capsys: pytest.CaptureFixture[str]) -> None:
    args = net_args("--compiled", "/x/python", "--batch", "1", "--loads", "")
    pure, compiled, redis = [100.0, 200.0, 300.0], [300.0, 240.0, 330.0], [100.0, 100.0, 200.0]
    measured = {
        "peaks": {
            "redis": [figures(x) for x in redis],
            "CBCAST": [figures(x) for x in pure],
            "CBCAST@compiled": [figures(x) for x in compiled],
        },
        "latency": {},
    }
    table = net.summary(3, measured, args)
    per_round = [c / p for c, p in zip(compiled, pure, strict=True)]  # 3.0, 1.2, 1.1
    assert table["CBCAST@compiled"]["vs_pure"].median == pytest.approx(statistics.median(per_round))
    # not the ratio of the medians (300 / 200)
    assert table["CBCAST@compiled"]["vs_pure"].median != pytest.approx(300 / 200)
    assert table["CBCAST@compiled"]["vs_redis"].median == pytest.approx(2.4)
    assert math.isnan(table["CBCAST"]["vs_pure"].median)  # a pure row has no such ratio
    net.print_size(3, table, args, "")
    out = capsys.readouterr().out
    assert out.splitlines()[2].rstrip().endswith("vs pure")
    line = next(x for x in out.splitlines() if x.startswith("Stack(Reliable, CBCAST) [compiled]"))
    assert line.rstrip().endswith("1.20 (1.10–3.00)")


# -- the speed bars ---------------------------------------------------------------------------


def test_every_bar_is_judged_on_its_median_ratio() -> None:
    builds = ["pure", "compiled", "before"]
    args = net_args(
        "--producers", "64", "--compiled", "/x/python", "--baseline-src", str(ROOT / "src")
    )
    systems = ["redis", "CBCAST", "Sequencer", "Skeen", "Lamport"]
    rows = speed_bars.net_rows(5, args, systems)
    # at n = 5: CBCAST and the Sequencer from 1 producer and from 64, in every build
    assert len(rows) == 1 + 2 * 2 * 3 and "CBCAST@batch" not in rows
    assert len(speed_bars.net_rows(3, args, systems)) == 1 + (2 * 3 + 2) * 3
    rate = {"pure": 100.0, "compiled": 160.0, "before": 104.0}
    peaks = {"redis": [figures(100.0)] * 3}
    for row in rows[1:]:
        build = net.build_of(row)
        peaks[row] = [figures(rate[build]), figures(rate[build]), None]  # a failed run
    bars = speed_bars.net_bars(5, {"peaks": peaks}, builds, has_redis=True)
    text = [b.text() for b in bars]
    assert len(bars) == 4 * 3
    assert (
        "CBCAST 64 producers n=5 compiled: 1.60x Redis (bar 1.2x) met; compiled / pure 1.60x"
        in text
    )
    assert "CBCAST 64 producers n=5 pure: 1.00x Redis (bar 1.2x) MISSED" in text
    assert "Sequencer 1 producer n=5 pure vs before: 0.96x before (bar 0.95x) met" in text
    assert speed_bars.Bar("p50", 1.2, 1.0, "PySyncObj", at_most=True).met is False
    assert speed_bars.Bar("p50", 0.9, 1.0, "PySyncObj", at_most=True).met is True
    assert speed_bars.Bar("x", math.nan, 1.0, "Redis").text() == "x: - Redis (bar 1.0x) MISSED"


def test_a_replicated_bar_is_to_pysyncobjs_faster_variant_of_each_round() -> None:
    def run(rate: float, p50: float) -> dict[str, float]:
        return {"call_rate": rate, "call_p50_ms": p50}

    runs = {
        "mailroom-majority@1": [run(100, 1.0), run(100, 1.0), run(100, 1.0)],
        "mailroom-majority-compiled@1": [run(200, 0.5), run(120, 0.6), run(300, 0.3)],
        "pysyncobj@1": [run(100, 0.5), run(50, 2.0), run(100, 0.4)],
        "pysyncobj-nobatch@1": [run(150, 0.6), run(150, 0.5), run(10, 9.0)],
    }
    bars = {b.what: b for b in speed_bars.replicated_bars(3, runs, ["pure", "compiled"])}
    ops = bars["replicated 1 call at a time (majority) ops/s n=3 compiled"]
    assert ops.ratio == pytest.approx(statistics.median([200 / 150, 120 / 150, 300 / 100]))
    assert ops.compiled_vs_pure == pytest.approx(2.0)
    p50 = bars["replicated 1 call at a time (majority) p50 n=3 compiled"]
    assert p50.at_most and p50.ratio == pytest.approx(
        statistics.median([0.5 / 0.6, 0.6 / 0.5, 0.3 / 0.4])
    )


# -- with the compiled build, or its refusal --------------------------------------------------


def test_the_compiled_rows_run_or_the_pure_interpreter_is_refused(tmp_path: Path) -> None:
    tiny = ["--rounds", "1", "--load-policy", "flag", "--compiled", sys.executable]
    if not mailroom.compiled:  # the pure package named as the compiled build: one line
        for script, extra in [
            ("net_throughput.py", ["--systems", "CBCAST"]),
            ("replicated_throughput.py", []),
            ("speed_bars.py", []),
        ]:
            got = bench(script, *tiny, *extra, check=False)
            assert got.returncode == 2 and got.stdout == "", (script, got.stderr)
            assert got.stderr.count("\n") == 1
            assert got.stderr.startswith(
                f"refused: --compiled {sys.executable}: it imports the pure build"
            )
        return
    # this interpreter is the compiled build: its rows run beside the pure ones
    got = bench(
        "net_throughput.py",
        *tiny,
        *("--n", "3", "--systems", "CBCAST", "--batch", "1", "--loads", ""),
        *("--seconds", "0.2", "--warmup", "0.1", "--json", str(tmp_path / "f.json")),
    )
    summary = json.loads((tmp_path / "f.json").read_text())["sizes"]["3"]["summary"]
    assert list(summary) == ["CBCAST", "CBCAST@compiled"]
    for row in summary.values():
        assert row["rounds"] == 1 and row["remote_rate"]["median"] > 0
    assert summary["CBCAST@compiled"]["vs_pure"]["median"] > 0
    assert "Stack(Reliable, CBCAST) [compiled]  " in got.stdout and "refused" not in got.stderr


@pytest.mark.slow
def test_the_speed_bars_run_every_row_of_n_3_in_one_invocation(tmp_path: Path) -> None:
    build = ["--compiled", sys.executable] if mailroom.compiled else []  # pure: no bars to judge
    got = bench(
        "speed_bars.py",
        *build,
        *("--n", "3", "--rounds", "1", "--seconds", "0.2", "--warmup", "0.1"),
        *("--replicated-seconds", "0.3", "--load-policy", "flag"),
        *("--json", str(tmp_path / "bars.json")),
    )
    builds = ["pure", *(["compiled"] if build else [])]
    net_rows = [
        f"{system} {send} n=3 {b}"
        for system, send in [
            ("CBCAST", "64 producers"),
            ("Sequencer", "64 producers"),
            ("CBCAST", "1 producer"),
            ("Sequencer", "1 producer"),
            ("CBCAST", "broadcast_many(64)"),
            ("Sequencer", "broadcast_many(64)"),
            ("Skeen", "1 producer"),
            ("Lamport", "1 producer"),
        ]
        for b in builds
    ]
    verdict = got.stdout.split("\nBars (medians of the per-round ratios over 1 rounds")[1]
    lines = [line.strip() for line in verdict.splitlines()[1:] if line.strip()]
    assert [line.split(":")[0] for line in lines[: len(net_rows)]] == net_rows
    for line in lines:
        assert line.endswith(("met", "MISSED")) or "; compiled / pure " in line, line
    results = json.loads((tmp_path / "bars.json").read_text())
    assert results["builds"] == builds and "FLAGGED" in results["flag"]
    measured = results["net"]["3"]["measured"]["peaks"]
    assert all(len(runs) == 1 and runs[0] for runs in measured.values())
    if "Redis Streams row skipped" not in got.stdout:
        assert all(" Redis (bar " in line and ": - " not in line for line in lines[: len(net_rows)])
    if "replicated rows skipped" not in got.stdout:  # PySyncObj is installed
        assert list(results["replicated"]) == ["3"]
        assert any(
            line.startswith("replicated 1 call at a time (majority) p50 n=3 pure") for line in lines
        )
