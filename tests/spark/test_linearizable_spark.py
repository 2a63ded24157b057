"""The Spark engine of the linearizability checker gives the local engine's verdicts
and witnesses, on published histories and on generated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mailroom.cli import main
from mailroom.linearizable import MODELS, NOT_LINEARIZABLE, UNKNOWN, check_calls, pair, read_history
from mailroom.linearizable.spark import check_on_spark

JEPSEN = Path(__file__).resolve().parents[1] / "data" / "jepsen"


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("c10-bad.txt", "kv"),
        pytest.param("c10-ok.txt", "kv", marks=pytest.mark.slow),
        pytest.param("etcd_000.log", "register", marks=pytest.mark.slow),
        pytest.param("etcd_002.log", "register", marks=pytest.mark.slow),
    ],
)
def test_spark_and_local_engines_agree(spark: Any, name: str, model: str) -> None:
    fmt = "edn" if name.endswith(".txt") else "log"
    calls = pair(read_history(JEPSEN / name, fmt))
    local = check_calls(calls, MODELS[model])
    remote = check_on_spark(spark, calls, MODELS[model], groups=3)
    assert remote == local  # verdicts, every key's counts, the witness
    if name == "c10-bad.txt":
        assert remote.verdict == NOT_LINEARIZABLE and remote.witness is not None
        assert remote.witness.key == "0"


def test_spark_engine_keeps_unknown(spark: Any) -> None:
    calls = pair(read_history(JEPSEN / "c10-ok.txt", "edn"))
    remote = check_on_spark(spark, calls, MODELS["kv"], budget=3)
    assert remote == check_calls(calls, MODELS["kv"], budget=3)
    assert remote.verdict == UNKNOWN


@pytest.mark.slow
def test_cli_spark_engine(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(JEPSEN / "etcd_000.log")
    assert main(["check", "--model", "register", "--engine", "local", path]) == 1
    local = capsys.readouterr().out.splitlines()
    assert main(["check", "--model", "register", "--engine", "spark", path]) == 1
    remote = capsys.readouterr().out.splitlines()
    assert local[:-1] == remote[:-1] and "spark engine" in remote[-1]
