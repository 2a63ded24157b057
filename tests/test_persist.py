"""Persistent fields (``mailroom.core.persist``): each field loads what it dumps, a bad
value or a missing key is a ``LocalError`` naming the key, loading follows the table's
order, and every endpoint class of the library snapshots exactly its header and the
fields its ``persistent`` table declares, and restores from that."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mailroom.testing.membership  # noqa: F401  (it defines endpoint classes)
from mailroom.clocks import VectorClock
from mailroom.core.actions import Transmit
from mailroom.core.endpoint import ENDPOINT_TYPES, HEADER_KEYS, EndpointBase
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId
from mailroom.core.persist import (
    ALWAYS,
    CLOCK,
    COUNTER,
    COUNTS,
    FLAG,
    MATRIX,
    MESSAGE_ID,
    PID,
    PIDS,
    POSITIVE,
    TIME,
    Field,
    Kind,
    argument,
    check_table,
    counts,
    dump_fields,
    list_of,
    load_fields,
    matrix,
    packets,
    set_of,
    window,
)
from mailroom.core.timers import NOW, HostTime
from mailroom.lab import MatrixLab
from mailroom.protocols import CBCAST, FifoPacket, Group, Sequencer
from mailroom.protocols.membership.detector import HeartbeatDetector
from mailroom.testing.variants import CBCASTSenderOnly
from mailroom.testing.variants_total import SequencerNoHold

N = 3


class Host:
    """A plain object holding fields, as an endpoint does (``n`` for pids and vectors)."""

    def __init__(self, n: int = N) -> None:
        self.n = n
        self.pid = 0
        self.value: Any = None
        self.shared = [0] * n
        self.rows = [[0] * n for _ in range(n)]
        self.low = [0] * n
        self.high: list[set[int]] = [set() for _ in range(n)]
        self.held: list[FifoPacket] = []
        self.now: float = 0.0
        self.time = HostTime()


def round_trip(fields: tuple[Field, ...], host: Host) -> tuple[dict[str, Any], Host]:
    """Dump ``host`` through JSON and load the data into a fresh Host."""
    data: dict[str, Any] = {}
    dump_fields(host, fields, data)
    data = json.loads(json.dumps(data))
    fresh = Host(host.n)
    load_fields(fresh, fields, data)
    return data, fresh


# -- each kind loads what it dumps -------------------------------------------------------
counters = st.integers(0, 2**53)
pids = st.integers(0, N - 1)
KINDS: list[tuple[Kind, Any]] = [
    (COUNTER, counters),
    (POSITIVE, st.integers(1, 2**53)),
    (FLAG, st.booleans()),
    (TIME, st.floats(0, 1e12)),
    (PID, pids),
    (COUNTS, st.lists(counters, min_size=N, max_size=N)),
    (MATRIX, st.lists(st.lists(counters, min_size=N, max_size=N), min_size=N, max_size=N)),
    (CLOCK, st.lists(counters, min_size=N, max_size=N).map(VectorClock)),
    (MESSAGE_ID, st.builds(MessageId, pids, st.integers(1, 2**53))),
    (PIDS, st.sets(pids)),
    (set_of(MESSAGE_ID), st.sets(st.builds(MessageId, pids, st.integers(1, 99)))),
    (list_of(POSITIVE), st.lists(st.integers(1, 99))),
    (COUNTER.optional(), st.none() | counters),
]


@pytest.mark.parametrize(("kind", "values"), KINDS, ids=[str(i) for i in range(len(KINDS))])
@given(data=st.data())
def test_a_field_of_each_kind_loads_what_it_dumps(kind: Kind, values: Any, data: Any) -> None:
    host = Host()
    host.value = data.draw(values)
    _, back = round_trip((Field("v", "value", kind),), host)
    assert back.value == host.value and type(back.value) is type(host.value)


@given(
    st.lists(st.integers(0, 50), min_size=N, max_size=N),
    st.lists(st.sets(st.integers(0, 60)), min_size=N, max_size=N),
)
def test_a_window_loads_what_it_dumps(lows: list[int], highs: list[set[int]]) -> None:
    host = Host()
    host.low = lows
    host.high = [{i for i in h if i > low + 1} for low, h in zip(lows, highs, strict=True)]
    data, back = round_trip((window("seen", "low", "high"),), host)
    assert (back.low, back.high) == (host.low, host.high)
    assert data["seen"] == [[low, sorted(h)] for low, h in zip(host.low, host.high, strict=True)]


def test_in_place_fields_keep_the_objects_others_share() -> None:
    host = Host()
    host.shared[:] = [1, 2, 3]
    host.rows[1][:] = [4, 5, 6]
    fields = (counts("shared"), matrix("rows"), Field("q", "value", list_of(PID), inplace=True))
    host.value = deque([2, 0])
    data: dict[str, Any] = {}
    dump_fields(host, fields, data)
    fresh = Host()
    fresh.value = deque()
    shared, rows, row1, queue = fresh.shared, fresh.rows, fresh.rows[1], fresh.value
    load_fields(fresh, fields, json.loads(json.dumps(data)))
    assert fresh.shared is shared and fresh.shared == [1, 2, 3]
    assert fresh.rows is rows and fresh.rows[1] is row1 and row1 == [4, 5, 6]
    assert fresh.value is queue and list(queue) == [2, 0]


def test_dotted_attributes_reach_into_a_part() -> None:
    host, fresh = Host(), Host()
    host.value, fresh.value = Host(), Host()
    host.value.shared[:] = [7, 8, 9]
    fields = (Field("inner", "value.shared", COUNTS), counts("value.low", "low"))
    data: dict[str, Any] = {}
    dump_fields(host, fields, data)
    assert data == {"inner": [7, 8, 9], "low": [0, 0, 0]}
    part = fresh.value
    load_fields(fresh, fields, data)
    assert fresh.value is part and part.shared == [7, 8, 9]


def test_packets_are_written_as_data_and_each_handed_to_add() -> None:
    host = Host()
    host.held = [FifoPacket(1, 0, 1, 1, "x"), FifoPacket(2, 0, 4, 2, {"k": [1]})]
    fields = (packets("held", FifoPacket, lambda h: h.held, lambda h, p: h.held.append(p)),)
    data, back = round_trip(fields, host)
    assert back.held == host.held
    assert data["held"][0] == {"sender": 1, "dest": 0, "seq": 1, "channel": 1, "payload": "x"}


def test_now_restores_the_time_and_asks_for_a_rebase() -> None:
    host = Host()
    host.time.take(12.5)
    _, back = round_trip((NOW,), host)
    assert back.time.now == 12.5 and back.time.rebase


# -- a bad value, a missing key ---------------------------------------------------------
BAD: list[tuple[Field, object]] = [
    (Field("count", "value", COUNTER), -1),
    (Field("count", "value", COUNTER), 2**60),
    (Field("count", "value", COUNTER), True),
    (Field("first", "value", POSITIVE), 0),
    (Field("flag", "value", FLAG), 1),
    (Field("time", "value", TIME), float("nan")),
    (Field("time", "value", TIME), 3),
    (Field("peer", "value", PID), N),
    (counts("shared"), [0, 0]),
    (counts("shared"), [0, 0, "x"]),
    (matrix("rows"), [[0] * N, [0] * N]),
    (matrix("rows"), [[0] * N, [0] * N, [0, -1, 0]]),
    (Field("clock", "value", CLOCK), [0, 1]),
    (Field("mid", "value", MESSAGE_ID), [0, 0]),
    (Field("mid", "value", MESSAGE_ID), [0, 1, 2]),
    (Field("peers", "value", PIDS), [0, 7]),
    (Field("peers", "value", PIDS), "01"),
    (Field("queue", "value", list_of(PID)), {"0": 1}),
    (window("seen", "low", "high"), [[0, []], [0, [1]], [0, []]]),  # 1 belongs in low
    (window("seen", "low", "high"), [[0, [5, 3]], [0, []], [0, []]]),  # not sorted
    (window("seen", "low", "high"), [[0, []]]),
    (NOW, 2.0**41),
    (NOW, -1.0),
]


@pytest.mark.parametrize(("field", "bad"), BAD, ids=[f"{f.key}={b!r}" for f, b in BAD])
def test_a_bad_value_is_a_local_error_naming_its_key(field: Field, bad: object) -> None:
    host = Host()
    before = (host.value, list(host.shared), [list(r) for r in host.rows], host.time.now)
    with pytest.raises(LocalError, match=field.key):
        load_fields(host, (field,), {field.key: bad})
    assert (host.value, host.shared, host.rows, host.time.now) == before


def test_a_missing_key_is_a_local_error_naming_it() -> None:
    fields = (Field("a", "value", COUNTER), counts("shared"))
    with pytest.raises(LocalError, match="lacks field 'shared'"):
        load_fields(Host(), fields, {"a": 1})


def test_a_check_sees_the_fields_above_it() -> None:
    """``limit`` must not exceed ``count``: a rule on what an earlier field loaded."""

    def at_most_count(host: Host, limit: int) -> str | None:
        return None if limit <= host.value else f"is above count {host.value}"

    count = Field("count", "value", COUNTER)
    limit = Field("limit", "now", COUNTER, check=at_most_count)
    host = Host()
    load_fields(host, (count, limit), {"count": 5, "limit": 4})
    assert (host.value, host.now) == (5, 4)
    with pytest.raises(LocalError, match="snapshot field limit is above count 5"):
        load_fields(Host(), (count, limit), {"count": 5, "limit": 6})
    # the table's order is the loading order: the other way round, the check runs
    # before count is loaded and sees a fresh host's count, 0
    fresh = Host()
    fresh.value = 0
    with pytest.raises(LocalError, match="snapshot field limit is above count 0"):
        load_fields(fresh, (limit, count), {"count": 5, "limit": 4})


def test_a_table_is_checked_when_it_is_declared() -> None:
    with pytest.raises(TypeError, match="needs a kind or a dump"):
        Field("x")
    with pytest.raises(TypeError, match="only a kind field takes a check"):
        Field("x", dumper=lambda h: 0, loader=lambda h, d: None, check=lambda h, v: None)
    with pytest.raises(TypeError, match="'x' twice"):
        check_table("T", (Field("x", kind=COUNTER), Field("x", kind=FLAG)))
    with pytest.raises(TypeError, match="'n' twice"):

        class Clash(EndpointBase):  # a field may not take a header key
            persistent = (Field("n", kind=COUNTER),)


STEPS = (1, 2, 4, 8)


class Numbered(EndpointBase):
    """A toy endpoint: a constructor argument and a counter (not registered: no protocol)."""

    def __init__(self, pid: int, n: int, *, step: int = 1) -> None:
        super().__init__(pid, n)
        self.total = 0
        self.step = step
        if step not in STEPS:
            raise LocalError(f"step must be one of {STEPS}, got {step!r}")

    persistent = (argument("step"), Field("total", kind=COUNTER))


def test_constructor_arguments_go_to_the_constructor_and_its_checks() -> None:
    ep = Numbered(1, 3, step=4)
    ep.total = 8
    data = ep.snapshot()
    assert list(data) == [*HEADER_KEYS, "step", "total"]
    back = Numbered.restore(json.loads(json.dumps(data)))
    assert (back.step, back.total) == (4, 8)
    with pytest.raises(LocalError, match="step must be one of"):
        Numbered.restore({**data, "step": 0})
    with pytest.raises(LocalError, match="lacks field 'step'"):
        Numbered.restore({k: v for k, v in data.items() if k != "step"})
    with pytest.raises(LocalError, match="not what snapshot"):
        Numbered.restore({**data, "extra": 1})


# -- every endpoint class of the library --------------------------------------------------
def _library_classes() -> list[type[EndpointBase]]:
    """Every registered endpoint class defined in the library (tests may register more)."""
    return sorted(
        (cls for cls in ENDPOINT_TYPES.values() if cls.__module__.startswith("mailroom.")),
        key=lambda cls: cls.protocol,
    )


def _fresh(cls: type[EndpointBase]) -> EndpointBase:
    if issubclass(cls, HeartbeatDetector):
        return cls(Group(0, N, "cbcast", members=range(N)))
    if issubclass(cls, Group):
        return cls(0, N, "cbcast", members=range(N))
    return cls(0, N)


def test_the_library_registers_the_endpoints_this_test_expects() -> None:
    names = {cls.protocol for cls in _library_classes()}
    assert {"Fifo", "Unordered", "RST", "KS", "CBCAST", "TaggedCausalBroadcast"} <= names
    assert {"Reliable", "Sequencer", "Skeen", "LamportTotalOrder", "Group"} <= names
    assert {"HeartbeatDetector", "lab.RST", "SkeenAllFinal", "SequencerNoHold"} <= names


@pytest.mark.parametrize("cls", _library_classes(), ids=lambda c: c.protocol)
def test_a_snapshot_holds_exactly_the_header_and_the_declared_fields(
    cls: type[EndpointBase],
) -> None:
    ep = _fresh(cls)
    data = json.loads(json.dumps(ep.snapshot()))
    declared = [f.key for f in cls.persistent]
    assert list(data) == [*HEADER_KEYS, *(key for key in declared if key in data)]
    # only a field with an absent value may be left out (Group's safe and held)
    optional = {f.key for f in cls.persistent if f.absent is not ALWAYS}
    assert set(declared) - set(data) <= optional
    back = cls.restore(data)
    assert type(back) is cls and back.snapshot() == data


def _safe_groups() -> list[type[EndpointBase]]:
    return [c for c in _library_classes() if issubclass(c, (Group, HeartbeatDetector))]


@pytest.mark.parametrize("quorum", ["majority", "all"])
@pytest.mark.parametrize("cls", _safe_groups(), ids=lambda c: c.protocol)
def test_a_safe_group_snapshots_every_declared_field_mid_hold_and_goes_on_alike(
    cls: type[EndpointBase], quorum: str
) -> None:
    """Under safe delivery P0 holds its own message until P1 and P2 (or, counting a
    majority, one of them) report they hold it: a snapshot taken meanwhile writes every
    declared field (``safe_quorum`` only when it is not the default, "all"; the
    detector's ``formation`` only when it is not 0), and the
    restored endpoint hands over the same deliveries as the original when the reports
    come."""

    def member(p: int) -> EndpointBase:
        group = Group if issubclass(cls, HeartbeatDetector) else cls
        g = group(p, N, "cbcast", members=range(N), safe=True, safe_quorum=quorum)  # type: ignore[call-arg]
        return cls(g) if issubclass(cls, HeartbeatDetector) else g  # type: ignore[call-arg]

    eps = [member(p) for p in range(N)]
    sent = [a for a in eps[0].broadcast("a") if isinstance(a, Transmit)]
    data = json.loads(json.dumps(eps[0].snapshot()))
    left_out = {"formation"} | ({"safe_quorum"} if quorum == "all" else set())  # defaults
    keys = [f.key for f in cls.persistent if f.key not in left_out]
    fields = data["group"] if issubclass(cls, HeartbeatDetector) else data
    assert list(data) == [*HEADER_KEYS, *keys]
    assert fields.get("safe_quorum", "all") == quorum
    held = data["group"]["held"] if issubclass(cls, HeartbeatDetector) else data["held"]
    if cls in (Group, HeartbeatDetector):  # the known-buggy variants hand it over at once
        assert [row[:4] for row in held] == [["m", 0, 1, "a"]]
    back = cls.restore(data)
    assert type(back) is cls and back.snapshot() == data
    arrived = [a for q in (1, 2) for s in sent if s.to == q for a in eps[q].receive(s.packet)]
    reports = [a.packet for a in arrived if isinstance(a, Transmit) and a.to == 0]
    assert reports and all(type(r).__name__ == "Stability" for r in reports)
    for r in reports:
        assert back.receive(r) == eps[0].receive(r)
    assert back.snapshot() == eps[0].snapshot()


def test_the_lab_and_the_naive_variants_restore_what_they_hold() -> None:
    """Their own state (a rescanned list, the ids or numbers seen) is in their tables."""
    lab = MatrixLab(0, 2)
    first, second = (lab.send(x, to=1)[0].packet for x in "xy")
    cases: list[tuple[EndpointBase, list[object]]] = [(MatrixLab(1, 2), [second, first, second])]
    cbcast = CBCAST(0, 2)
    one, two = (cbcast.broadcast(x)[0].packet for x in "xy")
    cases.append((CBCASTSenderOnly(1, 2), [two, one, two]))
    sequencer = Sequencer(0, 2)
    orders = [sequencer.broadcast(x)[0].packet for x in "xy"]
    cases.append((SequencerNoHold(1, 2), [orders[1], orders[0], orders[1]]))
    for ep, arrivals in cases:
        ep.receive(arrivals[0])
        clone = type(ep).restore(json.loads(json.dumps(ep.snapshot())))
        for p in arrivals[1:]:  # the rest of the run, duplicate included, is the same
            assert clone.receive(p) == ep.receive(p), ep.protocol
        assert clone.snapshot() == ep.snapshot() and clone.duplicates == 1
