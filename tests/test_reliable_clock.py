"""Reliable checkpoints resume under any host clock; hostile times and timeouts are
refused; no ``now`` makes ``tick`` loop."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom import (
    CBCAST,
    Fifo,
    LocalError,
    MessageId,
    Reliable,
    Stack,
    Transmit,
    restore_endpoint,
)
from mailroom.protocols import ReliablePacket
from mailroom.sim import NetworkModel, Simulation
from mailroom.testing import ShiftedClock


def _data(actions: list[Any]) -> list[ReliablePacket]:
    return [
        a.packet for a in actions if isinstance(a, Transmit) and type(a.packet) is ReliablePacket
    ]


def _sent_at(now: float) -> Reliable:
    a = Reliable(0, 2, rto=2.0, max_rto=8.0)
    a.tick(now - 1.0)
    a.send("x", to=1)
    a.tick(now)  # armed: retransmit at now + 2
    return a


@pytest.mark.parametrize("clock", [0.0, 5.0, 99_000.0])
def test_a_restore_under_an_earlier_clock_retransmits_within_one_timeout(clock: float) -> None:
    a = _sent_at(100_000.0)
    assert a.next_deadline() == 100_002.0
    b = Reliable.restore(json.loads(json.dumps(a.snapshot())))
    assert b.next_deadline() == 0.0  # tick at once, whatever the host's clock
    assert b.tick(clock) == []
    assert b.next_deadline() == clock + 2.0  # the 2 units left, on the new clock
    assert _data(b.tick(clock + 1.9)) == []
    assert [p.seq for p in _data(b.tick(clock + 2.0))] == [1]


def test_a_restore_under_a_later_clock_retransmits_at_once() -> None:
    b = Reliable.restore(_sent_at(10.0).snapshot())
    assert [p.seq for p in _data(b.tick(2.0**30))] == [1]  # time passed: overdue
    assert b.next_deadline() == 2.0**30 + 4.0  # backed off once


def test_a_clock_that_goes_back_while_running_moves_the_deadlines_back() -> None:
    a = _sent_at(50.0)
    assert a.tick(10.0) == [] and a.next_deadline() == 12.0
    assert len(_data(a.tick(12.0))) == 1


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf, -1.0, 2.0**70, "3", True, None])
def test_hostile_times_are_refused_and_change_nothing(now: Any) -> None:
    a = _sent_at(5.0)
    before = a.snapshot()
    with pytest.raises(LocalError, match="now must be"):
        a.tick(now)
    assert a.snapshot() == before


@pytest.mark.parametrize(
    "params",
    [
        {"rto": 0.0},
        {"rto": -1.0},
        {"rto": math.nan},
        {"rto": math.inf, "max_rto": math.inf},
        {"backoff": math.nan},
        {"max_rto": math.nan},
        {"backoff": 0.5},
    ],
)
def test_bad_timeouts_are_refused(params: dict[str, float]) -> None:
    with pytest.raises(LocalError):
        Reliable(0, 2, **params)
    data = Reliable(0, 2).snapshot()
    with pytest.raises(LocalError):
        Reliable.restore({**data, "params": {**data["params"], **params}})


@pytest.mark.parametrize("now", [math.nan, -1.0, 2.0**70, math.inf, 1])
def test_hostile_checkpoint_times_are_local_errors(now: Any) -> None:
    data = _sent_at(5.0).snapshot()
    with pytest.raises(LocalError):
        Reliable.restore({**data, "now": now})


def test_a_huge_but_allowed_now_does_not_loop() -> None:
    a = Reliable(0, 2, rto=1e-300, max_rto=1e-300)
    a.send("x", to=1)
    a.tick(2.0**40)  # now + rto == now in floating point: each packet fires once per tick
    assert len(_data(a.tick(2.0**40))) == 1


# -- the property: restore at a random point under a shifted clock ---------------------------

restores = st.tuples(
    st.floats(10.0, 40.0),  # when
    st.integers(0, 2),  # who
    st.sampled_from(["zero", "back", "ahead"]),
    st.integers(0, 2**16),  # network seed
    st.sampled_from([Fifo, CBCAST]),
)


@given(restores)
@settings(max_examples=30, deadline=None)
def test_restored_under_any_clock_every_message_arrives_promptly(drawn: Any) -> None:
    when, who, shift, seed, upper = drawn
    rto, n = 2.0, 3
    eps = [Stack(Reliable(p, n, rto=rto, max_rto=4 * rto), upper(p, n)) for p in range(n)]
    sent: dict[Any, float] = {}
    delays: list[float] = []

    def deliver(sim: Simulation, pid: int, m: Any) -> None:
        delays.append(sim.now - max(sent[m.id], when))

    sim = Simulation(eps, NetworkModel(delay=(0.2, 1.0), loss=0.2), seed=seed, on_deliver=deliver)

    def send(p: int, k: int) -> Any:
        def op(sim: Simulation) -> None:
            sent[MessageId(p, sim.endpoints[p].sent_count + 1)] = sim.now
            if upper is CBCAST:
                sim.broadcast(p, f"m{k}")
            else:
                sim.send(p, f"m{k}", to=(p + 1) % n)

        return op

    for k in range(30):
        sim.schedule(k * 1.5, send(k % n, k))

    def restore(sim: Simulation) -> None:
        data = json.loads(json.dumps(sim.endpoints[who].snapshot()))
        offset = {"zero": -sim.now, "back": -sim.now / 2, "ahead": 1e6}[shift]
        sim.replace(who, ShiftedClock(restore_endpoint(data), offset))

    sim.schedule(when, restore)
    sim.run()
    expected = 30 * (n if upper is CBCAST else 1)
    assert len(delays) == expected
    # a lost packet comes again within a few (capped) timeouts of the restore or send;
    # without re-basing, packets pending at the restore wait for the old clock's deadlines
    assert max(delays) <= 1.0 + 3.5 * 4 * rto
