"""A Hypothesis harness for replicated objects: Hypothesis chooses the calls, the schedule
and the faults; the history checker and the replicas' states judge the run.

A ``ReplicaScenario`` is a group of ``members`` processes (view 1) plus ``spares`` idle
slots, replicas of one object over ``protocol``, a list of calls and a list of
choices. Replaying it (``replay_replicas``) drives a ``SimGroup`` in adversarial mode:
at each step the enabled events are "make the next call", "packet k arrives" (or "is
duplicated"), "P's timer fires", "P suspects Q" where P's modelled failure detector has
cause (Q crashed, or a partition cuts them apart) and, while the budgets last, "P
crashes" (crash-stop), "P falsely suspects Q", "P is cut off" (a partition that heals
when the choices run out) and "a process joins" in a crashed or idle slot (a new
incarnation, which gets the state by transfer, once no live member's view holds the
slot). Choice c picks a kind of event (c mod the number of kinds enabled), then one
event of that kind. When the choices run out the network drains oldest first, owed
suspicions are applied and timers fire until nothing is left.

``run_problems`` checks a run: the history (applied sequences prefixes of one
sequence, nothing applied twice, results equal to a sequential replay of that
sequence, nothing acknowledged lost), by default as a group without safe delivery
promises it (``check_history(safe=False)``: only what a replica alive at the end
acknowledged), the replicas' states equal at quiescence, every call made at a
survivor answered, and the survivors in one view. ``lock_problems`` adds the lock's:
never two current members told they hold one lock, and no lock left to a process
that is no longer a member.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from mailroom.core.actions import View, ViewChange
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message
from mailroom.replicated.history import Row, check_history
from mailroom.replicated.lock import ReplLockManager
from mailroom.replicated.replica import Members, Outcome, Replica
from mailroom.replicated.simhost import EndpointFactory, SimCall, SimGroup, group_factory
from mailroom.sim import view_of

#: A call: (method, JSON arguments).
CallSpec = tuple[str, tuple[Any, ...]]
FAULTS = ("crash", "suspect", "partition")


@attrs.frozen
class ReplicaCall:
    """Process ``pid`` calls ``method(*args)`` (an ordered read with ``ordered``);
    ``with_next``: in one batch (one group message) with the next call, if that is a
    call by the same process too (as ``AsyncReplica`` sends the calls of one turn)."""

    pid: int
    method: str
    args: tuple[Any, ...]
    ordered: bool = False
    with_next: bool = False

    def describe(self) -> str:
        kind = "reads (ordered)" if self.ordered else "calls"
        return f"P{self.pid} {kind} {self.method}{self.args!r}"


@attrs.frozen
class ReplicaScenario:
    """``members`` founders and ``spares`` idle slots; ``faults`` is the budget of crashes,
    false suspicions and partitions (kinds in ``kinds``), ``joins`` that of joins."""

    members: int
    spares: int
    protocol: str
    calls: tuple[ReplicaCall, ...]
    choices: tuple[int, ...]
    faults: int = 1
    kinds: frozenset[str] = frozenset(FAULTS)
    joins: int = 1

    @property
    def n(self) -> int:
        return self.members + self.spares


@st.composite
def replica_scenarios(
    draw: st.DrawFn,
    calls: st.SearchStrategy[CallSpec],
    *,
    reads: st.SearchStrategy[CallSpec] | None = None,
    protocols: Sequence[str] = ("sequencer", "skeen", "lamport"),
    members: tuple[int, int] = (3, 4),
    spares: int = 1,
    max_calls: int = 8,
    max_choices: int = 80,
    kinds: Sequence[str] = FAULTS,
    joins: bool = True,
) -> ReplicaScenario:
    """Scenarios whose calls are drawn from ``calls`` (and ordered reads from ``reads``)."""
    protocol = draw(st.sampled_from(list(protocols)))
    size = draw(st.integers(*members))
    made = []
    for _ in range(draw(st.integers(1, max_calls))):
        pid = draw(st.integers(0, size + spares - 1))
        ordered = reads is not None and draw(st.booleans())
        method, args = draw(reads if ordered and reads is not None else calls)
        made.append(ReplicaCall(pid, method, tuple(args), ordered, draw(st.booleans())))
    faults = draw(st.integers(0, (size - 1) // 2)) if kinds else 0
    length = draw(st.integers(0, max_choices))
    choices = draw(st.lists(st.integers(0, 255), min_size=length, max_size=length))
    count = draw(st.integers(0, 2)) if joins else 0
    return ReplicaScenario(
        size, spares, protocol, tuple(made), tuple(choices), faults, frozenset(kinds), count
    )


@attrs.frozen
class ReplicaRun:
    """A replayed scenario: the group left behind, its history and the steps taken."""

    scenario: ReplicaScenario
    group: SimGroup
    #: the history of every replica, with each survivor's end row
    rows: tuple[Row, ...] = ()
    steps: tuple[str, ...] = ()
    #: per scenario call, what it became (None: skipped, its process was not a member)
    calls: tuple[SimCall | None, ...] = ()
    #: what happened, for coverage: crash, exclusion, false suspicion, partition, join,
    #: batch (several calls in one message)
    notes: frozenset[str] = frozenset()

    def describe(self) -> str:
        return "\n".join(f"{i:3d}. {s}" for i, s in enumerate(self.steps, 1))


class _Driver:
    """One replay: the group, the modelled failure detectors and the step log."""

    def __init__(self, scenario: ReplicaScenario, group: SimGroup) -> None:
        self.s = scenario
        self.g = group
        self.sim = group.sim
        self.cause: dict[int, set[int]] = defaultdict(set)
        self.done: set[tuple[int, int, int]] = set()
        self.idle = set(range(scenario.members, scenario.n))
        self.cut: list[int] = []
        self.steps: list[str] = []
        self.notes: set[str] = set()
        self.calls: list[SimCall | None] = []
        self.budget = scenario.faults
        self.joins = scenario.joins
        self.excluded = 0
        group.on_view = self.on_view

    def on_view(self, pid: int, change: ViewChange) -> None:
        """A detector has no cause against the members of a view installed since."""
        self.cause[pid] &= set(change.view.members)

    def up(self) -> list[int]:
        return [q for q in range(self.s.n) if q not in self.sim.stopped and q not in self.idle]

    def owed(self) -> list[tuple[int, int]]:
        """(P, Q): P's detector has cause against Q, a member of P's view."""
        for q, _ in self.sim.excluded[self.excluded :]:
            self.cause[q].clear()  # an excluded process starts afresh
        self.excluded = len(self.sim.excluded)
        out = []
        for p in self.up():
            view = view_of(self.sim.endpoints[p])
            if view is None:
                continue
            self.cause[p] |= {q for q in view.members if q in self.sim.stopped}
            out += [
                (p, q)
                for q in sorted(self.cause[p])
                if q in view.members and (p, q, view.id) not in self.done
            ]
        return out

    def free(self) -> list[int]:
        """Slots a new process may join at: idle, or crashed and out of every live view
        (a process restarted before the group noticed its crash is not drawn)."""
        seen = {q for p in self.up() if (v := view_of(self.sim.endpoints[p])) for q in v.members}
        return sorted((self.sim.stopped | self.idle) - seen)

    def events(self) -> list[tuple[str, Any]]:
        events: list[tuple[str, Any]] = []
        if len(self.calls) < len(self.s.calls):
            events.append(("call", len(self.calls)))
        packets = self.sim.packets()
        events += [("arrive", p.id) for p in packets] + [("duplicate", p.id) for p in packets]
        up = self.up()
        events += [("timer", q) for q in up if self.sim.endpoints[q].next_deadline() is not None]
        events += [("suspect", pq) for pq in self.owed()]
        if self.budget > 0:
            kinds = self.s.kinds
            if "crash" in kinds:
                events += [("crash", q) for q in up if self.g.replicas[q] is not None]
            if "suspect" in kinds:
                events += [("false", (p, q)) for p in up for q in self.g.members() if q != p]
            if "partition" in kinds and not self.cut:
                events += [("partition", q) for q in up]
        if self.joins > 0 and self.g.members():
            events += [("join", q) for q in self.free()]
        return events

    def act(self, kind: str, arg: Any) -> None:
        if kind == "call":  # with the calls in one batch with it
            self.call(self.s.calls[arg])
        elif kind == "arrive":
            self.sim.arrive(arg)
        elif kind == "duplicate":
            self.sim.duplicate(arg)
        elif kind == "timer":
            self.sim.fire(arg)
        elif kind in ("suspect", "false"):
            self.suspect(*arg, false=kind == "false")
        elif kind == "crash":
            self.crash(arg)
        elif kind == "partition":
            self.partition(arg)
        else:
            self.join(arg)
        self.steps.append(f"{kind} {arg}")

    def batch(self) -> list[ReplicaCall]:
        """The next scenario call, with those that go in one batch with it."""
        first = len(self.calls)
        run = [self.s.calls[first]]
        while run[-1].with_next and not run[-1].ordered and first + len(run) < len(self.s.calls):
            nxt = self.s.calls[first + len(run)]
            if nxt.pid != run[0].pid or nxt.ordered:
                break
            run.append(nxt)
        return run

    def call(self, c: ReplicaCall) -> None:
        replica = self.g.replicas[c.pid]
        if replica is None or replica.view is None:
            self.calls.append(None)
            return
        run = self.batch()
        if len(run) > 1:
            self.notes.add("batch")
            try:
                self.calls += self.g.call_many(c.pid, [(x.method, *x.args) for x in run])
            except LocalError as exc:  # one of them refused: none is sent
                self.calls += [None] * len(run)
                self.steps.append(f"a batch of {len(run)} refused: {exc}")
            return
        issue = self.g.ordered if c.ordered else self.g.call
        try:
            self.calls.append(issue(c.pid, c.method, *c.args))
        except LocalError as exc:  # a call the object refuses up front (bad arguments)
            self.calls.append(None)
            self.steps.append(f"{c.describe()} refused: {exc}")

    def suspect(self, p: int, q: int, *, false: bool) -> None:
        view = view_of(self.sim.endpoints[p])
        if false:
            self.budget -= 1
            self.notes.add("false suspicion")
        if view is not None:
            self.done.add((p, q, view.id))
            self.g.suspect(p, q)

    def crash(self, q: int) -> None:
        self.budget -= 1
        self.notes.add("crash")
        self.g.crash(q)
        for p in range(self.s.n):
            self.cause[p].add(q)

    def partition(self, q: int) -> None:
        self.budget -= 1
        self.notes.add("partition")
        others = [p for p in range(self.s.n) if p != q]
        self.g.partition([[q], others])
        self.cut.append(q)
        self.cause[q].update(others)
        for p in others:
            self.cause[p].add(q)

    def join(self, q: int) -> None:
        self.joins -= 1
        self.notes.add("join")
        self.idle.discard(q)
        for p in range(self.s.n):
            self.cause[p].discard(q)  # the detectors see the new incarnation alive
        self.g.join(q)

    def drain(self, max_steps: int) -> None:
        for _ in range(max_steps):
            if len(self.calls) < len(self.s.calls):
                self.act("call", len(self.calls))
                continue
            if self.sim.in_flight:
                self.act("arrive", min(self.sim.in_flight))
                continue
            owed = self.owed()
            if owed:
                self.act("suspect", owed[0])
                continue
            timed = [
                (d, q)
                for q in self.up()
                if (d := self.sim.endpoints[q].next_deadline()) is not None
            ]
            if not timed:
                return
            self.act("timer", min(timed)[1])
        raise LocalError(f"the run did not settle within {max_steps} steps")


def _pick(events: list[tuple[str, Any]], choice: int) -> tuple[str, Any]:
    """Choice c picks a kind of event (c mod the kinds enabled), then one of that kind:
    so a call or a crash is as likely as an arrival, however many packets fly."""
    kinds = list(dict.fromkeys(kind for kind, _ in events))
    kind = kinds[choice % len(kinds)]
    of_kind = [e for e in events if e[0] == kind]
    return of_kind[(choice // len(kinds)) % len(of_kind)]


def replay_replicas(
    scenario: ReplicaScenario,
    factory: Callable[[], object],
    *,
    endpoint: EndpointFactory | None = None,
    replica: Callable[..., Replica] = Replica,
    max_steps: int = 3000,
) -> ReplicaRun:
    """Run ``scenario`` with replicas of ``factory()`` (``endpoint`` and ``replica`` make
    the Group endpoints and the replicas: the known-buggy variants replace them)."""
    group = SimGroup(
        factory,
        scenario.n,
        members=range(scenario.members),
        endpoint=endpoint or group_factory(scenario.protocol),
        replica=replica,
        adversarial=True,
    )
    d = _Driver(scenario, group)
    for choice in scenario.choices:
        events = d.events()
        if not events:
            break
        d.act(*_pick(events, choice))
    if d.cut:
        group.sim.partitions = []
        d.steps.append("the partition heals")
    d.drain(max_steps)
    rows = group.end()
    if any(r["row"] == "out" for r in rows):
        d.notes.add("exclusion")
    return ReplicaRun(
        scenario, group, tuple(rows), tuple(d.steps), tuple(d.calls), frozenset(d.notes)
    )


def run_problems(
    run: ReplicaRun, factory: Callable[[], object], *, safe: bool = False
) -> list[str]:
    """Everything a run must satisfy (see the module docstring), as sentences."""
    report = check_history(run.rows, factory, safe=safe)
    found = [p.explain() for p in report.problems]
    g = run.group
    live = g.live()
    views = {view_of(g.sim.endpoints[p]) for p in live}
    expected = [p for p, r in enumerate(g.replicas) if r is not None]
    if len(views) != 1 or live != expected:
        found.append(f"[settled] live replicas {expected}, members {live} in views {views}")
    states = g.states()
    if len({repr(s) for s in states.values()}) > 1:
        found.append(f"[equal] the replicas differ at quiescence: {states}")
    for call in run.calls:
        if call is None or call.done:
            continue
        replica = g.replicas[call.pid]
        if not call.lost and replica is not None and replica.view is not None:
            found.append(f"[answered] {call.method} ({call.id}) at live P{call.pid} never applied")
    return found


def lock_problems(run: ReplicaRun) -> list[str]:
    """The lock manager's promises: no two current members told they hold one lock at
    one point of the order, and no lock left to a process that is not a member."""
    found = _two_holders(run.rows)
    g = run.group
    for pid in g.live():
        for name, (holder, inc, _) in g.read(pid, "held").items():
            other = g.replicas[holder]
            if other is None or other.view is None or other.incarnation != inc:
                found.append(f"[lock] P{pid} leaves {name!r} to P{holder}.{inc}, not a member")
    return found


def _two_holders(rows: Sequence[Row]) -> list[str]:
    """Walk the one applied sequence with its views: a member told "you hold L" keeps
    believing it until told it released L or until it is no longer a current member."""
    payloads = {tuple(r["op"]): r["payload"] for r in rows if r["row"] == "call"}
    told = {tuple(r["op"]): r.get("value") for r in rows if r["row"] == "result"}
    ends = {(r["replica"], r["inc"]) for r in rows if r["row"] == "end"}
    order: dict[int, tuple[int, ...]] = {}
    for alive in (True, False):  # the survivors' sequence first: others may diverge at the end
        for r in rows:
            if r["row"] == "apply" and ((r["replica"], r["inc"]) in ends) == alive:
                order.setdefault(r["index"], tuple(r["op"]))
    views = sorted(
        {(r["after"], r["view"], tuple(r["members"])) for r in rows if r["row"] == "view"}
    )
    first = next(r for r in rows if r["row"] == "start" and r["applied"] == 0)
    members = Members(View(first["view"], tuple(first["members"])), {})
    believers: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    found = []
    for k in range(len(order)):
        if k not in order:
            break
        while views and views[0][0] <= k:
            _, vid, pids = views.pop(0)
            members = Members(View(vid, pids), members.incarnations)
        op = order[k]
        kind, inc, method, args = (payloads[op] + [None, None])[:4]
        if inc > members.incarnations.get(op[0], 0):
            members = Members(members.view, {**members.incarnations, op[0]: inc})
        for name in believers:
            believers[name] = [b for b in believers[name] if members.current(b[0], b[1])]
        if kind != "c" or method not in ("acquire", "release") or told.get(op) is not True:
            continue
        holder = (op[0], inc, args[1] if len(args) > 1 else "")
        if method == "release":
            believers[args[0]] = [b for b in believers[args[0]] if b != holder]
        elif holder not in believers[args[0]]:
            believers[args[0]].append(holder)
            if len(believers[args[0]]) > 1:
                found.append(f"[lock] {args[0]!r} held by {believers[args[0]]} at #{k}")
    return found


# -- known-buggy variants: the properties must catch each one --------------------------------
#: Replicas over causal (not total) order apply concurrent operations as they arrive.
arrival_order: EndpointFactory = group_factory("cbcast")


class ForgetfulLock(ReplLockManager):
    """Ignores view changes: a crashed holder keeps its locks for ever."""

    def on_view(self, members: Members) -> None:
        return None


class EagerLock(ReplLockManager):
    """Releases every lock at every view change, live holders' too."""

    def on_view(self, members: Members) -> None:
        self.locks.clear()


class NoRollback(Replica):
    """Leaves a raising method's half-done changes in place."""

    def rebuild(self) -> None:
        return None


class ReversedBatches(Replica):
    """Applies the operations of another member's batch in reverse order (the caller
    applies them in order): the batch's order is not the same everywhere."""

    def deliver(self, message: Message) -> list[Outcome]:
        payload = message.payload
        if type(payload) is str and message.id.origin != self.pid:
            try:
                ops = json.loads(payload)
            except ValueError:
                ops = None
            if type(ops) is list:
                message = Message(message.id, message.sender, json.dumps(ops[::-1]))
        return super().deliver(message)


__all__ = [
    "EagerLock",
    "ForgetfulLock",
    "NoRollback",
    "ReplicaCall",
    "ReplicaRun",
    "ReplicaScenario",
    "ReversedBatches",
    "arrival_order",
    "lock_problems",
    "replay_replicas",
    "replica_scenarios",
    "run_problems",
]
