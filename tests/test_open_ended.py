"""Services never quiesce: every registered protocol keeps bounded latency and flat
state under steady traffic (Hypothesis picks group, rate, delays, run length and
seed), and the variants that starve or leak are caught."""

from __future__ import annotations

from functools import partial

import attrs
import pytest
from hypothesis import example, given, settings

from mailroom.core.registry import PROTOCOLS
from mailroom.lab import SkeenAllFinal
from mailroom.protocols import Skeen
from mailroom.testing import Steady, open_ended_problems, run_steady, steady_scenarios

NAMES = sorted(PROTOCOLS)

# A lossy run where lost packets' stalls kept Skeen's buffers filling for half the
# run: the in-flight sizes grew from the middle to the end; the state at rest did not.
LOSSY = Steady(n=3, period=2.0, duration=82.0, delay=(0.0, 2.0), loss=0.1, rto=8.0, seed=8544)


@pytest.mark.parametrize("name", NAMES)
@given(data=steady_scenarios(duration=(60.0, 200.0)))
@settings(max_examples=6, deadline=None)
def test_every_protocol_has_bounded_latency_and_flat_state(name: str, data: Steady) -> None:
    factory, mode, _ = PROTOCOLS[name]
    run = run_steady(factory, attrs.evolve(data, mode=mode))
    assert open_ended_problems(run) == []


@pytest.mark.parametrize("name", NAMES)
@given(data=steady_scenarios(lossy=True, n=(2, 3), duration=(60.0, 120.0)))
@example(data=LOSSY)
@settings(max_examples=4, deadline=None)
def test_every_protocol_over_reliable_on_a_lossy_network(name: str, data: Steady) -> None:
    factory, mode, _ = PROTOCOLS[name]
    run = run_steady(factory, attrs.evolve(data, mode=mode))
    assert open_ended_problems(run) == []


# The issue's scenario: 3 processes, one broadcast every 0.5 (each process every 1.5),
# delays of 1.0, a run of 200.
ISSUE = Steady(n=3, period=1.5, duration=200.0, delay=(1.0, 1.0))


def test_skeen_delivers_under_steady_traffic_and_all_final_rule_starves() -> None:
    standard = run_steady(Skeen, ISSUE)
    literal = run_steady(SkeenAllFinal, ISSUE)
    first = standard.first_delivery[1]
    assert first is not None and first <= 3.0  # message, proposal, final: three delays
    assert open_ended_problems(standard) == []
    starved = literal.first_delivery[1]
    assert starved is not None and starved >= ISSUE.duration  # only once the senders stop
    problems = open_ended_problems(literal)
    assert any("latency of late messages" in p for p in problems)
    # the longer the run, the longer the wait: it grows with the run, not the delays
    longer = run_steady(SkeenAllFinal, Steady(n=3, period=1.5, duration=400.0))
    assert longer.worst_latency(200.0) > literal.worst_latency(100.0) + 90


def test_state_kept_per_message_is_caught() -> None:
    leaky = run_steady(partial(Skeen, keep_finals=10**9), ISSUE)  # finals kept forever
    problems = open_ended_problems(leaky)
    assert any("snapshot size grew" in p for p in problems)
    assert any("state at rest grew" in p for p in problems)
    bounded = run_steady(Skeen, ISSUE)
    assert len(bounded.sizes) == 32 and len(bounded.rest) == 3
    assert open_ended_problems(bounded) == []


def test_on_a_lossy_network_the_state_is_judged_at_rest() -> None:
    # In flight, Skeen's buffers over a lossy network swing by more than its state:
    # sampled sizes grew by half from the middle of this run to its end. At rest
    # the bounded endpoint is flat, and the one that keeps a number per message
    # is still caught.
    bounded = run_steady(Skeen, LOSSY)
    middle = bounded.floor_size(LOSSY.duration / 4, LOSSY.duration / 2)
    assert bounded.floor_size(3 * LOSSY.duration / 4, LOSSY.duration) > middle * 3 // 2
    assert open_ended_problems(bounded) == []
    _, second, third = bounded.rest
    assert third <= second + second // 10
    leaky = run_steady(partial(Skeen, keep_finals=10**9), LOSSY)
    assert any("state at rest grew" in p for p in open_ended_problems(leaky))
