"""The Spark engine of the linearizability checker gives the local engine's verdicts
and witnesses, on published histories and on generated ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mailroom.cli import main
from mailroom.linearizable import (
    MODELS,
    NOT_LINEARIZABLE,
    UNKNOWN,
    HistoryError,
    check_calls,
    pair,
    read_history,
)
from mailroom.linearizable.spark import check_files_on_spark, check_on_spark

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


@pytest.mark.parametrize(
    ("names", "model"),
    [
        (["c10-bad.txt"], "kv"),
        pytest.param(["etcd_000.log", "etcd_002.log"], "register", marks=pytest.mark.slow),
    ],
)
def test_reading_on_the_executors_gives_the_local_verdict(
    spark: Any, names: list[str], model: str
) -> None:
    paths = [str(JEPSEN / n) for n in names]
    remote = check_files_on_spark(spark, paths, MODELS[model], groups=3)
    assert main(["check", "--model", model, "--engine", "local", *paths]) == 1
    if len(paths) == 1:
        local = check_calls(pair(read_history(paths[0])), MODELS[model])
        assert remote == local
    else:
        assert remote.witness is not None and remote.witness.key == (paths[0], None)
        assert [k.verdict for k in remote.keys] == [NOT_LINEARIZABLE, "linearizable"]


BAD_ROWS = [
    '{"process": 0, "type": "invoke", "f": "read"}\n{"process": 1, "type": "ok", "f": "read"}\n'
    '{"process": 2, "type": "oops", "f": "read"}\n',
    '{"process": 0, "type": "invoke", "f": "read"}\n{"process": 1, "type": "ok", "f": "read"}\n'
    '{"process": 0, "type": "invoke", "f": "read"}\n',
    '{"process": 0, "type": "invoke", "f": "read"}\n{"process": 0, "type": "ok", "f": "read"}\n'
    '{"process": 1, "type": "invoke", "f": "cas", "value": 3}\n',
]


@pytest.mark.parametrize("text", BAD_ROWS)
def test_bad_rows_are_reported_as_the_local_engine_reports_them(
    spark: Any, tmp_path: Path, text: str
) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(text)
    with pytest.raises(HistoryError) as local:
        check_calls(pair(read_history(path), source=str(path)), MODELS["register"])
    with pytest.raises(HistoryError) as remote:
        check_files_on_spark(spark, [str(path)], MODELS["register"])
    assert str(remote.value) == str(local.value) and remote.value.line == local.value.line
