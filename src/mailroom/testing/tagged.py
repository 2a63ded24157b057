"""Checks for tagged causal broadcast over a finished simulation (docs/tagged-causal.md).

Happens-before is computed from the trace's send and deliver events
(``send_clocks``), never from the endpoints' own clocks, so these checks judge
the tags instead of trusting them.

- tags: ``m1.tag < m2.tag`` exactly when send(m1) happened before send(m2), and
  every process saw the same tag for a message;
- stability: a message reported stable at P_i had been delivered at every
  process by then, and every message P_i delivers afterwards is in its causal
  future; each process's reports follow its delivery order;
- all stable: every message a process delivered was reported stable there
  (expected once a fair network has drained).
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId, TaggedMessage
from mailroom.sim.simulation import Simulation
from mailroom.trace.checkers import Violation, happened_before, send_clocks


def delivered_tags(sim: Simulation) -> dict[MessageId, VectorClock]:
    """The tag of every delivered tagged message (the first one seen)."""
    tags: dict[MessageId, VectorClock] = {}
    for messages in sim.delivered:
        for m in messages:
            if isinstance(m, TaggedMessage):
                tags.setdefault(m.id, m.tag)
    return tags


def tag_violations(sim: Simulation) -> list[Violation]:
    """Pairs whose tags over- or under-order them, and messages with two tags."""
    found: list[Violation] = []
    run = sim.run_name
    tags = delivered_tags(sim)
    for pid, messages in enumerate(sim.delivered):
        for m in messages:
            if isinstance(m, TaggedMessage) and m.tag != tags[m.id]:
                reason = f"P{pid} got {m.id} with tag {m.tag}, another process {tags[m.id]}"
                found.append(Violation("tags", run, (pid,), (m.id,), (), reason))
    clocks = send_clocks(sim.trace)
    known = sorted(m for m in tags if m in clocks)
    for a, b in combinations(known, 2):
        for m1, m2 in ((a, b), (b, a)):
            hb = happened_before(clocks[m1], clocks[m2])
            lt = tags[m1] < tags[m2]
            if hb != lt:
                what = "over-orders" if lt else "under-orders"
                reason = (
                    f"tags {what} {m1} {tags[m1]} and {m2} {tags[m2]}: send({m1}) "
                    f"{'did not happen' if lt else 'happened'} before send({m2})"
                )
                found.append(Violation("tags", run, (), (m1, m2), (), reason))
    return found


def stability_violations(sim: Simulation) -> list[Violation]:
    """Stable reports that came too early or out of delivery order."""
    found: list[Violation] = []
    run = sim.run_name
    clocks = send_clocks(sim.trace)
    first_delivery: dict[tuple[int, MessageId], int] = {}
    deliveries: dict[int, list[tuple[int, MessageId]]] = defaultdict(list)
    for index, e in enumerate(sim.trace):
        if e.kind == "deliver":
            first_delivery.setdefault((e.process, e.message), index)
            deliveries[e.process].append((index, e.message))
    for pid, m, mark in sim.stable_log:
        missing = [q for q in range(sim.n) if first_delivery.get((q, m), mark) >= mark]
        if missing:
            reason = f"P{pid} reported {m} stable before P{missing[0]} delivered it"
            found.append(Violation("stability", run, (pid,), (m,), (mark,), reason))
            continue
        for index, later in deliveries[pid]:
            if index >= mark and later != m and not happened_before(clocks[m], clocks[later]):
                reason = (
                    f"P{pid} reported {m} stable, then delivered {later}, which is not "
                    f"in its causal future"
                )
                found.append(Violation("stability", run, (pid,), (m, later), (mark, index), reason))
    for pid in range(sim.n):
        order = {mid: k for k, (_, mid) in enumerate(deliveries[pid])}
        positions = [order.get(m, -1) for m in sim.stable[pid]]
        if positions != sorted(positions) or len(set(positions)) != len(positions):
            reason = f"P{pid} reported stable messages out of delivery order"
            found.append(Violation("stability", run, (pid,), tuple(sim.stable[pid]), (), reason))
    return found


def unstable_violations(sim: Simulation) -> list[Violation]:
    """Messages delivered at a process but never reported stable there."""
    found: list[Violation] = []
    for pid, messages in enumerate(sim.delivered):
        stable = set(sim.stable[pid])
        for m in messages:
            if m.id not in stable:
                reason = f"P{pid} never reported {m.id} stable"
                found.append(Violation("stability", sim.run_name, (pid,), (m.id,), (), reason))
    return found


__all__ = ["delivered_tags", "stability_violations", "tag_violations", "unstable_violations"]
