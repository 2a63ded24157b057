"""The history checker (mailroom.replicated.history) on hand-written histories: each
property caught, files read strictly (a cut-off last line forgiven), and the
command-line form's exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from mailroom.replicated import ReplCounter, SimGroup
from mailroom.replicated.history import (
    History,
    HistoryFile,
    check_files,
    check_history,
    read_history,
)
from mailroom.trace import TraceError


def start(p: int, applied: int = 0) -> dict[str, Any]:
    return {
        "row": "start",
        "replica": p,
        "inc": 0,
        "applied": applied,
        "view": 1,
        "members": [0, 1],
    }


def call(p: int, seq: int, amount: int) -> dict[str, Any]:
    return {
        "row": "call",
        "replica": p,
        "inc": 0,
        "op": [p, seq],
        "payload": ["c", 0, "add", [amount]],
    }


def apply(p: int, index: int, op: list[int]) -> dict[str, Any]:
    return {"row": "apply", "replica": p, "inc": 0, "index": index, "op": op}


def told(p: int, seq: int, value: Any) -> dict[str, Any]:
    return {"row": "result", "replica": p, "inc": 0, "op": [p, seq], "value": value}


def end(p: int, applied: int) -> dict[str, Any]:
    return {"row": "end", "replica": p, "inc": 0, "applied": applied}


GOOD = [
    start(0),
    start(1),
    call(0, 1, 5),
    call(1, 1, 2),
    apply(0, 0, [0, 1]),
    told(0, 1, 5),
    apply(1, 0, [0, 1]),
    apply(0, 1, [1, 1]),
    apply(1, 1, [1, 1]),
    told(1, 1, 7),
    end(0, 2),
    end(1, 2),
]


def problems(rows: list[dict[str, Any]], **options: Any) -> set[str]:
    return {p.property for p in check_history(rows, ReplCounter, **options).problems}


def test_a_good_history_holds() -> None:
    report = check_history(GOOD, ReplCounter)
    assert report.ok and report.applied == 2 and report.acknowledged == 2
    assert report.summary().startswith("ok: 2 replica lives")


def test_each_broken_promise_is_caught() -> None:
    swapped = [*GOOD[:6], apply(1, 0, [1, 1]), apply(1, 1, [0, 1]), *GOOD[8:]]
    assert "prefix" in problems(swapped)
    twice = [*GOOD[:10], apply(0, 2, [0, 1]), apply(1, 2, [0, 1]), end(0, 3), end(1, 3)]
    assert problems(twice) >= {"once"}
    lied = [*GOOD[:9], told(1, 1, 8), *GOOD[10:]]
    assert problems(lied) == {"results"}
    lost = [*GOOD[:4], apply(0, 0, [0, 1]), told(0, 1, 5), end(0, 1), end(1, 0)]
    assert problems(lost) == {"lost"}
    assert problems([start(0), apply(0, 0, [3, 1]), end(0, 1)]) == {"integrity"}
    gap = [start(0), call(0, 1, 1), call(0, 2, 1), apply(0, 0, [0, 1]), apply(0, 2, [0, 2])]
    assert "prefix" in problems(gap)


def test_the_plain_group_promise_forgives_a_crashed_members_last_view() -> None:
    crashed = [
        start(0),
        start(1),
        call(0, 1, 5),
        apply(0, 0, [0, 1]),
        told(0, 1, 5),
        {"row": "crash", "replica": 0, "inc": 0},
        call(1, 1, 2),
        apply(1, 0, [1, 1]),
        told(1, 1, 2),
        end(1, 1),
    ]
    assert problems(crashed) == {"prefix", "lost"}
    assert problems(crashed, safe=False) == set()


def test_files_are_read_strictly(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    sink = HistoryFile(path)
    for row in GOOD:
        sink(row)
    sink.close()
    sink({"ignored": True})  # closed: nothing more is written
    with path.open("a") as f:
        f.write('{"row": "app')  # a process killed while writing its last line
    assert read_history([path]) == GOOD
    for bad, message in [
        ("[1]\n", "not a history row"),
        ('{"row": "apply", "replica": 0, "inc": 0, "index": -1, "op": [0, 1]}\n', "index"),
        ('{"row": "call", "replica": 0, "inc": 0}\n', "names its op"),
        ('{"row": "call", "replica": 0, "inc": 0, "op": [0]}\n', "op must be"),
        ("{nope\n", "not a JSON object"),
    ]:
        path.write_text(bad)
        with pytest.raises(TraceError, match=message):
            read_history([path])


def test_the_command_line_form(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    _rows(GOOD).write(good)
    _rows([*GOOD[:9], told(1, 1, 8), *GOOD[10:]]).write(bad)
    out: list[str] = []
    factory = "mailroom.replicated:ReplCounter"
    assert check_files([good], factory, out=out.append) == 0 and out[-1].startswith("ok")
    assert check_files([bad], factory, out=out.append) == 1 and "[results]" in out[-2]
    assert check_files([tmp_path / "none"], factory, out=out.append) == 2
    assert check_files([good], "nothing:here", out=out.append) == 2
    assert check_files([good], "mailroom:__version__", out=out.append) == 2
    assert out[-1].startswith("error:")


def test_a_simulated_history_round_trips_through_a_file(tmp_path: Path) -> None:
    g = SimGroup(ReplCounter, 3, "lamport", seed=3)
    for p in range(3):
        g.call(p, "add", p + 1)
    g.settle()
    g.history.write(tmp_path / "sim.jsonl")
    rows = read_history([tmp_path / "sim.jsonl"])
    assert rows == json.loads(json.dumps(g.history.rows)) and check_history(rows, ReplCounter).ok


def _rows(rows: list[dict[str, Any]]) -> History:
    h = History()
    h.rows = rows
    return h
