"""Exact-value tests of the linearizability search on small and published histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mailroom.linearizable import (
    LINEARIZABLE,
    MODELS,
    NOT_LINEARIZABLE,
    UNKNOWN,
    check_calls,
    pair,
    parse_history,
    read_history,
    witness_lines,
    witness_svg,
)

JEPSEN = Path(__file__).parent / "data" / "jepsen"


def verdict(text: str, model: str = "register", **kw: object) -> str:
    return check_calls(pair(parse_history(text, "edn")), MODELS[model], **kw).verdict  # type: ignore[arg-type]


def rows(*ops: str) -> str:
    """EDN rows from short forms ``"0 invoke write 1"``."""
    out = []
    for op in ops:
        p, t, f, *v = op.split()
        value = " ".join(v) or "nil"
        out.append(f"{{:process {p}, :type :{t}, :f :{f}, :value {value}}}")
    return "\n".join(out)


GOOD = {
    "sequential": rows("0 invoke write 1", "0 ok write 1", "1 invoke read", "1 ok read 1"),
    "concurrent read sees either": rows(
        "0 invoke write 1", "1 invoke read", "1 ok read nil", "0 ok write 1"
    ),
    "read of the new value during the write": rows(
        "0 invoke write 1", "1 invoke read", "1 ok read 1", "0 ok write 1"
    ),
    "a failed write did not happen": rows(
        "0 invoke write 1", "0 fail write 1", "1 invoke read", "1 ok read nil"
    ),
    "an info write may have happened": rows(
        "0 invoke write 1", "0 info write 1", "1 invoke read", "1 ok read 1"
    ),
    "an info write may not have happened": rows(
        "0 invoke write 1", "0 info write 1", "1 invoke read", "1 ok read nil"
    ),
    "an unfinished write may happen late": rows(
        "0 invoke write 1", "1 invoke read", "1 ok read nil", "1 invoke read", "1 ok read 1"
    ),
    "cas": rows(
        "0 invoke write 1",
        "0 ok write 1",
        "1 invoke cas [1 2]",
        "1 ok cas [1 2]",
        "0 invoke read",
        "0 ok read 2",
    ),
}

BAD = {
    "stale read": rows(
        "0 invoke write 1",
        "0 ok write 1",
        "0 invoke write 2",
        "0 ok write 2",
        "1 invoke read",
        "1 ok read 1",
    ),
    "lost write": rows("0 invoke write 1", "0 ok write 1", "1 invoke read", "1 ok read nil"),
    "read of a value never written": rows(
        "0 invoke write 1", "0 ok write 1", "1 invoke read", "1 ok read 7"
    ),
    "a cas that succeeds twice": rows(
        "0 invoke write 1",
        "0 ok write 1",
        "1 invoke cas [1 2]",
        "2 invoke cas [1 3]",
        "1 ok cas [1 2]",
        "2 ok cas [1 3]",
    ),
    "a read going back in time": rows(
        "0 invoke write 1",
        "1 invoke read",
        "1 ok read 1",
        "2 invoke read",
        "2 ok read nil",
        "0 ok write 1",
    ),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_known_good_histories_are_linearizable(name: str) -> None:
    assert verdict(GOOD[name]) == LINEARIZABLE


@pytest.mark.parametrize("name", sorted(BAD))
def test_known_bad_histories_are_caught(name: str) -> None:
    assert verdict(BAD[name]) == NOT_LINEARIZABLE


def test_witness_of_a_stale_read() -> None:
    v = check_calls(pair(parse_history(BAD["stale read"], "edn")), MODELS["register"])
    w = v.witness
    assert w is not None and w.verdict == NOT_LINEARIZABLE
    assert [c.describe() for c in w.prefix] == ["P0 write 1 -> 1", "P0 write 2 -> 2"]
    assert w.blocked is not None and w.blocked.describe() == "P1 read nil -> 1"
    text = witness_lines(w)
    assert text[-1] == "cannot follow: P1 read nil -> 1  (lines 5-6)"
    svg = witness_svg(w)
    assert svg.startswith("<svg") and svg.count("<path") >= 3 and "#c62828" in svg


def test_a_budget_gives_unknown_never_a_guess() -> None:
    v = check_calls(pair(parse_history(GOOD["cas"], "edn")), MODELS["register"], budget=1)
    assert v.verdict == UNKNOWN
    assert v.keys[0].explored == 2  # it stopped past one state, as asked
    full = check_calls(pair(parse_history(GOOD["cas"], "edn")), MODELS["register"])
    assert full.verdict == LINEARIZABLE and full.explored == 4


def test_keys_are_checked_apart_and_the_witness_is_the_first_bad_key() -> None:
    text = "\n".join(
        [
            '{:process 0, :type :invoke, :f :put, :key "b", :value "1"}',
            '{:process 0, :type :ok, :f :put, :key "b", :value "1"}',
            '{:process 1, :type :invoke, :f :get, :key "b", :value nil}',
            '{:process 1, :type :ok, :f :get, :key "b", :value "2"}',
            '{:process 2, :type :invoke, :f :append, :key "a", :value "x"}',
            '{:process 2, :type :ok, :f :append, :key "a", :value "x"}',
            '{:process 2, :type :invoke, :f :get, :key "a", :value nil}',
            '{:process 2, :type :ok, :f :get, :key "a", :value "x"}',
            '{:process 1, :type :invoke, :f :get, :key "c", :value nil}',
            '{:process 1, :type :ok, :f :get, :key "c", :value "7"}',
        ]
    )
    v = check_calls(pair(parse_history(text, "edn")), MODELS["kv"])
    assert [(k.key, k.verdict) for k in v.keys] == [
        ("a", LINEARIZABLE),
        ("b", NOT_LINEARIZABLE),
        ("c", NOT_LINEARIZABLE),
    ]
    assert v.verdict == NOT_LINEARIZABLE and v.witness is not None and v.witness.key == "b"


BATTERIES = [
    ("counter", "0 invoke add 2|0 ok add 2|1 invoke inc|1 ok inc 3|1 invoke get|1 ok get 3", True),
    ("counter", "0 invoke add 2|0 ok add 2|1 invoke get|1 ok get 0", False),
    ("counter", "0 invoke add 2|1 invoke add 3|1 ok add 3|0 ok add 5", True),
    ("counter", "0 invoke add 2|1 invoke add 3|1 ok add 5|0 ok add 5", False),
    ("set", "0 invoke add 1|0 ok add true|1 invoke contains 1|1 ok contains true", True),
    ("set", "0 invoke add 1|0 ok add true|1 invoke add 1|1 ok add true", False),
    ("set", "0 invoke add 1|0 ok add true|1 invoke read|1 ok read [1]", True),
    (
        "set",
        "0 invoke add 1|0 ok add true|0 invoke discard 1|"
        "0 ok discard true|1 invoke read|1 ok read [1]",
        False,
    ),
    ("queue", "0 invoke put 1|0 ok put true|0 invoke put 2|0 ok put|1 invoke get|1 ok get 1", True),
    ("queue", "0 invoke put 1|0 ok put|0 invoke put 2|0 ok put|1 invoke get|1 ok get 2", False),
    ("queue", "0 invoke put 1|1 invoke put 2|1 ok put|0 ok put|2 invoke get|2 ok get 2", True),
    (
        "queue",
        "0 invoke get|0 ok get nil|0 invoke put 5|0 ok put|"
        "1 invoke get|1 ok get 5|1 invoke get|1 ok get 5",
        False,
    ),
    ("lock", "0 invoke acquire|0 ok acquire true|1 invoke acquire|1 ok acquire false", True),
    ("lock", "0 invoke acquire|0 ok acquire true|1 invoke acquire|1 ok acquire true", False),
    (
        "lock",
        "0 invoke acquire|0 ok acquire true|0 invoke release|"
        "0 ok release true|1 invoke acquire|1 ok acquire true",
        True,
    ),
    ("lock", "0 invoke acquire|0 ok acquire true|1 invoke release|1 ok release true", False),
]


@pytest.mark.parametrize(("model", "history", "good"), BATTERIES)
def test_battery_models(model: str, history: str, good: bool) -> None:
    expected = LINEARIZABLE if good else NOT_LINEARIZABLE
    assert verdict(rows(*history.split("|")), model) == expected


ETCD = {"etcd_000.log": False, "etcd_001.log": False, "etcd_002.log": True, "etcd_005.log": True}
KV = {"c01-ok.txt": True, "c01-bad.txt": False, "c10-ok.txt": True, "c10-bad.txt": False}
KEYS = {"c01-ok.txt": 10, "c01-bad.txt": 8, "c10-ok.txt": 10, "c10-bad.txt": 10}


@pytest.mark.parametrize("name", sorted(ETCD))
def test_published_etcd_histories(name: str) -> None:
    v = check_calls(pair(read_history(JEPSEN / name)), MODELS["register"])
    assert v.verdict == (LINEARIZABLE if ETCD[name] else NOT_LINEARIZABLE)


@pytest.mark.parametrize("name", sorted(KV))
def test_published_kv_histories(name: str) -> None:
    v = check_calls(pair(read_history(JEPSEN / name, "edn")), MODELS["kv"])
    assert v.verdict == (LINEARIZABLE if KV[name] else NOT_LINEARIZABLE)
    assert len(v.keys) == KEYS[name]


def test_etcd_000_witness_is_exact() -> None:
    v = check_calls(pair(read_history(JEPSEN / "etcd_000.log")), MODELS["register"])
    w = v.witness
    assert w is not None and w.blocked is not None
    assert (len(w.calls), len(w.prefix), w.blocked.describe()) == (65, 33, "P11 read nil -> 2")
    assert (w.blocked.call_line, w.blocked.return_line) == (85, 86)


def test_keys_in_natural_order() -> None:
    text = "\n".join(
        f'{{"process": 0, "type": "{t}", "f": "write", "key": {json.dumps(k)}, "value": 1}}'
        for k in (10, 2, "a")
        for t in ("invoke", "ok")
    )
    v = check_calls(pair(parse_history(text, "jsonl")), MODELS["register"])
    assert [k.key for k in v.keys] == [2, 10, "a"]
