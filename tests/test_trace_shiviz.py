"""ShiViz logs: every shared log loads with its parser; written logs read back consistently."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from mailroom.core.messages import MessageId
from mailroom.protocols import Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import check
from mailroom.trace.events import Event, TraceError
from mailroom.trace.shiviz import (
    SHIVIZ_DELIMITER,
    js_regex,
    load_parsers,
    neighbourhood,
    parse_shiviz,
    read_shiviz,
    to_events,
    write_shiviz,
)

SHIVIZ_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "shiviz"

#: file -> (records, executions, hosts)
EXPECTED = {
    "simple-reliable-broadcast.log": (39, 1, 3),
    "chord.log": (1235, 1, 8),
    "RpcClientServer.log": (10, 1, 2),
    "facebook-multiple.log": (88, 2, 4),
}


@pytest.fixture(scope="module")
def parsers() -> dict[str, dict[str, str]]:
    if not SHIVIZ_DIR.is_dir():
        pytest.skip(f"{SHIVIZ_DIR} is absent")
    return load_parsers(SHIVIZ_DIR / "parsers.json")


def test_every_shared_log_loads_with_its_parser(parsers: dict[str, dict[str, str]]) -> None:
    assert set(parsers) == set(EXPECTED)
    for name, spec in parsers.items():
        log = read_shiviz(SHIVIZ_DIR / name, spec["parser"], spec.get("delimiter"))
        records, executions, hosts = EXPECTED[name]
        assert (len(log.events), len(log.executions), len(log.hosts())) == (
            records,
            executions,
            hosts,
        ), name
        assert log.invalid == []
        for e in log.events:  # the clock names the host itself
            assert e.clock[e.host] >= 1


def test_records_span_two_lines_in_either_order(parsers: dict[str, dict[str, str]]) -> None:
    chord = read_shiviz(SHIVIZ_DIR / "chord.log", parsers["chord.log"]["parser"])
    assert chord.events[1].text == "Sending Put request for '90'"  # host line first
    fb = parsers["facebook-multiple.log"]
    log = read_shiviz(SHIVIZ_DIR / "facebook-multiple.log", fb["parser"], fb["delimiter"])
    first = log.events[0]  # event line first, then host and clock
    assert (first.host, first.clock, first.text) == (
        "alice",
        {"alice": 1},
        "/timeline uid=alice location=kansas",
    )
    assert first.fields["action"] == "GET" and first.fields["ip"] == "24.22.130.14"
    assert log.executions == ("Execution #1", "Execution #2")


def test_govector_logs_carry_their_parser_on_the_first_line(
    parsers: dict[str, dict[str, str]],
) -> None:
    log = read_shiviz(SHIVIZ_DIR / "RpcClientServer.log")
    assert len(log.events) == 10 and log.events[0].line == 4


def test_js_regex_conversion() -> None:
    assert js_regex(r"(?<host>\S*) (?<=x)(?<!y)\k<host>") == r"(?P<host>\S*) (?<=x)(?<!y)(?P=host)"


def test_bad_records_and_bad_parsers() -> None:
    text = 'a {"a":1}\nok\nb {"b":"x"}\nbad\nc {nope}\nworse\n'
    log = parse_shiviz(text, r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)")
    assert [e.host for e in log.events] == ["a"]
    assert [(r.line, r.reason) for r in log.invalid] == [
        (3, "clock entry 'b' must be a positive integer"),
        (5, "clock is not JSON (Expecting property name enclosed in double quotes)"),
    ]
    with pytest.raises(TraceError, match="host"):
        parse_shiviz(text, r"(?<clock>{.*})")
    with pytest.raises(TraceError, match="not a regular expression"):
        parse_shiviz(text, r"(?<host>")


def _unordered_trace() -> list[Event]:
    sim = Simulation(
        [Unordered(p, 3) for p in range(3)], NetworkModel(delay=(1, 10)), seed=3, run="u"
    )
    random_workload(sim, 20, mode="broadcast", seed=3)
    sim.run()
    return sim.trace


def test_written_logs_read_back_with_consistent_clocks() -> None:
    trace = _unordered_trace()
    a = [attrs_evolve_run(e, "a") for e in trace]
    out = io.StringIO()
    count = write_shiviz(trace + a, out)
    assert count == 2 * sum(1 for e in trace if e.kind != "receive")
    text = out.getvalue()
    parser = text.partition("\n")[0]
    log = parse_shiviz(text.partition("\n")[2], parser, SHIVIZ_DELIMITER)
    assert log.executions == ("a", "u") and len(log.events) == count and not log.invalid
    own: dict[tuple[str, str], int] = {}
    for e in log.events:  # each host's own entry steps by one, as ShiViz requires
        key = (e.execution, e.host)
        assert e.clock[e.host] == own.get(key, 0) + 1
        own[key] = e.clock[e.host]


def attrs_evolve_run(e: Event, run: str) -> Event:
    import attrs

    return attrs.evolve(e, run=run)


def test_a_violations_neighbourhood_exports_as_a_small_log(tmp_path: Path) -> None:
    trace = _unordered_trace()
    v = check(trace, ("causal",)).violations["causal"][0]
    part = neighbourhood(trace, v.run, v.processes, v.messages, context=2)
    assert {e.message for e in part} >= set(v.messages)
    assert len(part) < len([e for e in trace if e.kind != "receive"])
    path = tmp_path / "n.log"
    write_shiviz(part, path)
    log = read_shiviz(path)
    assert len(log.events) == len(part) and not log.invalid
    # the violation is visible in the exported clocks: m1's send precedes m2's send
    m1, m2 = (f"send {m} to" for m in v.messages)
    c1 = next(e.clock for e in log.events if e.text.startswith(m1))
    c2 = next(e.clock for e in log.events if e.text.startswith(m2))
    assert all(c2.get(k, 0) >= x for k, x in c1.items())


def test_to_events_names_messages_with_regexes(parsers: dict[str, dict[str, str]]) -> None:
    spec = parsers["simple-reliable-broadcast.log"]
    log = read_shiviz(SHIVIZ_DIR / "simple-reliable-broadcast.log", spec["parser"])
    events, pids = to_events(
        log,
        r"Initiating RBBroadcast\((?<message>DataMessage\(\d+,\w+\))\)",
        r"RBDeliver of message (?<message>DataMessage\(\d+,\w+\))",
    )
    assert pids == {"node0": 0, "node1": 1, "node2": 2}
    assert [(e.kind, e.process, e.message) for e in events] == [
        ("send", 0, MessageId(0, 1)),
        ("deliver", 1, MessageId(0, 1)),
        ("deliver", 2, MessageId(0, 1)),
        ("deliver", 0, MessageId(0, 1)),
    ]
    assert check(events, ("causal", "fifo", "integrity")).ok
    with pytest.raises(TraceError, match="message"):
        to_events(log, "x", "y")
    json.dumps([e.to_dict() for e in events])
