"""Recording client histories (mailroom.linearizable.record), the ``dict`` model, and the
positive control from the product: ordered reads of replicated objects pass the
black-box check, a local read made stale by a partition is caught and named.

The replicated runs here are deterministic (``SimGroup`` in adversarial mode, each step
chosen); the last test runs three real members of the nemesis's replicated system on
127.0.0.1 (no root: no faults) and judges their recorded histories.
"""

from __future__ import annotations

import io
import itertools
import json
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom.cli import main
from mailroom.core.errors import LocalError
from mailroom.linearizable import (
    LINEARIZABLE,
    MODELS,
    NOT_LINEARIZABLE,
    Call,
    Client,
    HistoryError,
    HistoryRecorder,
    check_calls,
    merge_histories,
    pair,
    parse_history,
    read_history,
    witness_lines,
)
from mailroom.replicated import OutcomeUnknown, ReplDict, SimCall, SimGroup
from mailroom.replicated.nemesis import judge

from .net_support import listening_sockets, wait_for, write_group


def jsonl(*ops: str) -> str:
    """JSON Lines from short forms ``"0 invoke set k 1"`` (values are JSON)."""
    out = []
    for op in ops:
        p, t, f, key, *v = op.split(" ", 4)
        value = json.loads(v[0]) if v else None
        out.append(json.dumps({"process": int(p), "type": t, "f": f, "key": key, "value": value}))
    return "\n".join(out)


def dict_verdict(text: str) -> str:
    return check_calls(pair(parse_history(text, "jsonl")), MODELS["dict"]).verdict


DICT_GOOD = {
    "set then get": jsonl("0 invoke set k 1", "0 ok set k", "1 invoke get k", "1 ok get k 1"),
    "absent reads nil": jsonl("0 invoke get k", "0 ok get k"),
    "setdefault keeps the first": jsonl(
        '0 invoke setdefault k "a"',
        '0 ok setdefault k "a"',
        '1 invoke setdefault k "b"',
        '1 ok setdefault k "a"',
    ),
    "concurrent setdefaults: one wins": jsonl(
        '0 invoke setdefault k "a"',
        '1 invoke setdefault k "b"',
        '1 ok setdefault k "b"',
        '0 ok setdefault k "b"',
    ),
    "pop takes the value, then the default": jsonl(
        "0 invoke set k 1",
        "0 ok set k",
        "1 invoke pop k",
        "1 ok pop k 1",
        "1 invoke pop k 7",
        "1 ok pop k 7",
    ),
    "delete says whether it was there": jsonl(
        "0 invoke set k 1",
        "0 ok set k",
        "1 invoke delete k",
        "1 ok delete k true",
        "1 invoke delete k",
        "1 ok delete k false",
        "1 invoke get k",
        "1 ok get k",
    ),
    "an info set may have happened": jsonl(
        "0 invoke set k 1", "0 info set k", "1 invoke get k", "1 ok get k 1"
    ),
}

DICT_BAD = {
    "a stale read": jsonl(
        "0 invoke set k 1",
        "0 ok set k",
        "0 invoke set k 2",
        "0 ok set k",
        "1 invoke get k",
        "1 ok get k 1",
    ),
    "a lost write": jsonl("0 invoke set k 1", "0 ok set k", "1 invoke get k", "1 ok get k"),
    "a read of a value never written": jsonl("0 invoke get k", "0 ok get k 9"),
    "two setdefaults that both won": jsonl(
        '0 invoke setdefault k "a"',
        '0 ok setdefault k "a"',
        '1 invoke setdefault k "b"',
        '1 ok setdefault k "b"',
    ),
    "a value popped twice": jsonl(
        "0 invoke set k 1",
        "0 ok set k",
        "1 invoke pop k",
        "2 invoke pop k",
        "1 ok pop k 1",
        "2 ok pop k 1",
    ),
    "a key deleted twice": jsonl(
        "0 invoke set k 1",
        "0 ok set k",
        "1 invoke delete k",
        "1 ok delete k true",
        "2 invoke delete k",
        "2 ok delete k true",
    ),
}


@pytest.mark.parametrize("name", sorted(DICT_GOOD))
def test_the_dict_model_accepts_what_a_replicated_dict_can_answer(name: str) -> None:
    assert dict_verdict(DICT_GOOD[name]) == LINEARIZABLE


@pytest.mark.parametrize("name", sorted(DICT_BAD))
def test_the_dict_model_catches_what_no_dict_can_answer(name: str) -> None:
    assert dict_verdict(DICT_BAD[name]) == NOT_LINEARIZABLE


# an action: (process, key, method, value, how it completes)
DICT_ACTION = st.tuples(
    st.integers(0, 3),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["get", "set", "setdefault", "pop", "delete"]),
    st.integers(0, 2),
    st.sampled_from(["ok", "ok", "ok", "info", "later"]),
)


def run_repl_dict(actions: Sequence[tuple[int, str, str, int, str]]) -> list[Call]:
    """A history of clients of one ``ReplDict`` (the product's own object, called
    directly): each call takes effect at one instant between its invocation and its
    completion, or at its invocation for an ``info`` one, left open."""
    obj = ReplDict()
    rows: list[str] = []
    pending: dict[int, tuple[str, str, Any]] = {}
    gone: set[int] = set()

    def row(p: int, kind: str, f: str, key: str, value: Any) -> None:
        rows.append(json.dumps({"process": p, "type": kind, "f": f, "key": key, "value": value}))

    def call(f: str, key: str, value: Any) -> Any:
        args = () if f in ("get", "delete") else (value,)
        return getattr(obj, f)(key, *args)

    for p, key, f, n, how in actions:
        if p in gone:
            continue
        if p in pending:
            f0, key0, arg = pending.pop(p)
            row(p, "ok", f0, key0, call(f0, key0, arg))
            continue
        arg = None if f in ("get", "delete") else n
        row(p, "invoke", f, key, arg)
        if how == "info":
            call(f, key, arg)
            row(p, "info", f, key, None)
        elif how == "ok":
            pending[p] = (f, key, arg)
        else:
            gone.add(p)
    return pair(parse_history("\n".join(rows), "jsonl"))


@given(st.lists(DICT_ACTION, max_size=40).map(run_repl_dict), st.data())
def test_histories_of_a_repl_dict_pass_and_a_read_of_a_value_never_written_is_caught(
    calls: list[Call], data: st.DataObject
) -> None:
    assert check_calls(calls, MODELS["dict"]).verdict == LINEARIZABLE
    assert check_calls(calls, MODELS["dict"], partition=False).verdict == LINEARIZABLE
    answered = [i for i, c in enumerate(calls) if c.f in ("get", "pop") and not c.open]
    if answered:
        i = data.draw(st.sampled_from(answered))
        calls[i] = attrs.evolve(calls[i], result=9)  # no call ever writes 9
        assert check_calls(calls, MODELS["dict"]).verdict == NOT_LINEARIZABLE


def test_the_dict_model_is_a_documented_model_and_refuses_a_bad_delete_result() -> None:
    assert MODELS["dict"].name == "dict" and "setdefault" in MODELS["dict"].fs
    bad = pair(parse_history(jsonl("0 invoke delete k", "0 ok delete k 3"), "jsonl"))
    with pytest.raises(HistoryError, match="delete completes with true or false"):
        check_calls(bad, MODELS["dict"])


def test_a_recorder_writes_rows_the_reader_reads_and_renames_a_process_after_info() -> None:
    out = io.StringIO()
    ticks = itertools.count()
    rec = HistoryRecorder(out, clock=lambda: float(next(ticks)))
    a, b = rec.client(), rec.client()
    a.invoke("set", "k", 1)
    b.invoke("get", "k")
    a.info()  # may or may not have happened: a's next call is a new process
    first = a.process
    b.ok(1)
    a.invoke("get", "k")
    a.ok(1)
    assert (first, b.process, a.process) != (0, 1, 0) and a.process == 2
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [r["time"] for r in rows] == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0] and rec.rows == 6
    assert rows[0] == {
        "process": 0,
        "type": "invoke",
        "f": "set",
        "key": "k",
        "value": 1,
        "time": 0.0,
    }
    calls = pair(parse_history(out.getvalue(), "jsonl"))
    assert [(c.process, c.open) for c in calls] == [(0, True), (1, False), (2, False)]
    assert check_calls(calls, MODELS["dict"]).verdict == LINEARIZABLE
    assert (
        dict_verdict(
            out.getvalue().replace(
                '"ok", "f": "get", "key": "k", "value": 1, "time": 5',
                '"ok", "f": "get", "key": "k", "value": null, "time": 5',
            )
        )
        == NOT_LINEARIZABLE
    )


def test_a_client_refuses_what_would_make_its_history_unreadable() -> None:
    client = HistoryRecorder(io.StringIO(), prefix="c").client()
    assert client.process == "c0"
    with pytest.raises(LocalError, match="nothing pending"):
        client.ok()
    client.invoke("get", "k")
    with pytest.raises(LocalError, match="while its get is pending"):
        client.invoke("get", "k")
    with pytest.raises(LocalError, match="one of ok, fail, info"):
        client.complete("done")


def test_histories_merge_by_time_dropping_a_line_cut_short(tmp_path: Path) -> None:
    one, two, out = tmp_path / "one", tmp_path / "two", tmp_path / "merged"
    rows = [
        {"process": p, "type": "invoke", "f": "get", "key": "k", "time": t}
        for p, t in [(0, 1.0), (1, 2.0), (0, 3.0)]
    ]
    one.write_text(json.dumps(rows[0]) + "\n" + json.dumps(rows[2]) + "\n")
    two.write_text(json.dumps(rows[1]) + "\n" + '{"process": 1, "ty')  # killed mid-line
    assert merge_histories([one, two], out) == 3
    assert [json.loads(line)["time"] for line in out.read_text().splitlines()] == [1.0, 2.0, 3.0]
    one.write_text(json.dumps(rows[2]) + "\n" + json.dumps(rows[0]) + "\n")
    with pytest.raises(LocalError, match="the times go back"):
        merge_histories([one], out)
    two.write_text('{"process": 1, "type": "invoke", "f": "get"}\n')
    with pytest.raises(LocalError, match="without a time"):
        merge_histories([two], out)


# -- the positive control: the replicated objects, as their callers see them -------------------
class Recorded:
    """A ``SimGroup`` of ``ReplDict`` replicas (safe delivery, adversarial steps) whose
    callers record their calls and ordered reads in one history and their local reads in
    another, both on one clock (a counter: the rows' order is real time)."""

    def __init__(self, folder: Path) -> None:
        self.g = SimGroup(ReplDict, 3, "sequencer", adversarial=True, safe=True)
        ticks = itertools.count()

        def clock() -> float:
            return float(next(ticks))

        self.ordered_path, self.local_path = folder / "ordered.jsonl", folder / "local.jsonl"
        self.ordered = HistoryRecorder(self.ordered_path, clock=clock)
        self.local = HistoryRecorder(self.local_path, prefix="r", clock=clock)

    def start(self, pid: int, method: str, *args: Any) -> tuple[Client, SimCall]:
        client = self.ordered.client()
        client.invoke(method, args[0], args[1] if len(args) > 1 else None)
        issue: Callable[..., SimCall] = self.g.ordered if method == "get" else self.g.call
        return client, issue(pid, method, *args)

    @staticmethod
    def finish(client: Client, call: SimCall) -> None:
        if not call.done:
            client.info()
            return
        try:
            client.ok(call.result())
        except OutcomeUnknown:  # it may or may not have been applied
            client.info()

    def read_locally(self, pid: int, key: str) -> Any:
        client = self.local.client()
        client.invoke("get", key)
        value = self.g.read(pid, "get", key)
        client.ok(value)
        return value

    def close(self) -> None:
        self.ordered.close()
        self.local.close()


def partitioned_run(folder: Path) -> Recorded:
    """P2 is cut off; P0 writes k=2 once P0 and P1 have excluded P2; P2 then reads k
    locally (still 1: stale) and in order (it cannot complete in the minority); after the
    heal P2 rejoins and both its reads say 2."""
    r = Recorded(folder)
    g = r.g
    first = r.start(0, "set", "k", 1)
    g.settle()
    r.finish(*first)
    assert r.read_locally(2, "k") == 1
    g.partition([[0, 1], [2]])
    write = r.start(0, "set", "k", 2)
    for p, q in [(0, 2), (1, 2), (2, 0), (2, 1)]:  # the detectors on both sides
        g.suspect(p, q)
    g.settle(timers=False)
    r.finish(*write)
    assert write[1].done  # acknowledged by the majority
    assert r.read_locally(2, "k") == 1  # stale: the write completed elsewhere
    majority = r.start(1, "get", "k")
    g.settle(timers=False)
    r.finish(*majority)
    assert majority[1].result() == 2
    minority = r.start(2, "get", "k")
    g.settle(timers=False)
    assert not minority[1].done  # an ordered read waits for the group's order
    g.sim.partitions = []
    g.settle()  # P2 learns it is out and rejoins as its next incarnation
    r.finish(*minority)
    assert r.read_locally(2, "k") == 2
    after = r.start(2, "get", "k")
    g.settle()
    r.finish(*after)
    assert after[1].result() == 2
    r.close()
    return r


def test_ordered_reads_pass_and_a_stale_local_read_is_caught_and_named(tmp_path: Path) -> None:
    r = partitioned_run(tmp_path)
    ordered = check_calls(pair(read_history(r.ordered_path)), MODELS["dict"])
    assert ordered.verdict == LINEARIZABLE and ordered.calls == 5
    both = tmp_path / "both.jsonl"
    assert merge_histories([r.ordered_path, r.local_path], both) == 16
    found = check_calls(pair(read_history(both)), MODELS["dict"])
    assert found.verdict == NOT_LINEARIZABLE
    witness = found.witness
    assert witness is not None and witness.blocked is not None
    assert (witness.blocked.process, witness.blocked.f, witness.blocked.result) == ("r1", "get", 1)
    lines = witness_lines(witness)
    assert lines[-1] == 'cannot follow: P"r1" get "k" nil -> 1  (lines 7-8)'
    assert any('set "k" 2' in line for line in lines)  # the write it missed is in the prefix


def test_the_nemesis_judge_checks_the_clients_black_box(tmp_path: Path) -> None:
    """``mailroom.replicated.nemesis judge`` with the replicas' histories and the
    clients': ordered ones linearizable (exit 0), local reads' staleness reported, not
    counted; a forged ordered read is counted and fails the judge."""
    r = partitioned_run(tmp_path)
    replicas = tmp_path / "history"
    replicas.write_text("".join(json.dumps(row) + "\n" for row in r.g.end()))
    out = tmp_path / "judge.json"
    assert judge([str(replicas)], out, [str(r.ordered_path)], [str(r.local_path)]) == 0
    data = json.loads(out.read_text())
    assert data["ordered"]["verdict"] == LINEARIZABLE and data["ordered"]["operations"] == 5
    assert data["local"]["verdict"] == NOT_LINEARIZABLE and data["local"]["failing keys"] == 1
    assert data["counts"] == {}
    rows = [json.loads(line) for line in r.ordered_path.read_text().splitlines()]
    rows[-1]["value"] = 1  # P2's last ordered read, after the heal, "saw" the old value
    r.ordered_path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert judge([str(replicas)], out, [str(r.ordered_path)]) == 1
    data = json.loads(out.read_text())
    assert data["counts"] == {"clients not linearizable": 1} and "local" not in data
    r.ordered_path.write_text('{"process": 0, "type": "ok", "f": "get", "time": 1}\n')
    assert judge([str(replicas)], out, [str(r.ordered_path)]) == 0  # reported, not counted
    data = json.loads(out.read_text())
    assert data["counts"] == {} and data["ordered"]["verdict"] == "unreadable"
    assert "which invoked nothing" in data["ordered"]["report"][0]


def test_nemesis_members_record_histories_that_pass_the_black_box_check(tmp_path: Path) -> None:
    """Three real members of the nemesis's replicated system on 127.0.0.1 (no faults),
    each client making 40 calls, a quarter of them ordered reads, and a local read
    before each; once every call's outcome is recorded, stopped by pid with SIGTERM,
    then judged. (The wait is bounded polls, a safety net.)"""
    socks = listening_sockets(3)
    peers = write_group(tmp_path, socks)
    for s in socks:
        s.close()  # each member binds its own address
    procs = []
    for i in range(3):
        files = [("history", "history"), ("checkpoint", "ckpt")]
        files += [("client-history", "client"), ("local-history", "local")]
        paths = [[f"--{flag}", str(tmp_path / f"{stem}{i}")] for flag, stem in files]
        options = ["--pid", str(i), "--peers", str(peers), *itertools.chain(*paths)]
        options += ["--count", "40", "--interval", "0.01", "--no-sync"]
        options += ["--heartbeat", "0.5", "--suspect-after", "5"]  # no false suspicions
        cmd = [sys.executable, "-m", "mailroom.replicated.nemesis", "member", *options]
        log = open(tmp_path / f"out{i}", "wb")  # noqa: SIM115 - closed below
        procs.append((subprocess.Popen(cmd, stdout=log, stderr=log), log))

    def done() -> bool:
        """Every client invoked its 40 calls and learned each one's outcome."""
        found = [tmp_path / f"client{i}" for i in range(3)]
        rows = [json.loads(x) for p in found if p.exists() for x in p.read_text().splitlines()]
        invoked = sum(1 for row in rows if row["type"] == "invoke")
        return invoked == 120 and len(rows) == 240

    try:
        wait_for(done, 300, "120 calls and their outcomes")
    finally:
        for proc, _ in procs:
            proc.send_signal(signal.SIGTERM)
        for proc, log in procs:
            proc.wait(30)
            log.close()
    clients = [str(tmp_path / f"client{i}") for i in range(3)]
    local = [str(tmp_path / f"local{i}") for i in range(3)]
    histories = [str(tmp_path / f"history{i}") for i in range(3)]
    out = tmp_path / "judge.json"
    assert judge(histories, out, clients, local) == 0, out.read_text()
    data = json.loads(out.read_text())
    rows = [json.loads(line) for line in Path(data["ordered"]["history"]).read_text().splitlines()]
    failed = sum(1 for row in rows if row["type"] == "fail")  # refused: they did not happen
    assert data["ordered"]["verdict"] == LINEARIZABLE
    assert data["ordered"]["operations"] == 120 - failed and failed < 120
    assert sum(1 for row in rows if row["f"] == "get" and row["type"] == "invoke") == 30
    assert data["local"]["verdict"] in (LINEARIZABLE, NOT_LINEARIZABLE)  # stale or not
    assert data["local"]["operations"] > 120


def test_mailroom_check_takes_the_dict_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = partitioned_run(tmp_path)
    both = tmp_path / "both.jsonl"
    merge_histories([r.ordered_path, r.local_path], both)
    assert main(["check", "--model", "dict", str(r.ordered_path)]) == 0
    assert main(["check", "--model", "dict", str(both)]) == 1
    out = capsys.readouterr().out
    assert 'cannot follow: P"r1" get "k" nil -> 1  (lines 7-8)' in out
