"""Readers of histories (EDN, Jepsen console logs, JSON Lines) and ``mailroom check
--model``: exact values, typed errors naming the line, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailroom.cli import main
from mailroom.linearizable import EdnError, HistoryError, Keyword, pair, parse_history, read_edn

JEPSEN = Path(__file__).parent / "data" / "jepsen"


def test_edn_values() -> None:
    text = '{:a nil, :b [1 -2 3.5], :c "x\\"y", :d #{:k}, :e (true false), :f {:g 1}}'
    assert read_edn(text) == {
        Keyword("a"): None,
        Keyword("b"): (1, -2, 3.5),
        Keyword("c"): 'x"y',
        Keyword("d"): frozenset({Keyword("k")}),
        Keyword("e"): (True, False),
        Keyword("f"): ((Keyword("g"), 1),),
    }


@pytest.mark.parametrize(
    "text", ["{:a", "[1 2", '"open', "{:a}", "1 2", ")", "#", "[" * 100 + "]" * 100]
)
def test_edn_errors_are_typed(text: str) -> None:
    with pytest.raises(EdnError):
        read_edn(text)


def test_the_three_formats_read_the_same_history() -> None:
    edn = "\n".join(f"{{:process 3, :type :{t}, :f :cas, :value [1 4]}}" for t in ("invoke", "ok"))
    log = "INFO  jepsen.util - 3\t:invoke\t:cas\t[1 4]\nother line\n"
    log += "INFO  jepsen.util - 3\t:ok\t:cas\t[1 4]"
    rows = [{"process": 3, "type": t, "f": "cas", "value": [1, 4]} for t in ("invoke", "ok")]
    jsonl = "\n".join(json.dumps(r) for r in rows)
    calls = [
        pair(parse_history(text, fmt))
        for text, fmt in ((edn, "edn"), (log, "log"), (jsonl, "jsonl"))
    ]
    assert [c.describe() for c in calls[0]] == ["P3 cas [1 4] -> [1 4]"]
    assert [(c.process, c.f, c.arg, c.result) for cs in calls for c in cs] == [
        (3, "cas", (1, 4), (1, 4))
    ] * 3


def test_fail_is_dropped_info_and_unfinished_stay_open() -> None:
    rows = "\n".join(
        f'{{"process": {p}, "type": "{t}", "f": "write", "value": {p}}}'
        for p, t in ((0, "invoke"), (1, "invoke"), (2, "invoke"), (0, "fail"), (1, "info"))
    )
    calls = pair(parse_history(rows, "jsonl"))
    assert [(c.process, c.open) for c in calls] == [(1, True), (2, True)]


READ = '{"process": 0, "type": "invoke", "f": "read"}'


@pytest.mark.parametrize(
    ("text", "fmt", "line"),
    [
        (
            READ + '\n{"process": 0, "type": "oops", "f": "read"}',
            "jsonl",
            2,
        ),
        ('{"process": 0, "type": "invoke", "f": "read"}\n\n{"process": 0}', "jsonl", 3),
        ("{:process 0, :type :invoke, :f :read}\n{:process 0, :type :ok :f}", "edn", 2),
        ("INFO jepsen.util - zzz", "log", 1),
        ('{"process": 0, "type": "ok", "f": "read"}', "jsonl", 1),
        (
            READ + "\n" + READ,
            "jsonl",
            2,
        ),
    ],
)
def test_bad_rows_name_their_line(text: str, fmt: str, line: int) -> None:
    with pytest.raises(HistoryError) as caught:
        pair(parse_history(text, fmt))
    assert caught.value.line == line and f"line {line}:" in str(caught.value)


def test_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    svg = tmp_path / "w.svg"
    assert main(["check", "--model", "register", str(JEPSEN / "etcd_002.log")]) == 0
    assert (
        main(["check", "--model", "register", str(JEPSEN / "etcd_000.log"), "--svg", str(svg)]) == 1
    )
    out = capsys.readouterr().out
    assert "not linearizable (register model): 65 operation(s)" in out
    assert "cannot follow: P11 read nil -> 2  (lines 85-86)" in out
    assert svg.read_text().startswith("<svg")
    assert main(["check", "--model", "kv", "--budget", "3", str(JEPSEN / "c10-ok.txt")]) == 3
    assert capsys.readouterr().out.startswith("unknown (kv model)")


def test_cli_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "h.jsonl"
    bad.write_text('{"process": 0, "type": "invoke", "f": "read"}\n{"process": 0, "type": "ok"}\n')
    capsys.readouterr()
    assert main(["check", "--model", "register", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:2:" in err
    assert main(["check", "--model", "nope", str(bad)]) == 2
    assert main(["check", "--model", "register", str(tmp_path / "missing")]) == 2
    assert main(["check", "--model", "register", "--format", "shiviz", str(bad)]) == 2
    assert main(["check", "--format", "edn", str(bad)]) == 2
    unknown_f = tmp_path / "f.jsonl"
    unknown_f.write_text('{"process": 0, "type": "invoke", "f": "frob"}\n')
    assert main(["check", "--model", "register", str(unknown_f)]) == 2
    assert "no operation 'frob'" in capsys.readouterr().err
