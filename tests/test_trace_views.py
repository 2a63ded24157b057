"""Group membership in traces: view events in every format and the four view properties."""

from __future__ import annotations

import io
import json
from pathlib import Path

import attrs
import pytest

from mailroom.cli import main
from mailroom.core.messages import MessageId
from mailroom.trace import (
    Event,
    TraceError,
    TraceHeader,
    check,
    read_jsonl,
    read_parquet,
    write_jsonl,
    write_parquet,
    write_shiviz,
)
from mailroom.trace.checkers import (
    ALL_PROPERTIES,
    PROPERTIES,
    VIEW_PROPERTIES,
    check_liveness,
    check_same_view,
    check_self_inclusion,
    check_total,
    check_view_agreement,
    check_virtual_synchrony,
)
from mailroom.trace.shiviz import neighbourhood, parse_shiviz

ALL = (0, 1, 2)


def view(p: int, seq: int, k: int, members: tuple[int, ...], run: str = "r") -> Event:
    return Event(run, p, seq, "view", MessageId(0, k), p, members, view=k)


def send(p: int, seq: int, m: int, v: int | None, run: str = "r") -> Event:
    return Event(run, p, seq, "send", MessageId(p, m), p, ALL, view=v)


def deliver(q: int, seq: int, o: int, m: int, v: int | None, run: str = "r") -> Event:
    return Event(run, q, seq, "deliver", MessageId(o, m), o, ALL, view=v)


# P0 and P1 send one message each in view 1; P2 delivers both in the other order (it
# crashes: non-uniform), sends one that nobody delivers, and is left out of view 2,
# which P0 and P1 install after delivering both; P1 sends again in view 2.
GOOD = [
    view(0, 1, 1, ALL),
    send(0, 2, 1, 1),
    deliver(0, 3, 0, 1, 1),
    deliver(0, 4, 1, 1, 1),
    view(0, 5, 2, (0, 1)),
    deliver(0, 6, 1, 2, 2),
    view(1, 1, 1, ALL),
    send(1, 2, 1, 1),
    deliver(1, 3, 0, 1, 1),
    deliver(1, 4, 1, 1, 1),
    view(1, 5, 2, (0, 1)),
    send(1, 6, 2, 2),
    deliver(1, 7, 1, 2, 2),
    view(2, 1, 1, ALL),
    deliver(2, 2, 1, 1, 1),
    deliver(2, 3, 0, 1, 1),
    send(2, 4, 1, 1),
]
MISSED = deliver(1, 4, 1, 1, 1)  # drop it: P1 misses its own message of view 1


def without_views(trace: list[Event]) -> list[Event]:
    """The same run as a trace without membership: no view events, no ``view`` fields."""
    return [attrs.evolve(e, view=None) for e in trace if e.kind != "view"]


def replace(trace: list[Event], old: Event, new: Event) -> list[Event]:
    assert old in trace
    return [new if e == old else e for e in trace]


def test_a_membership_run_that_keeps_every_promise() -> None:
    report = check(GOOD)
    assert report.checked == ALL_PROPERTIES  # view events: the view properties by default
    assert report.ok, report.summary()
    assert check(without_views(GOOD)).checked == PROPERTIES


def test_total_is_scoped_to_segments_both_processes_share() -> None:
    # P2 ended in view 1 while P0 and P1 went on to view 2: its order is not compared
    assert check_total(GOOD) == []
    # without the views, P2's order is compared as before; and had P2 also installed
    # view 2, it would have to agree
    want = [
        ((0, 2), (MessageId(0, 1), MessageId(1, 1))),
        ((1, 2), (MessageId(0, 1), MessageId(1, 1))),
    ]
    assert [(v.processes, v.messages) for v in check_total(without_views(GOOD))] == want
    found = check_total([*GOOD, view(2, 5, 2, ALL)], "r")
    assert [(v.processes, v.messages) for v in found] == want
    assert found[0].reason == "P0 delivered P0#1 before P1#1, P2 the other way round"


def test_a_process_excluded_and_back_is_compared_on_nothing_of_the_view_it_left() -> None:
    # P2 is falsely suspected: views 2 = [0, 1] without it, 3 = [0, 1, 2] with it again.
    # It left view 1 into view 3, not into view 1's successor (2): its order and its
    # message of view 1 are its own business, as if it had crashed.
    back = [
        *GOOD,
        view(0, 7, 3, ALL),
        view(1, 8, 3, ALL),
        view(2, 5, 3, ALL),
        Event("r", 2, 6, "send", MessageId(2, 2), 2, ALL, view=3),
        deliver(0, 8, 2, 2, 3),
        deliver(1, 9, 2, 2, 3),
        deliver(2, 7, 2, 2, 3),
    ]
    assert check(back).ok, check(back).summary()
    # the same P2 coming back into view 2 instead would have left view 1 into its successor
    into_2 = [*GOOD, view(2, 5, 2, ALL)]
    assert len(check_total(into_2)) == 2
    assert [v.reason for v in check_liveness(into_2)] == [
        f"P{q} never delivered P2#1" for q in (0, 1, 2)
    ]


def test_view_agreement_catches_other_members_and_going_back() -> None:
    assert check_view_agreement(GOOD) == []
    bad = replace(GOOD, view(1, 5, 2, (0, 1)), view(1, 5, 2, (1, 0, 1, 2)))
    bad += [view(2, 5, 1, ALL)]
    found = check_view_agreement(bad, "r")
    assert [(v.processes, v.messages, v.positions, v.reason) for v in found] == [
        ((2,), (MessageId(0, 1), MessageId(0, 1)), (1, 5), "P2 installed view 1 after view 1"),
        (
            (0, 1),
            (MessageId(0, 2),),
            (5, 5),
            "P0 installed view 2 as [0, 1] and P1 as [0, 1, 2]",
        ),
    ]


def test_self_inclusion_catches_a_view_without_its_installer() -> None:
    assert check_self_inclusion(GOOD) == []
    (v,) = check_self_inclusion([*GOOD, view(2, 5, 2, (0, 1))], "r")
    assert (v.processes, v.messages, v.positions) == ((2,), (MessageId(0, 2),), (5,))
    assert v.reason == "P2 installed view 2 [0, 1], which does not include it"


def test_same_view_catches_a_delivery_in_the_next_view() -> None:
    assert check_same_view(GOOD) == []
    (v,) = check_same_view(replace(GOOD, MISSED, deliver(1, 4, 1, 1, 2)), "r")
    assert (v.processes, v.messages, v.positions) == ((1,), (MessageId(1, 1),), (4,))
    assert v.reason == "P1 delivered P1#1 in view 2, but it was sent in view 1"
    (w,) = check_same_view(replace(GOOD, deliver(0, 6, 1, 2, 2), deliver(0, 6, 1, 2, None)))
    assert w.reason == "P0 delivered P1#2 outside any view, but it was sent in view 2"


def test_virtual_synchrony_catches_a_message_one_survivor_missed() -> None:
    assert check_virtual_synchrony(GOOD) == []
    bad = [e for e in GOOD if e != MISSED]
    (v,) = check_virtual_synchrony(bad, "r")
    assert (v.processes, v.messages, v.positions) == ((0, 1), (MessageId(1, 1),), (4,))
    assert v.reason == "P0 delivered P1#1 in view 1 and P1 did not; both installed view 2 next"
    # had P1 sent P1#1 to P0 alone (a unicast), P1 and P0 would not be compared on it
    unicast = Event("r", 1, 2, "send", MessageId(1, 1), 1, (0,), view=1)
    assert check_virtual_synchrony(replace(bad, send(1, 2, 1, 1), unicast)) == []
    # P2 left view 1 into no view: it is never compared, whatever it delivered
    assert check_virtual_synchrony([e for e in GOOD if e.process != 2 or e.kind != "deliver"]) == []


def test_liveness_of_a_membership_run_owes_only_the_survivors() -> None:
    assert check_liveness(GOOD) == []  # P2 owed nothing of view 1; P2's own message is not owed
    bad = [e for e in GOOD if e != MISSED]
    (v,) = check_liveness(bad, "r")
    assert (v.processes, v.messages, v.reason) == (
        (1,),
        (MessageId(1, 1),),
        "P1 never delivered P1#1",
    )
    # the same run without views owes everything to every destination
    plain = without_views(bad)
    assert {(v.processes, v.messages) for v in check_liveness(plain)} == {
        ((1,), (MessageId(1, 1),)),
        ((2,), (MessageId(1, 2),)),
        ((0,), (MessageId(2, 1),)),
        ((1,), (MessageId(2, 1),)),
        ((2,), (MessageId(2, 1),)),
    }


def test_check_names_the_view_properties_and_counts_them_in_words() -> None:
    bad = [*GOOD, view(2, 5, 2, (0, 1))]
    report = check(bad, VIEW_PROPERTIES, mode="summary")
    assert report.count("self_inclusion") == 1 and report.count("virtual_synchrony") == 0
    assert "self_inclusion 1 bad installation\n" in report.summary() + "\n"
    with pytest.raises(ValueError, match="view_agreement"):
        check(bad, ["views"])


def test_view_events_round_trip_through_jsonl_and_parquet(tmp_path: Path) -> None:
    assert write_jsonl(GOOD, tmp_path / "t.jsonl") == len(GOOD)
    assert read_jsonl(tmp_path / "t.jsonl") == GOOD
    row = json.loads((tmp_path / "t.jsonl").read_text().splitlines()[0])
    assert row["kind"] == "view" and row["view"] == 1 and row["dest"] == [0, 1, 2]
    pytest.importorskip("pyarrow")
    assert write_parquet(GOOD, tmp_path / "t.parquet") == len(GOOD)
    back = read_parquet(tmp_path / "t.parquet")
    assert back == GOOD and [e.view for e in back] == [e.view for e in GOOD]


def test_old_traces_without_the_view_column_still_load(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from mailroom.trace.parquet import event_row, parquet_schema

    plain = [e for e in GOOD if e.kind != "view"]
    old = parquet_schema().remove(parquet_schema().get_field_index("view"))
    rows = [{k: v for k, v in event_row(e).items() if k != "view"} for e in plain]
    pq.write_table(pa.Table.from_pylist(rows, schema=old), tmp_path / "old.parquet")
    back = read_parquet(tmp_path / "old.parquet")
    assert [e.view for e in back] == [None] * len(plain)
    assert [(e.process, e.seq, e.message) for e in back] == [
        (e.process, e.seq, e.message) for e in plain
    ]
    # a view event in a file without the column is an error naming the row
    rows.append({k: v for k, v in event_row(GOOD[0]).items() if k != "view"})
    pq.write_table(pa.Table.from_pylist(rows, schema=old), tmp_path / "bad.parquet")
    with pytest.raises(TraceError, match=r"row 13: a 'view' event needs field 'view'"):
        read_parquet(tmp_path / "bad.parquet")


def test_bad_view_fields_are_trace_errors(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    good = json.dumps(GOOD[1].to_dict())
    for row, why in (
        ({**GOOD[1].to_dict(), "view": -1}, "field 'view' must be a non-negative integer"),
        ({**GOOD[1].to_dict(), "view": "2"}, "field 'view' must be a non-negative integer"),
        ({**GOOD[1].to_dict(), "view": True}, "field 'view' must be a non-negative integer"),
        ({**GOOD[0].to_dict(), "view": None}, "a 'view' event needs field 'view'"),
    ):
        path.write_text(good + "\n" + json.dumps(row) + "\n")
        with pytest.raises(TraceError, match=f"t.jsonl:2: {why}"):
            read_jsonl(path)
    pytest.importorskip("pyarrow")
    from mailroom.trace.parquet import event_row

    write_parquet([event_row(GOOD[0]), {**event_row(GOOD[1]), "view": -3}], tmp_path / "t.parquet")
    with pytest.raises(TraceError, match="row 2: field 'view' must be a non-negative integer"):
        read_parquet(tmp_path / "t.parquet")


def test_shiviz_shows_a_view_installation_as_an_event_of_its_process() -> None:
    out = io.StringIO()
    assert write_shiviz([view(0, 1, 3, (0, 2, 4)), *GOOD[1:3]], out) == 3
    text = out.getvalue()
    assert 'P0 {"P0": 1}\nview 3 [0, 2, 4]\n' in text
    assert 'P0 {"P0": 2}\nsend P0#1 to [0, 1, 2]\n' in text
    first, _, rest = text.partition("\n")
    log = parse_shiviz("\n" + rest, first)
    assert [e.text for e in log.events] == [
        "view 3 [0, 2, 4]",
        "send P0#1 to [0, 1, 2]",
        "deliver P0#1 from P0",
    ]
    # a view's id never stands for the message with the same numbers in a neighbourhood
    near = neighbourhood(GOOD, "r", (1,), (MessageId(0, 1),), context=0)
    assert [(e.process, e.seq) for e in near] == [(0, 2), (0, 3), (1, 3), (2, 3)]


def test_mailroom_check_reports_what_the_header_promises(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [e for e in GOOD if e != MISSED]
    promises = ("integrity", "total", "liveness", *VIEW_PROPERTIES)
    header = TraceHeader("test", "sequencer", promises, 3)
    write_jsonl(bad, tmp_path / "t.jsonl", header=header)
    assert main(["check", str(tmp_path / "t.jsonl"), "--engine", "reference"]) == 1
    out = capsys.readouterr().out
    assert "virtual_synchrony 1 missing delivery" in out
    assert "    run r: P0 delivered P1#1 in view 1 and P1 did not; both installed view 2" in out
    assert "view_agreement ok" in out and "same_view  ok" in out
    assert "fifo       not promised by sequencer (not checked)" in out
    # no header: the view properties are checked because the trace has view events
    write_jsonl(GOOD, tmp_path / "plain.jsonl")
    assert main(["check", str(tmp_path / "plain.jsonl"), "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "self_inclusion ok" in out and "causal     ok" in out
    # asked for explicitly
    argv = ["check", str(tmp_path / "plain.jsonl"), "--properties", "same_view,view_agreement"]
    assert main([*argv, "--engine", "reference"]) == 0
    out = capsys.readouterr().out
    assert "same_view  ok" in out and "causal" not in out


def test_mailroom_check_gives_a_bad_view_field_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({**GOOD[0].to_dict(), "view": -2}) + "\n")
    assert main(["check", str(path), "--engine", "reference"]) == 2
    err = capsys.readouterr().err
    assert err == f"mailroom check: {path}:1: field 'view' must be a non-negative integer\n"
