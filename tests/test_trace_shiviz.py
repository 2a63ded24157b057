"""ShiViz logs: every vendored example log loads and checks as ShiViz reads it; readers are
linear; written logs read back consistently."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from mailroom.core.messages import MessageId
from mailroom.protocols import Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.trace.checkers import check
from mailroom.trace.events import Event, TraceError
from mailroom.trace.shiviz import (
    SHIVIZ_DELIMITER,
    SHIVIZ_PARSER,
    clock_violations,
    js_regex,
    load_parsers,
    log_events,
    neighbourhood,
    parse_shiviz,
    read_shiviz,
    to_events,
    write_shiviz,
)

SHIVIZ_DIR = Path(__file__).resolve().parent / "data" / "shiviz"

#: file -> (records, executions, hosts), as ShiViz's own parser counts them
EXPECTED = {
    "simple-reliable-broadcast.log": (39, 1, 3),
    "reliable-broadcast.log": (116, 1, 4),
    "chord.log": (1235, 1, 8),
    "RpcClientServer.log": (10, 1, 2),
    "facebook.log": (47, 1, 4),
    "facebook-study.log": (47, 1, 4),
    "facebook-multiple.log": (88, 2, 4),
    "facebook-multiple-study.log": (88, 2, 4),
    "multiple-comparison.log": (40, 5, 3),
    "simpledb.log": (509, 1, 5),
    "voldemort.log": (864, 1, 20),
    "voldemort-simple-threadnames.log": (863, 1, 19),
    "ewd998.log": (990, 3, 7),
    "tsviz_fslock_24t_4sp.log": (2001, 1, 30),
    "tsviz_shared_var_4_threads.log": (5000, 1, 4),
}


@pytest.fixture(scope="module")
def parsers() -> dict[str, dict[str, str]]:
    return load_parsers(SHIVIZ_DIR / "parsers.json")


def test_every_vendored_log_loads_and_checks_with_its_parser(
    parsers: dict[str, dict[str, str]],
) -> None:
    logs = {p.name for p in SHIVIZ_DIR.glob("*.log")}
    assert set(parsers) == set(EXPECTED) == logs
    for name, spec in parsers.items():
        log = read_shiviz(SHIVIZ_DIR / name, spec["parser"], spec.get("delimiter"))
        records, executions, hosts = EXPECTED[name]
        assert (len(log.events), len(log.executions), len(log.hosts())) == (
            records,
            executions,
            hosts,
        ), name
        assert log.invalid == [], name
        for e in log.events:  # the clock names the host itself, and no entry is 0
            assert e.clock[e.host] >= 1 and min(e.clock.values()) >= 1
        assert clock_violations(log) == [], name


def test_zero_entries_are_dropped_as_shiviz_drops_them(
    parsers: dict[str, dict[str, str]],
) -> None:
    log = read_shiviz(SHIVIZ_DIR / "voldemort.log", parsers["voldemort.log"]["parser"])
    client = "42795@jvoldemortThread[voldemort-niosocket-client-1,5,main]"
    raw = (SHIVIZ_DIR / "voldemort.log").read_text().splitlines()
    assert f'"{client}":0' in raw[133]  # line 134 writes a zero entry
    record = next(e for e in log.events if e.line == 133)
    assert client not in record.clock and len(log.events) == 864 and not log.invalid


def test_escaped_clocks_are_unescaped_and_executions_split(
    parsers: dict[str, dict[str, str]],
) -> None:
    spec = parsers["ewd998.log"]
    log = read_shiviz(SHIVIZ_DIR / "ewd998.log", spec["parser"], spec["delimiter"])
    assert log.executions[0] == "78 actions (EWD998Chan!EWD998!terminationDetected)"
    second = log.events[
        0
    ]  # State 1 has no Host line; State 2: /\ Clock = "{\"n1\":0,...,\"n6\":1,\"n7\":0}"
    assert (second.host, second.clock, second.text, second.line) == ("n6", {"n6": 1}, "SendMsg", 52)
    assert second.fields["counter"].startswith("(n1 :> 0")


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
        (3, "clock entry 'b' must be a non-negative integer"),
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


def _tracks(text: str) -> tuple[str, list[int]]:
    """``text`` as a str whose ``count`` calls add the length they scan to the list."""
    scanned: list[int] = []

    class Tracked(str):
        def count(self, sub: str, start: Any = None, end: Any = None) -> int:  # type: ignore[override]
            scanned.append((len(self) if end is None else end) - (start or 0))
            return super().count(sub, start, end)

    return Tracked(text), scanned


def _records(n: int) -> str:
    return "".join(f'h{i % 5} {{"h{i % 5}":{i // 5 + 1}}}\nevent {i}\n' for i in range(n))


def test_line_numbers_cost_one_pass_over_the_text() -> None:
    for n in (200, 2000):  # counting from the start for every record scans n^2 / 2 lines
        text, scanned = _tracks(_records(n))
        log = parse_shiviz(text, SHIVIZ_PARSER)
        assert [e.line for e in log.events[:3]] == [1, 3, 5] and log.events[-1].line == 2 * n - 1
        assert sum(scanned) <= len(text)


def _cost(text: str, parser: str) -> float:
    """The best of five times to parse ``text`` (only ratios of these are compared)."""
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        parse_shiviz(text, parser)
        best = min(best, time.perf_counter() - start)
    return best


def test_the_govector_parser_is_linear_on_long_lines() -> None:
    # a backtracking engine tries \S* from every offset of a line: 4x longer, 16x slower
    small, large = "x" * 20_000 + "\n", "x" * 80_000 + "\n"
    assert parse_shiviz(large, SHIVIZ_PARSER).events == []
    assert _cost(large, SHIVIZ_PARSER) < 8 * max(_cost(small, SHIVIZ_PARSER), 1e-4)


def test_a_catastrophic_user_regex_cannot_hang_the_reader() -> None:
    parser = r"(?<host>(a+)+b) (?<clock>{.*})"  # exponential on a backtracking engine
    small, large = "a" * 5_000 + "\n", "a" * 20_000 + "\n"
    assert parse_shiviz(large, parser).events == []
    assert _cost(large, parser) < 8 * max(_cost(small, parser), 1e-4)
    log = parse_shiviz("a" * 30 + 'b {"x":1}\n', parser)
    with pytest.raises(TraceError, match="the send regex matched no record"):
        log_events(log, r"(?<message>(a+)+c)", r"(?<message>.)")


def test_backreferences_are_refused_with_a_reason() -> None:
    with pytest.raises(TraceError, match="RE2"):
        parse_shiviz("a {}\n", r"(?<host>\w)\k<host> (?<clock>{.*})")


#: A log whose host names and message names must appear in the verdicts.
NAMED_LOG = """\
alpha {"alpha":1}
send Msg(1)
alpha {"alpha":2}
send Msg(2)
beta {"alpha":2, "beta":1}
recv Msg(2)
beta {"alpha":2, "beta":2}
recv Msg(1)
beta {"beta":3, "alpha":2}
recv Ghost(9)
"""


def test_verdicts_use_the_logs_names_and_unsent_deliveries_are_reported() -> None:
    log = parse_shiviz(NAMED_LOG, SHIVIZ_PARSER)
    found = log_events(log, r"^send (?<message>.*)", r"^recv (?<message>.*)")
    report = check(found.events, ("fifo", "causal"))
    reasons = [found.names.rename(v.run, v.reason) for v in report.violations["fifo"]]
    assert reasons == ["beta delivered Msg(2) before Msg(1), sent before it"]
    causal = [found.names.rename(v.run, v.reason) for v in report.violations["causal"]]
    assert causal == ["beta delivered Msg(2) before Msg(1), whose send happened before it"]
    assert [(r.line, r.reason) for r in found.unmatched] == [
        (9, "beta delivered 'Ghost(9)', which no record matched by the send regex sent")
    ]
    with pytest.raises(TraceError, match="the deliver regex matched no record"):
        log_events(log, r"^send (?<message>.*)", r"^nothing (?<message>.*)")


def test_clock_violations_name_hosts_and_lines() -> None:
    text = 'a {"a":1}\nx\nb {"b":1, "a":2}\ny\na {"a":3}\nz\n'
    found = clock_violations(parse_shiviz(text, SHIVIZ_PARSER))
    assert [v.reason for v in found] == [
        "line 3: b's clock names event 2 of a, which is not in the log",
        "line 5: a's own entry steps from 1 to 3",
    ]


def test_a_log_too_large_or_not_utf8_is_refused_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mailroom.trace.shiviz as shiviz

    log = tmp_path / "x.log"
    log.write_bytes(b'a {"a":1}\r\nsend\r\n')
    assert [
        e.text for e in read_shiviz(log, r"(?<host>\S*) (?<clock>{.*})\n(?<event>.*)").events
    ] == ["send"]  # Windows line ends read as ShiViz reads them
    monkeypatch.setattr(shiviz, "MAX_LOG_BYTES", 8)
    with pytest.raises(TraceError, match="larger than 8 bytes"):
        read_shiviz(log, "(?<host>a) (?<clock>.*)")
    monkeypatch.undo()
    log.write_bytes(b'a {"a":1}\n\xff\n')
    with pytest.raises(TraceError, match="not UTF-8 text"):
        read_shiviz(log, "(?<host>a) (?<clock>.*)")
