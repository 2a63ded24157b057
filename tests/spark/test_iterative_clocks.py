"""Iterative clock propagation (DataFrame rounds) gives the sequential pass's clocks."""

from __future__ import annotations

from typing import Any

import attrs
from spark_traces import corpus

from mailroom.core.messages import MessageId
from mailroom.spark import events_frame, with_clocks
from mailroom.trace.events import Event


def _key(r: Any) -> tuple[Any, ...]:
    return (r.run, r.process, r.seq, r.kind, r.mo, r.ms, tuple(sorted((r.vc or {}).items())))


def _chain(hops: int, n: int = 3) -> list[Event]:
    """A message relay: P0 sends to P1, which delivers and sends on to P2, and so on."""
    seq = [0] * n
    out = []
    for h in range(hops):
        p, q = h % n, (h + 1) % n
        m = MessageId(p, h)
        seq[p] += 1
        out.append(Event("chain", p, seq[p], "send", m, p, (q,)))
        seq[q] += 1
        out.append(Event("chain", q, seq[q], "deliver", m, p, (q,)))
    return out


def test_iterative_propagation_equals_the_sequential_pass(spark: Any) -> None:
    # every protocol, n in 2..4, duplicating networks and mutated runs, clocks stripped
    events = [attrs.evolve(e, vc=None) for run in corpus(5) for e in run] + _chain(7, 8)
    app = events_frame(spark, events).events.where("kind IN ('send', 'deliver')")
    rounds: list[int] = []
    sequential = with_clocks(spark, app, "compute", "sequential")
    iterative = with_clocks(spark, app, "compute", "iterative", rounds)
    want = sorted(map(_key, sequential.collect()))
    assert sorted(map(_key, iterative.collect())) == want
    assert all(k[-1] for k in want)  # every event got a clock
    assert rounds == [7]  # the relay: 6 hops from the first send to the last, plus 1
