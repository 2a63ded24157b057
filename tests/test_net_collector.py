"""``tune_collector``: the garbage collector's young generation for a process that runs
nodes, set on request only (``python -m mailroom.net --gc-young``), refused when absurd."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailroom.core.errors import LocalError
from mailroom.net import cli, tune_collector
from mailroom.net.collector import YOUNG


@pytest.fixture(autouse=True)
def _kept() -> Iterator[None]:
    before = gc.get_threshold()
    yield
    gc.set_threshold(*before)


def test_it_sets_the_young_generation_and_keeps_the_older_ones() -> None:
    gc.set_threshold(700, 7, 9)
    assert tune_collector() == (700, 7, 9)
    assert gc.get_threshold() == (YOUNG, 7, 9)
    assert tune_collector(5000) == (YOUNG, 7, 9)
    assert gc.get_threshold() == (5000, 7, 9)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "100"])
def test_an_absurd_threshold_is_refused_and_changes_nothing(bad: object) -> None:
    gc.set_threshold(700, 10, 10)
    with pytest.raises(LocalError, match="positive integer"):
        tune_collector(bad)  # type: ignore[arg-type]
    assert gc.get_threshold() == (700, 10, 10)
    assert gc.isenabled()


def test_the_command_line_sets_it_while_it_runs_and_refuses_a_negative_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MAILROOM_KEY", "k" * 32)
    peers = tmp_path / "peers.toml"
    peers.write_text('[peers]\n0 = "127.0.0.1:1"\n')
    seen: list[tuple[int, int, int]] = []

    async def run(args: object) -> int:  # what the process would run, with the collector as set
        seen.append(gc.get_threshold())
        return 0

    monkeypatch.setattr(cli, "run", run)
    gc.set_threshold(700, 10, 10)
    assert cli.main(["--pid", "0", "--peers", str(peers)]) == 0
    assert cli.main(["--pid", "0", "--peers", str(peers), "--gc-young", "2000"]) == 0
    assert cli.main(["--pid", "0", "--peers", str(peers), "--gc-young", "0"]) == 0
    assert seen == [(700, 10, 10), (2000, 10, 10), (700, 10, 10)]  # only when asked
    assert gc.get_threshold() == (700, 10, 10)  # given back when the run returns
    assert cli.main(["--pid", "0", "--peers", str(peers), "--gc-young", "-5"]) == 2
    err = capsys.readouterr().err
    assert "young generation" in err and len(err.strip().splitlines()) == 1
    assert seen == [(700, 10, 10), (2000, 10, 10), (700, 10, 10)]  # it did not run
