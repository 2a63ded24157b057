"""``mailroom sweep`` without Spark: the grid, its settings and errors, and one run's row."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mailroom import codec
from mailroom.cli import main
from mailroom.core.codec import encode, value_size
from mailroom.core.stack import Stack
from mailroom.protocols import CBCAST, RST, Reliable
from mailroom.sim import NetworkModel, Simulation, random_workload
from mailroom.sim.sweep import (
    COLUMNS,
    NetworkSetting,
    RunConfig,
    SweepError,
    SweepGrid,
    app_metadata_bytes,
    percentile,
    run_one,
)


def test_the_grid_expands_to_every_combination_in_order() -> None:
    grid = SweepGrid.from_mapping(
        {"protocol": "rst,cbcast", "n": "3,5", "seeds": 2, "loss": "0,0.1", "messages": 7}
    )
    runs = grid.runs()
    assert len(runs) == 2 * 2 * 2 * 2
    assert runs[0] == RunConfig("rst", 3, NetworkSetting((1.0, 10.0), 0.0, 0.0), 7, 0, True)
    assert runs[1].seed == 1 and runs[2].network.loss == 0.1 and runs[4].n == 5
    assert [r.protocol for r in runs] == ["rst"] * 8 + ["cbcast"] * 8
    assert len(set(runs)) == len(runs)
    # any loss in the grid puts every run on the reliable layer; none, none of them
    assert all(r.reliable for r in runs)
    assert not any(r.reliable for r in SweepGrid(("rst",), (3,)).runs())


def test_toml_lists_and_cli_strings_give_the_same_grid(tmp_path: Path) -> None:
    path = tmp_path / "grid.toml"
    path.write_text(
        'protocol = ["rst", "ks"]\nn = [4, 8]\nseeds = [3, 9]\nmessages = 20\n'
        'delay = ["1:10", [2, 5], 3]\nloss = [0]\nduplicate = [0, 0.2]\n'
    )
    from_file = SweepGrid.from_toml(path)
    from_strings = SweepGrid.from_mapping(
        {
            "protocol": "rst,ks",
            "n": "4,8",
            "seeds": "3,9",
            "messages": "20",
            "delay": "1:10,2:5,3",
            "duplicate": "0,0.2",
        }
    )
    assert from_file == from_strings
    assert from_file.seeds == (3, 9)
    assert [net.delay for net in from_file.networks[::2]] == [(1.0, 10.0), (2.0, 5.0), (3.0, 3.0)]
    assert SweepGrid.from_toml(path, {"n": "16"}).ns == (16,)


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        ({"protocol": "rst,nope"}, "protocol: unknown 'nope'"),
        ({"n": "4,1"}, "n: 1 is too small"),
        ({"n": "four"}, "n: 'four' is not an integer"),
        ({"loss": "1"}, "loss: 1 is not a probability in [0, 1)"),
        ({"duplicate": "-0.1"}, "duplicate: -0.1 is not a probability"),
        ({"delay": "1-10"}, "delay: '1-10' is not a number"),
        ({"delay": "1:2:3"}, "delay: '1:2:3' is not MIN:MAX"),
        ({"delay": "5:1"}, "delay: 5:1 needs 0 <= MIN <= MAX"),
        ({"seeds": "0"}, "seeds: 0 is not a positive number"),
        ({"messages": "0"}, "messages: 0 is not a positive number"),
        ({"loss": "0.1", "reliable": False}, "reliable: loss > 0 without the reliable layer"),
        ({"colour": "red"}, "unknown setting 'colour'"),
    ],
)
def test_bad_settings_say_which(settings: dict[str, object], reason: str) -> None:
    with pytest.raises(SweepError) as info:
        SweepGrid.from_mapping(settings)
    assert reason in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["--protocol", "rst,paxos"], "unknown 'paxos'"),
        (["--n", "1,4"], "n: 1 is too small"),
        (["--loss", "1.5"], "loss: 1.5 is not a probability"),
        (["--delay", "1..10"], "delay: '1..10' is not a number"),
        (["--loss", "0.1", "--no-reliable"], "without the reliable layer"),
        (["--grid", "{missing}"], "cannot read"),
        (["--grid", "{broken}"], "is not valid TOML"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], reason: str
) -> None:
    (tmp_path / "broken.toml").write_text("n = [4,\n")
    argv = [a.format(missing=tmp_path / "none.toml", broken=tmp_path / "broken.toml") for a in argv]
    assert main(["sweep", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mailroom sweep: ") and reason in err and err.count("\n") == 1
    assert not (tmp_path / "out").exists()


def test_cli_without_pyspark_or_java_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pyspark" else real(name, *a)
    )
    assert main(["sweep", "--n", "3", "--out", str(tmp_path / "o")]) == 2
    assert "pip install 'mailroom[spark]'" in capsys.readouterr().err
    monkeypatch.setattr(importlib.util, "find_spec", real)
    pytest.importorskip("pyspark")
    import mailroom.spark

    def no_java(*args: object, **kwargs: object) -> None:
        raise RuntimeError("Java gateway process exited before sending its port number\nmore")

    monkeypatch.setattr(mailroom.spark, "get_session", no_java)
    assert main(["sweep", "--n", "3", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err == (
        "mailroom sweep: cannot start Spark at local[*]: "
        "Java gateway process exited before sending its port number\n"
    )


def test_one_message_run_has_the_numbers_worked_out_by_hand() -> None:
    row = run_one(RunConfig("rst", 2, NetworkSetting((2.0, 2.0)), 1, 0, False))
    assert (row.sent, row.deliveries, row.expected, row.packets) == (1, 1, 1, 1)
    assert (row.delay_mean, row.delay_p99, row.buffer_max, row.violations) == (2.0, 2.0, 0, 0)
    # the one packet: RST from P0 or P1 to the other, seq 1, SENT with one entry
    packet = RST(0, 2).send("m0", to=1)[0].packet
    assert row.meta_mean == row.meta_p99 == row.meta_per_message == codec.metadata_bytes(packet)


@pytest.mark.parametrize(
    ("protocol", "factory", "mode"), [("rst", RST, "unicast"), ("cbcast", CBCAST, "broadcast")]
)
def test_a_run_measures_what_the_simulator_counts(protocol: str, factory: type, mode: str) -> None:
    config = RunConfig(protocol, 4, NetworkSetting((1.0, 10.0), 0.0, 0.2), 30, 5, False)
    row = run_one(config)
    sim = Simulation(
        [factory(pid, 4) for pid in range(4)], NetworkModel((1.0, 10.0), duplicate=0.2), seed=5
    )
    sizes: list[int] = []
    sim.on_transmit = lambda s, pid, t: sizes.append(codec.metadata_bytes(t.packet))
    random_workload(sim, 30, mode=mode, seed=5)
    sim.run()
    m = sim.metrics
    assert (row.sent, row.deliveries, row.packets, row.dropped) == (30, m.deliveries, m.packets, 0)
    assert row.expected == (30 if mode == "unicast" else 120) == m.deliveries
    assert row.delay_mean == pytest.approx(m.delay_total / m.deliveries)
    assert row.delay_p99 == percentile(m.delays, 99) <= m.delay_max
    assert row.buffer_max == m.largest_buffer > 0
    assert row.meta_per_message == pytest.approx(sum(sizes) / 30)
    assert row.violations == 0 and row.wall_s > 0


def test_loss_runs_over_the_reliable_layer_and_still_delivers_everything() -> None:
    row = run_one(RunConfig("cbcast", 3, NetworkSetting((1.0, 4.0), 0.2), 20, 1, True))
    assert row.dropped > 0 and row.control_packets > 0  # acks
    assert row.deliveries == row.expected == 60 and row.violations == 0


def test_stacked_metadata_counts_every_layer_but_not_the_payload() -> None:
    packet = Stack(Reliable(0, 3), CBCAST(0, 3)).broadcast("hello")[0].packet
    assert app_metadata_bytes(packet) == len(encode(packet)) - value_size("hello")
    assert app_metadata_bytes(packet) > codec.metadata_bytes(packet)  # that counts the outer only
    plain = CBCAST(0, 3).broadcast("hello")[0].packet
    assert app_metadata_bytes(plain) == codec.metadata_bytes(plain)


def test_percentile_is_nearest_rank() -> None:
    assert percentile([], 99) == 0.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile(list(range(1, 101)), 99) == 99.0
    assert percentile(list(range(1, 101)), 100) == 100.0


def test_columns_are_the_row_fields() -> None:
    names = [name for name, _ in COLUMNS]
    assert names[:3] == ["protocol", "n", "network"] and names[-1] == "wall_s"
    assert {kind for _, kind in COLUMNS} == {"str", "int", "float", "bool"}


def test_plots_are_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from mailroom.diagram.charts import plot_sweep

    summary = [
        {
            "protocol": p,
            "network": "delay 1:10 loss 0 dup 0",
            "n": n,
            "delay_mean": 5.0 + n,
            "delay_p99": 9.0 + n,
            "buffer_mean": 0.5,
            "buffer_max": 3.0,
            "meta_mean": 10.0 * n,
            "meta_p99": 12.0 * n,
        }
        for p in ("rst", "ks")
        for n in (4, 8)
    ]
    written = plot_sweep(summary, tmp_path / "plots")
    assert sorted(p.name for p in written) == [
        "buffer.png",
        "delay.png",
        "metadata.png",
        "sweep.png",
        "sweep.svg",
    ]
    assert all(p.stat().st_size > 1000 for p in written)
    assert (tmp_path / "plots" / "sweep.png").read_bytes()[:4] == b"\x89PNG"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


class _Tracker:
    """Spark's status tracker as the progress thread sees it: one job, one stage."""

    def __init__(self) -> None:
        self.completed = 0

    def statusTracker(self) -> _Tracker:  # SparkContext's names
        return self

    def getJobIdsForGroup(self, group: str) -> list[int]:
        return [7] if group == "g" else []

    def getJobInfo(self, job: int) -> Any:
        return SimpleNamespace(stageIds=[3])

    def getStageInfo(self, stage: int) -> Any:
        return SimpleNamespace(numCompletedTasks=self.completed)


def test_progress_on_a_terminal_rewrites_one_line() -> None:
    from mailroom.spark.sweep import Progress

    tracker, stream = _Tracker(), _Tty()
    progress = Progress(tracker, "g", 5, stream, interval=3600)  # the thread never polls
    with progress:
        for k in (2, 2, 5):
            tracker.completed = k
            progress.show()
    assert stream.getvalue() == "\rruns done 0/5\rruns done 2/5\rruns done 5/5\n"
    assert Progress(tracker, "other", 5, _Tty()).done() == 0
