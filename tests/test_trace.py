"""Reference checkers on hand-made traces (each violation with its exact witness), and JSONL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom import MessageId
from mailroom.trace import Event, TraceError, check, read_jsonl, send_clocks, write_jsonl
from mailroom.trace.header import TraceHeader, read_header
from mailroom.trace.jsonl import read_jsonl_trace


def ev(p: int, seq: int, kind: str, m: tuple[int, int], dest: tuple[int, ...]) -> Event:
    return Event("r", p, seq, kind, MessageId(*m), m[0], dest)


A, B, C = (0, 1), (0, 2), (1, 1)

# Alice/Bob/Carol with m3 delivered before m1 at Carol
BAD = [
    ev(0, 1, "send", A, (2,)),
    ev(0, 2, "send", B, (1,)),
    ev(1, 1, "deliver", B, (1,)),
    ev(1, 2, "send", C, (2,)),
    ev(2, 1, "deliver", C, (2,)),
    ev(2, 2, "deliver", A, (2,)),
]


def test_causal_violation_has_its_witness() -> None:
    report = check(BAD)
    assert report.count("causal") == 1
    (v,) = report.violations["causal"]
    assert v.processes == (2,)
    assert v.messages == (MessageId(0, 1), MessageId(1, 1))
    assert v.positions == (2, 1)
    assert "P2 delivered P1#1 before P0#1" in v.reason
    assert report.count("fifo") == report.count("integrity") == report.count("liveness") == 0
    assert not report.ok


def test_send_clocks_follow_send_and_deliver_events() -> None:
    clocks = send_clocks(BAD)
    assert clocks[MessageId(0, 1)] == {0: 1}
    assert clocks[MessageId(0, 2)] == {0: 2}
    assert clocks[MessageId(1, 1)] == {0: 2, 1: 2}


def test_fifo_integrity_liveness_total() -> None:
    trace = [
        ev(0, 1, "send", (0, 1), (1, 2)),
        ev(0, 2, "send", (0, 2), (1, 2)),
        ev(1, 1, "deliver", (0, 2), (1, 2)),
        ev(1, 2, "deliver", (0, 1), (1, 2)),
        ev(1, 3, "deliver", (0, 1), (1, 2)),  # twice
        ev(2, 1, "deliver", (0, 1), (1, 2)),
        ev(2, 2, "deliver", (0, 2), (1, 2)),
        ev(2, 3, "deliver", (5, 5), (2,)),  # never sent
        ev(0, 3, "deliver", (0, 1), (1, 2)),  # not a destination
    ]
    report = check(trace)
    (fifo,) = report.violations["fifo"]
    assert (fifo.processes, fifo.messages) == ((1,), (MessageId(0, 1), MessageId(0, 2)))
    reasons = sorted(v.reason for v in report.violations["integrity"])
    assert reasons == [
        "P0 delivered P0#1, which was sent only to [1, 2]",
        "P1 delivered P0#1 more than once",
        "P2 delivered P5#5, which was never sent",
    ]
    (total,) = report.violations["total"]
    assert total.processes == (1, 2)
    assert total.messages == (MessageId(0, 2), MessageId(0, 1))
    assert report.violations["liveness"] == []
    lost = check(trace[:3], ["liveness"]).violations["liveness"]
    assert [(v.processes, v.messages) for v in lost] == [
        ((1,), (MessageId(0, 1),)),
        ((2,), (MessageId(0, 1),)),
        ((2,), (MessageId(0, 2),)),
    ]
    assert "integrity" in report.summary()
    with pytest.raises(ValueError, match="unknown properties"):
        check(trace, ["speed"])


def test_runs_are_checked_separately() -> None:
    other = [Event("s", e.process, e.seq, e.kind, e.message, e.sender, e.dest) for e in BAD[:4]]
    report = check(BAD + other)
    assert {v.run for v in report.violations["causal"]} == {"r"}
    assert {v.run for v in report.violations["liveness"]} == {"s"}


def test_jsonl_round_trip(tmp_path: Path) -> None:
    trace = [*BAD, Event("r", 2, 3, "receive", MessageId(0, 1), 0, (2,), {0: 1}, 2.5, {"x": 1})]
    path = tmp_path / "t.jsonl"
    assert write_jsonl(trace, path) == len(trace)
    back = read_jsonl(path)
    assert back == trace
    assert back[-1].vc == {0: 1} and back[-1].time == 2.5 and back[-1].payload == {"x": 1}


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ('{"run": "r"}', "missing field 'process'"),
        (
            '{"run":"r","process":0,"seq":1,"kind":"bounce","message":[0,1],"sender":0,"dest":[1]}',
            "unknown kind 'bounce'",
        ),
        (
            '{"run":"r","process":-1,"seq":1,"kind":"send","message":[0,1],"sender":0,"dest":[1]}',
            "'process'",
        ),
        (
            '{"run":"r","process":0,"seq":1,"kind":"send","message":[0],"sender":0,"dest":[1]}',
            "'message'",
        ),
        (
            '{"run":"r","process":0,"seq":1,"kind":"send","message":[0,1],"sender":0,"dest":[1],'
            '"vc":{"a":1}}',
            "'vc'",
        ),
        ("not json", "not JSON"),
    ],
)
def test_bad_rows_are_named(tmp_path: Path, row: str, words: str) -> None:
    good = json.dumps(BAD[0].to_dict())
    path = tmp_path / "bad.jsonl"
    path.write_text(good + "\n" + row + "\n")
    with pytest.raises(TraceError, match=words) as info:
        read_jsonl(path)
    assert ":2:" in str(info.value)


HEADER = TraceHeader(
    "mailroom simulate 9.9", "rst", ("integrity", "fifo"), 3, {"seed": 4, "delay": [1.0, 2.0]}
)


def test_the_header_is_kept_and_never_an_event(tmp_path: Path) -> None:
    events = [
        Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,)),
        Event("r", 1, 1, "deliver", MessageId(0, 1), 0, (1,)),
    ]
    path = tmp_path / "t.jsonl"
    write_jsonl(events, path, header=HEADER)
    assert json.loads(path.read_text().splitlines()[0]) == {"header": HEADER.to_dict()}
    assert read_header(path) == HEADER and read_header(path).settings["seed"] == 4
    assert read_jsonl_trace(path) == (HEADER, events)
    assert read_jsonl(path) == events
    write_jsonl(events, tmp_path / "bare.jsonl")
    assert read_header(tmp_path / "bare.jsonl") is None
    assert read_header(tmp_path / "missing.jsonl") is None


@pytest.mark.parametrize(
    ("header", "words"),
    [
        ({"protocol": "rst"}, "'producer'"),
        ({"producer": "x", "promises": "fifo"}, "'promises'"),
        ({"producer": "x", "n": 0}, "'n'"),
        ([], "must be an object"),
    ],
)
def test_a_malformed_header_is_named(tmp_path: Path, header: object, words: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"header": header}) + "\n")
    with pytest.raises(TraceError, match=f"t.jsonl:1: .*{words}"):
        read_jsonl(path)
    assert read_header(path) is None


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000), n=st.integers(2, 4), mode=st.sampled_from(["unicast", "broadcast"])
)
def test_summary_rows_are_one_per_violating_delivery_of_the_full_set(
    seed: int, n: int, mode: str
) -> None:
    from mailroom import Unordered
    from mailroom.sim import NetworkModel, Simulation, random_workload

    sim = Simulation(
        [Unordered(p, n) for p in range(n)], NetworkModel(delay=(1.0, 20.0)), seed=seed
    )
    random_workload(sim, 25, mode=mode, seed=seed)
    sim.run()
    props = ["integrity", "fifo", "causal", "total", "liveness"]
    full = check(sim.trace, props, mode="full")
    summary = check(sim.trace, props, mode="summary")
    for prop in ("fifo", "causal"):
        assert set(summary.violations[prop]) <= set(full.violations[prop])
        later = {(v.run, v.processes, v.messages[0]) for v in full.violations[prop]}
        assert summary.count(prop) == len(later)
    assert set(summary.violations["total"]) <= set(full.violations["total"])
    later = {(v.run, v.processes, v.messages[1]) for v in full.violations["total"]}
    assert summary.count("total") == len(later)
    for prop in ("integrity", "liveness"):
        assert summary.violations[prop] == full.violations[prop]


def test_in_flight_leaves_late_sends_out_of_liveness() -> None:
    events = [
        Event("r", 0, 1, "send", MessageId(0, 1), 0, (1,), time=0.0),
        Event("r", 0, 2, "send", MessageId(0, 2), 0, (1,), time=9.0),
        Event("r", 1, 1, "receive", MessageId(0, 2), 0, (1,), time=10.0),
    ]
    assert check(events, ["liveness"]).count("liveness") == 2
    assert check(events, ["liveness"], in_flight=5.0).count("liveness") == 1
