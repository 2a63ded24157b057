"""The textbook exercise: conditions C1, C2, C3 on message delivery, over a trace.

A *copy* is one message to one destination: its send ``s`` and its delivery
``r`` there (copies that were never delivered take no part). Happened-before
(``->``) is computed from send and deliver events, as the reference checkers
do; ``a < b`` means a and b are on the same process and a comes first.
For distinct copies 1 and 2:

- C1: s1 -> s2 implies not (r2 -> r1)
- C2: s1 < s2  implies not (r2 -> r1)
- C3: s1 -> s2 implies not (r2 < r1)

and, for comparison, FIFO: s1 < s2 and the same destination implies not (r2 < r1).

Each function returns the pairs that break the condition, so "holds" is "the
list is empty". ``separate(a, b, factory)`` asks Hypothesis for a run on which
condition ``a`` holds and ``b`` does not: a counterexample to "a implies b".

Breaking these conditions takes a causal chain (a process sends after it
delivered), which random workloads rarely build: about one run in a thousand
with three messages. So ``separate`` searches exhaustively: ``all_scenarios``
lists every unicast run with up to ``max_ops`` messages among ``n`` processes
(every workload, every arrival order), smallest first, so the first
counterexample is a minimal one, and "none found" is a proof for that bound.
``chain_scenarios`` is a Hypothesis strategy for the same kind of runs, larger
and at random, for property tests. Both build ordinary harness scenarios:
``replay`` runs them.

The answers (docs/lab.md): the three are equivalent. C1 implies C2 and C3
directly (s1 < s2 gives s1 -> s2; r2 < r1 gives r2 -> r1). C2 implies C1: if
s1 -> s2 through other processes, the chain leaves s1's process by some later
send s' (s1 < s') whose delivery r' comes at or before s2, so r' -> r1: the
pair (m1, m') breaks C2. C3 implies C1: the chain r2 -> r1 reaches r1's
process by some message m3 delivered at r3 < r1 and sent after r2, so
s1 -> s3: the pair (m1, m3) breaks C3. Each is strictly stronger than FIFO.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence

import attrs
from hypothesis import strategies as st

from mailroom.core.messages import MessageId
from mailroom.lab.explore import Finding
from mailroom.testing.harness import Factory, Op, Scenario, replay
from mailroom.trace.checkers import Violation, propagate_clocks
from mailroom.trace.events import Event

Clock = dict[int, int]


@attrs.frozen
class Copy:
    """Message ``message`` sent at ``send`` and delivered to ``dest`` at ``deliver``."""

    message: MessageId
    dest: int
    send: Event
    deliver: Event


def event_clocks(events: Sequence[Event]) -> dict[tuple[int, int], Clock]:
    """Vector time of every send and deliver event, keyed by (process, seq)."""
    hist: dict[int, list[Event]] = defaultdict(list)
    for e in events:
        hist[e.process].append(e)
    for h in hist.values():
        h.sort(key=lambda e: e.seq)
    sent = {e.message for e in events if e.kind == "send"}
    stamped = propagate_clocks(hist, lambda e: e.kind, lambda e: e.message, sent)
    return {(e.process, e.seq): vc for e, vc in stamped if vc is not None}


def copies(events: Sequence[Event]) -> list[Copy]:
    """Every delivered copy, in trace order of delivery."""
    sends = {e.message: e for e in events if e.kind == "send"}
    seen: set[tuple[MessageId, int]] = set()
    out = []
    for e in events:
        if e.kind == "deliver" and e.message in sends and (e.message, e.process) not in seen:
            seen.add((e.message, e.process))
            out.append(Copy(e.message, e.process, sends[e.message], e))
    return out


Relation = Callable[[Event, Event], bool]


def _relations(events: Sequence[Event]) -> tuple[Relation, Relation]:
    clocks = event_clocks(events)

    def hb(a: Event, b: Event) -> bool:
        ca, cb = clocks.get((a.process, a.seq)), clocks.get((b.process, b.seq))
        if ca is None or cb is None or ca == cb:
            return False
        return all(v <= cb.get(k, 0) for k, v in ca.items())

    def local(a: Event, b: Event) -> bool:
        return a.process == b.process and a.seq < b.seq

    return hb, local


#: Each condition as (relation between sends, forbidden relation between deliveries).
SYMBOLS = {"C1": ("->", "->"), "C2": ("<", "->"), "C3": ("->", "<"), "FIFO": ("<", "<")}


def _pairs(events: Sequence[Event], name: str) -> list[tuple[Copy, Copy]]:
    pre, post = SYMBOLS[name]
    hb, local = _relations(events)
    rel = {"->": hb, "<": local}
    before, after = rel[pre], rel[post]
    cs = copies(events)
    return [
        (c1, c2)
        for c1 in cs
        for c2 in cs
        if c1 != c2
        and before(c1.send, c2.send)
        and after(c2.deliver, c1.deliver)
        and (name != "FIFO" or c1.dest == c2.dest)
    ]


def c1(events: Sequence[Event]) -> list[tuple[Copy, Copy]]:
    """Pairs breaking C1: s1 -> s2 and r2 -> r1."""
    return _pairs(events, "C1")


def c2(events: Sequence[Event]) -> list[tuple[Copy, Copy]]:
    """Pairs breaking C2: s1 < s2 and r2 -> r1."""
    return _pairs(events, "C2")


def c3(events: Sequence[Event]) -> list[tuple[Copy, Copy]]:
    """Pairs breaking C3: s1 -> s2 and r2 < r1."""
    return _pairs(events, "C3")


def fifo(events: Sequence[Event]) -> list[tuple[Copy, Copy]]:
    """Pairs breaking FIFO: s1 < s2, the same destination, and r2 < r1."""
    return _pairs(events, "FIFO")


CONDITIONS: dict[str, Callable[[Sequence[Event]], list[tuple[Copy, Copy]]]] = {
    "C1": c1,
    "C2": c2,
    "C3": c3,
    "FIFO": fifo,
}


def as_violations(name: str, pairs: Sequence[tuple[Copy, Copy]], run: str) -> list[Violation]:
    """Pairs as Violations, so that diagrams highlight them."""
    return [
        Violation(
            name,
            run,
            tuple(sorted({a.dest, b.dest})),
            (a.message, b.message),
            (a.deliver.seq, b.deliver.seq),
            f"s({a.message}) {SYMBOLS[name][0]} s({b.message}) but "
            f"r({b.message}) at P{b.dest} {SYMBOLS[name][1]} r({a.message}) at P{a.dest}",
        )
        for a, b in pairs
    ]


@st.composite
def chain_scenarios(
    draw: st.DrawFn, *, n: int = 3, max_ops: int = 5, self_sends: bool = False
) -> Scenario:
    """Unicast scenarios rich in causal chains, for protocols that put exactly
    one packet on the wire per send (Unordered, Fifo, RST and the lab's variants)."""
    total = draw(st.integers(1, max_ops))
    ops: list[Op] = []
    choices: list[int] = []
    flying: list[int] = []  # destinations of in-flight packets, oldest first
    last = 0
    while len(ops) < total or flying:
        more = len(ops) < total
        if flying and (not more or draw(st.booleans())):
            j = draw(st.integers(0, len(flying) - 1))
            last = flying.pop(j)
            choices.append(j + 1 if more else j)  # while ops remain, event 0 issues one
            continue
        pid = draw(st.sampled_from([last, *range(n)]))
        targets = [q for q in range(n) if self_sends or q != pid or n == 1]
        to = draw(st.sampled_from(targets))
        ops.append(Op(pid, to, f"m{len(ops)}"))
        choices.append(0)
        flying.append(to)
    return Scenario(n, tuple(ops), tuple(choices))


def all_scenarios(n: int = 3, max_ops: int = 3, *, self_sends: bool = False) -> Iterator[Scenario]:
    """Every unicast scenario with 1..``max_ops`` sends among ``n`` processes, fewest first.

    A scenario is a sequence of decisions: a process sends to another, or one
    of the packets in flight arrives (for protocols with one packet per send).
    """
    channels = [(p, q) for p in range(n) for q in range(n) if self_sends or p != q or n == 1]

    def extend(
        total: int, ops: list[Op], choices: list[int], flying: list[int]
    ) -> Iterator[Scenario]:
        if len(ops) == total and not flying:
            yield Scenario(n, tuple(ops), tuple(choices))
            return
        more = len(ops) < total
        for j in range(len(flying)):
            rest = flying[:j] + flying[j + 1 :]
            yield from extend(total, ops, [*choices, j + 1 if more else j], rest)
        if more:
            for p, q in channels:
                op = Op(p, q, f"m{len(ops)}")
                yield from extend(total, [*ops, op], [*choices, 0], [*flying, q])

    for total in range(1, max_ops + 1):
        yield from extend(total, [], [], [])


def separate(
    holds: str,
    fails: str,
    factory: Factory,
    *,
    n: int = 3,
    max_ops: int = 3,
    self_sends: bool = False,
) -> Finding | None:
    """The smallest run on which condition ``holds`` holds and ``fails`` fails, or None.

    The search is exhaustive up to ``max_ops`` messages among ``n`` processes, so
    None proves that within that bound ``holds`` implies ``fails``.
    """
    yes, no = CONDITIONS[holds], CONDITIONS[fails]
    for s in all_scenarios(n, max_ops, self_sends=self_sends):
        run = replay(factory, s)
        if not yes(run.trace):
            broken = no(run.trace)
            if broken:
                return Finding(run, tuple(as_violations(fails, broken, run.sim.run_name)))
    return None
