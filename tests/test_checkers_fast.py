"""The sort-based reference checkers report exactly what the pairwise definitions do.

``tests/pairwise_checkers.py`` keeps the O(d^2) definitions as the oracle; the
fast checkers of ``mailroom.trace.checkers`` must return the same violations,
witnesses and positions, in the same order, on arbitrary small traces (odd ones
included: repeated sends and seqs, deliveries before sends, foreign messages)
and on simulator runs of correct and buggy protocols.
"""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom.core.errors import RemoteError
from mailroom.core.messages import MessageId
from mailroom.protocols import CBCAST, RST, Fifo, Unordered
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.sim.workload import random_workload
from mailroom.testing.variants import CBCASTNoOneGreater, CBCASTSenderOnly, RSTColumnOnly
from mailroom.trace.checkers import by_run, check_causal, check_fifo, check_total
from mailroom.trace.events import KINDS, Event
from tests.pairwise_checkers import ORACLES

FAST = {"fifo": check_fifo, "causal": check_causal, "total": check_total}


@st.composite
def traces(draw: st.DrawFn) -> list[Event]:
    n = draw(st.integers(1, 4))
    pid = st.integers(0, n - 1)
    size = draw(st.integers(0, 40))
    events = []
    for _ in range(size):
        p = draw(pid)
        events.append(
            Event(
                run="r",
                process=p,
                seq=draw(st.integers(1, 30)),
                kind=draw(st.sampled_from(KINDS)),
                message=MessageId(draw(pid), draw(st.integers(0, 5))),
                sender=p,
                dest=draw(st.lists(pid, max_size=n)),
            )
        )
    return events


@given(traces())
def test_fast_checkers_equal_the_pairwise_definitions(events: list[Event]) -> None:
    for prop, fast in FAST.items():
        assert fast(events, "r") == ORACLES[prop](events, "r"), prop


@st.composite
def ordered_traces(draw: st.DrawFn) -> list[Event]:
    """Well-formed histories (seq 1, 2, ... per process, sends before deliveries)."""
    n = draw(st.integers(2, 4))
    seq = [0] * n
    sent: list[tuple[MessageId, tuple[int, ...]]] = []
    count = [0] * n
    events = []
    for _ in range(draw(st.integers(0, 60))):
        p = draw(st.integers(0, n - 1))
        if sent and draw(st.booleans()):
            m, dest = draw(st.sampled_from(sent))
            kind = "deliver"
        else:
            count[p] += 1
            m = MessageId(p, count[p])
            dest = tuple(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True)))
            sent.append((m, dest))
            kind = "send"
        seq[p] += 1
        events.append(Event("r", p, seq[p], kind, m, m.origin, dest))
    return events


@given(ordered_traces())
def test_fast_checkers_equal_the_pairwise_definitions_on_ordered_traces(
    events: list[Event],
) -> None:
    for prop, fast in FAST.items():
        assert fast(events, "r") == ORACLES[prop](events, "r"), prop


@pytest.mark.parametrize(
    ("make", "mode"),
    [
        (Unordered, "broadcast"),
        (Fifo, "unicast"),
        (RST, "unicast"),
        (CBCAST, "broadcast"),
        (RSTColumnOnly, "unicast"),
        (CBCASTNoOneGreater, "broadcast"),
        (CBCASTSenderOnly, "broadcast"),
    ],
)
def test_fast_checkers_equal_the_pairwise_definitions_on_simulator_runs(
    make: type, mode: str
) -> None:
    found = 0
    for seed in range(6):
        sim = Simulation(
            [make(p, 4) for p in range(4)],
            NetworkModel(delay=(1.0, 10.0), duplicate=0.2 if seed % 2 else 0.0),
            seed=seed,
            run=f"s{seed}",
        )
        random_workload(sim, 25, mode=mode, seed=seed)
        with contextlib.suppress(RemoteError):
            sim.run()
        for run, events in by_run(sim.trace).items():
            for prop, fast in FAST.items():
                want = ORACLES[prop](events, run)
                assert fast(events, run) == want, prop
                found += len(want)
    if make in (Unordered, CBCASTSenderOnly):
        assert found  # the comparison saw violations, not only clean runs
