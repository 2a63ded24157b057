"""The Spark clock check against a plain-Python statement of it, on clocks broken in every way.

The traces are made to hit every branch of the check: right clocks, right clocks
with zero entries on either side (zero entries mean nothing), entries off by one,
missing, extra or foreign, and clocks absent. The answers must not depend on how
Spark treats duplicate map keys.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from mailroom.core.messages import MessageId
from mailroom.spark import check_trace, events_frame
from mailroom.trace import Event

N = 4


def _run(rng: random.Random, name: str) -> list[Event]:
    """A run of N processes broadcasting, with true clocks, then some of them broken."""
    seq = dict.fromkeys(range(N), 0)
    now: dict[int, dict[int, int]] = {p: {} for p in range(N)}
    sent: list[tuple[MessageId, dict[int, int]]] = []
    todo: dict[int, list[tuple[MessageId, dict[int, int]]]] = {p: [] for p in range(N)}
    events: list[Event] = []
    count = dict.fromkeys(range(N), 0)
    for _ in range(rng.randrange(4, 30)):
        p = rng.randrange(N)
        if todo[p] and rng.random() < 0.6:
            m, sc = todo[p].pop(rng.randrange(len(todo[p])))
            for k, v in sc.items():
                now[p][k] = max(now[p].get(k, 0), v)
            kind, sender = "deliver", m.origin
        else:
            count[p] += 1
            m, kind, sender = MessageId(p, count[p]), "send", p
        now[p][p] = now[p].get(p, 0) + 1
        vc = dict(now[p])
        if kind == "send":
            sent.append((m, vc))
            for q in range(N):
                if q != p:
                    todo[q].append((m, vc))
        dest = tuple(q for q in range(N) if q != m.origin)
        events.append(Event(name, p, seq[p], kind, m, sender, dest, vc=vc))
        seq[p] += 1
    return [_break(rng, e, i) for i, e in enumerate(events)]


def _break(rng: random.Random, e: Event, i: int) -> Event:
    """The event, with its clock left alone or changed in one of many ways."""
    assert e.vc is not None
    vc = dict(e.vc)
    way = rng.randrange(9)
    if way == 1:
        vc[rng.randrange(N + 2)] = 0  # a zero entry: still right
    elif way == 2 and len(vc) > 1:
        k = rng.choice(sorted(vc))
        vc[k] += rng.choice((-1, 1))
    elif way == 3:
        del vc[rng.choice(sorted(vc))]
    elif way == 4:
        vc[N + 1] = 1  # an entry of a process that does not exist
    elif way == 5:
        return Event(e.run, e.process, e.seq, e.kind, e.message, e.sender, e.dest)
    elif way == 6 and e.process in vc:
        vc[e.process] = 0
    return Event(e.run, e.process, e.seq, e.kind, e.message, e.sender, e.dest, vc=vc)


def _positive(vc: dict[int, int] | None) -> dict[int, int]:
    return {k: v for k, v in (vc or {}).items() if v > 0}


def wrong_clocks(events: list[Event]) -> set[tuple[str, int, int]]:
    """(run, process, seq) of every event whose clock is not its process's previous
    clock merged with its send's, its own entry one more (zero entries ignored)."""
    sends: dict[tuple[str, MessageId], Event] = {}
    for e in events:
        if e.kind == "send":
            sends[(e.run, e.message)] = e  # each message is sent once here
    wrong = set()
    prev: dict[tuple[str, int], dict[int, int] | None] = {}
    for e in sorted(events, key=lambda e: (e.run, e.process, e.seq)):
        p = _positive(prev.get((e.run, e.process)))
        q = _positive(sends[(e.run, e.message)].vc) if e.kind == "deliver" else {}
        want = {k: max(p.get(k, 0), q.get(k, 0)) for k in p.keys() | q.keys()}
        want[e.process] = p.get(e.process, 0) + 1
        if e.vc is not None and _positive(e.vc) != want:
            wrong.add((e.run, e.process, e.seq))
        prev[(e.run, e.process)] = e.vc
    return wrong


@pytest.fixture(scope="module")
def events() -> list[Event]:
    rng = random.Random(7)
    return [e for i in range(120) for e in _run(rng, f"r{i}")]


@pytest.fixture(params=["LAST_WIN", "EXCEPTION"])
def policy(spark: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """Spark's policy for duplicate map keys (the CLI's session sets LAST_WIN)."""
    old = spark.conf.get("spark.sql.mapKeyDedupPolicy")
    spark.conf.set("spark.sql.mapKeyDedupPolicy", request.param)
    yield str(request.param)
    spark.conf.set("spark.sql.mapKeyDedupPolicy", old)


def test_the_clock_check_finds_exactly_the_wrong_clocks(
    spark: Any, events: list[Event], policy: str
) -> None:
    want = wrong_clocks(events)
    right = sum(1 for e in events if e.vc is not None) - len(want)
    assert len(want) > 100 and right > 300  # both kinds, many of each
    report = check_trace(spark, events_frame(spark, events), ("clock",), mode="full", hb="given")
    got = {(v.run, v.processes[0], v.positions[0]) for v in report.violations.collect()}
    assert got == want
    assert report.counts["clock"] == len(want)


def test_the_reference_clock_check_gives_the_same_rows_in_the_same_words(
    spark: Any, events: list[Event]
) -> None:
    """Property ``clock`` has a reference check too (the registry): the same wrong clocks
    as the plain statement, and the same reasons as Spark's, on the same runs."""
    from mailroom.trace import check

    ref = check(events, ["clock"], mode="full").violations["clock"]
    # (a run with a clockless event gets its clocks computed on both engines: none wrong)
    computed = {e.run for e in events if e.vc is None}
    want = {w for w in wrong_clocks(events) if w[0] not in computed}
    assert {(v.run, v.processes[0], v.positions[0]) for v in ref} == want and want
    report = check_trace(spark, events_frame(spark, events), ("clock",), mode="full")
    got = {(r.run, tuple(r.positions), r.reason) for r in report.violations.collect()}
    assert got == {(v.run, v.positions, v.reason) for v in ref}


# "given" in the full tier: "auto" takes the given clocks when the trace has them
@pytest.mark.parametrize("hb", ["auto", pytest.param("given", marks=pytest.mark.slow), "compute"])
@pytest.mark.parametrize("properties", [("clock",), ("fifo",), ("integrity", "causal")])
def test_the_report_counts_every_event_and_run_however_clocks_come(
    spark: Any, events: list[Event], hb: str, properties: tuple[str, ...]
) -> None:
    """The events and runs are counted as the check reads them, or by the digest when
    clocks are computed (the trace is then read twice): the same numbers either way,
    events the checks leave out (receives, a run of nothing else) included."""
    receives = [
        Event(e.run, e.process, 1000 + e.seq, "receive", e.message, e.sender, e.dest)
        for e in events[::5]
    ]
    lonely = [Event("lonely", 0, 0, "receive", MessageId(1, 1), 1, (0,))]
    trace = events + receives + lonely
    report = check_trace(spark, events_frame(spark, trace), properties, hb=hb)
    assert report.found is not None
    assert (report.found.events, report.found.runs) == (len(trace), len({e.run for e in trace}))
