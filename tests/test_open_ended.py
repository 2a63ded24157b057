"""Services never quiesce: every registered protocol keeps bounded latency and flat
state under steady traffic (Hypothesis picks group, rate, delays, run length and
seed), and the variants that starve or leak are caught."""

from __future__ import annotations

from functools import partial

import pytest
from hypothesis import given, settings

from mailroom.core.registry import PROTOCOLS
from mailroom.lab import SkeenAllFinal
from mailroom.protocols import Skeen
from mailroom.testing import Steady, open_ended_problems, run_steady, steady_scenarios

NAMES = sorted(PROTOCOLS)


@pytest.mark.parametrize("name", NAMES)
@given(data=steady_scenarios(duration=(60.0, 200.0)))
@settings(max_examples=6, deadline=None)
def test_every_protocol_has_bounded_latency_and_flat_state(name: str, data: Steady) -> None:
    factory, mode, _ = PROTOCOLS[name]
    scenario = Steady(**{**_fields(data), "mode": mode})
    run = run_steady(factory, scenario)
    assert open_ended_problems(run) == []


@pytest.mark.parametrize("name", NAMES)
@given(data=steady_scenarios(lossy=True, n=(2, 3), duration=(60.0, 120.0)))
@settings(max_examples=2, deadline=None)
def test_every_protocol_over_reliable_on_a_lossy_network(name: str, data: Steady) -> None:
    factory, mode, _ = PROTOCOLS[name]
    run = run_steady(factory, Steady(**{**_fields(data), "mode": mode}))
    assert open_ended_problems(run) == []


def _fields(s: Steady) -> dict[str, object]:
    return {
        "n": s.n,
        "period": s.period,
        "duration": s.duration,
        "delay": s.delay,
        "mode": s.mode,
        "loss": s.loss,
        "rto": s.rto,
        "seed": s.seed,
    }


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
    assert any("snapshot size grew" in p for p in open_ended_problems(leaky))
    bounded = run_steady(Skeen, ISSUE)
    assert len(bounded.sizes) == 32
    assert open_ended_problems(bounded) == []
