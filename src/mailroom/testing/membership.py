"""A Hypothesis harness for group membership: Hypothesis chooses the schedule and the faults.

A ``GroupScenario`` is a group of ``n`` processes (all members of view 1) running
``protocol`` inside ``Group`` endpoints, a workload and a list of choices. Replaying
it runs the simulator in adversarial mode; at each step the enabled events are
"issue the next operation", "packet k arrives" (or "is duplicated"), "P's timer
fires", and, while the fault budget lasts, "P crashes" (crash-stop: it never comes
back), "P falsely suspects live member Q", "P leaves" and "P is cut off" (a partition
isolating P until the choices run out, when it heals). The test plays the hosts' failure
detector: "P suspects Q" is enabled for every Q that P's detector has cause to
suspect (Q crashed, or a partition cut them apart) while Q is in P's view, and every
such suspicion is applied once the choices run out. Choice c picks event c mod (the
number of events). When the choices run out the network drains oldest-first, the
remaining suspicions are applied and timers fire until nothing is left to do.

With ``joiners`` the last processes start outside the group and join it when their
timer fires. With ``hold_state`` the network holds each state transfer until its
receiver is frozen in a further flush, when its arrival becomes one of the events (so
Hypothesis chooses whether it comes before the joiner promises, between its promise and
the Commit, or after); a held state that is never chosen arrives after every other
packet. In that mode "every packet in flight arrives" is an event too, each process
issues its own operations in order once it can send (a joiner's while it waits for its
state), and at least one fault is drawn when the budget allows.

The budget (crashes + false suspicions + leaves + partitions) is below half the group, so a
majority always survives and the primary partition can go on (a minority blocks by
design). ``false_suspicions`` adds a budget spent on false suspicions only: they kill
nobody, but the exclusions they cause shrink the views, so the ``c`` crashes must stay
below half of the smallest view that can still hold them all (n - f > 2c, with f the
false suspicions both budgets allow), or a live minority could rightly be left
blocked. ``view_problems`` checks the run: the view properties (view agreement,
self-inclusion, same-view delivery, virtual synchrony), the protocol's order
(total compared only between processes that left a view into the same next view),
integrity, liveness for membership runs and that the survivors' states converged;
for groups with safe delivery (``Group(..., safe=True)``, made by
``variant_factory(Group, safe=True)``), uniform agreement too.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import attrs
from hypothesis import strategies as st

from mailroom.core.actions import Action, Deliver, Transmit, View, ViewChange
from mailroom.core.endpoint import capabilities
from mailroom.core.errors import RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.registry import entry
from mailroom.protocols.membership.group import Group
from mailroom.protocols.membership.packets import StateTransfer
from mailroom.sim.simulation import InFlight, Simulation, view_of
from mailroom.trace.checkers import (
    Violation,
    check,
    check_same_view,
    check_self_inclusion,
    check_view_agreement,
)
from mailroom.trace.events import Event

#: Makes the Group of process ``pid`` of ``n`` (initial view ``members``) over ``protocol``.
GroupFactory = Callable[[int, int, str, tuple[int, ...]], Any]

#: The view properties (checked here until the reference checkers have them).
VIEW_PROPERTIES = ("view_agreement", "self_inclusion", "same_view", "virtual_synchrony")


def make_group(pid: int, n: int, protocol: str, members: tuple[int, ...]) -> Group:
    """The default factory: a plain Group over ``protocol``, a member of the initial view
    ``members``, or, if ``pid`` is not among them, a joiner that asks them to let it in."""
    if pid in members:
        return Group(pid, n, protocol, members=members)
    return Group(pid, n, protocol, contacts=members)


@attrs.frozen
class GroupOp:
    """Process ``pid`` broadcasts ``payload`` (``to`` None) or sends it to ``to``."""

    pid: int
    to: int | None
    payload: str

    def describe(self) -> str:
        if self.to is None:
            return f"P{self.pid} broadcasts {self.payload!r}"
        return f"P{self.pid} sends {self.payload!r} to P{self.to}"


@attrs.frozen
class GroupScenario:
    """A membership run for Hypothesis to choose: ``faults`` is the fault budget and
    ``kinds`` the faults it may be spent on ("crash", "suspect", "partition", "leave"); with
    ``joiner`` the last of the ``n`` processes joins the running group (its first
    Join goes out when its timer first fires, which Hypothesis chooses), with
    ``joiners`` the last that many do. With ``hold_state`` the network holds each state
    transfer until Hypothesis chooses its arrival ("the state for P arrives"), so it
    may come before, during or after further view changes."""

    n: int
    protocol: str
    ops: tuple[GroupOp, ...]
    choices: tuple[int, ...]
    faults: int = 1
    kinds: frozenset[str] = frozenset({"crash"})
    duplicate: bool = True
    #: the last process starts outside the group and joins it (state transfer)
    joiner: bool = False
    #: the last ``joiners`` processes start outside the group and join it
    joiners: int = 0
    hold_state: bool = False
    #: a further budget spent on false suspicions only (see the module's docstring)
    false_suspicions: int = 0

    @property
    def joining(self) -> int:
        """How many of the processes start outside the group and join it."""
        return max(self.joiners, 1 if self.joiner else 0)


@st.composite
def group_scenarios(
    draw: st.DrawFn,
    protocol: str | Sequence[str] = "cbcast",
    *,
    n: int | tuple[int, int] = (3, 5),
    max_ops: int = 6,
    max_choices: int = 60,
    kinds: Sequence[str] = ("crash", "suspect"),
    duplicate: bool = True,
    joiner: bool = False,
    joiners: int | tuple[int, int] = 0,
    hold_state: bool = False,
    false_suspicions: int = 0,
) -> GroupScenario:
    """Hypothesis strategy for membership scenarios over ``protocol`` (or one of several);
    ``joiners`` processes (or a number in that range) join the running group; up to
    ``false_suspicions`` false suspicions beyond the fault budget (fewer if the budget
    may be spent on crashes: those must stay below half of the smallest view)."""
    name = protocol if isinstance(protocol, str) else draw(st.sampled_from(list(protocol)))
    size = n if isinstance(n, int) else draw(st.integers(*n))
    outside = joiners if isinstance(joiners, int) else draw(st.integers(*joiners))
    unicast = entry(name).mode == "unicast"
    initial = size - max(outside, 1 if joiner else 0)
    ops = []
    for i in range(draw(st.integers(1, max_ops))):
        if hold_state and initial < size and draw(st.booleans()):  # a joiner's, which
            pid = draw(st.integers(initial, size - 1))  # may wait for its state
        else:
            pid = draw(st.integers(0, size - 1))
        to = draw(st.sampled_from([q for q in range(size) if q != pid])) if unicast else None
        ops.append(GroupOp(pid, to, f"m{i}"))
    most = (initial - 1) // 2  # with held states, at least one further view change
    faults = draw(st.integers(min(1 if hold_state else 0, most), most)) if kinds else 0
    falses = false_suspicions
    if set(kinds) - {"suspect"}:  # c crashes, faults - c + f false: n - faults - f > c
        falses = min(falses, max(0, size - 2 * faults - 1))
    falses = draw(st.integers(0, falses))
    length = draw(st.integers(0, max_choices))  # lists alone would stay short
    choices = draw(st.lists(st.integers(0, 255), min_size=length, max_size=length))
    return GroupScenario(
        size,
        name,
        tuple(ops),
        tuple(choices),
        faults,
        frozenset(kinds),
        duplicate,
        joiner,
        outside,
        hold_state,
        falses,
    )


@attrs.frozen
class GroupRun:
    """A replayed membership scenario.

    ``sim`` is the simulation as the run left it (trace, views, exclusions, endpoints);
    ``steps`` says what happened, one line per step; ``errors`` lists the packets a
    correct group refused and a run that did not settle (always a bug).
    """

    scenario: GroupScenario
    sim: Simulation
    steps: tuple[str, ...]
    errors: tuple[str, ...] = ()
    #: processes that stopped (crash-stop)
    crashed: frozenset[int] = frozenset()
    #: what happened, for coverage: "crash", "crash mid-flush", "coordinator crash",
    #: "coordinator crash mid-flush", "false suspicion", "rejoin", "partition", "view change",
    #: "join" (a joiner got in), "leave", "sent without the state" (a joiner issued a
    #: message while it waited for the state), "late state" (a state transfer arrived
    #: while its receiver was frozen in a further flush)
    notes: frozenset[str] = frozenset()

    @property
    def trace(self) -> list[Event]:
        return self.sim.trace

    def describe(self) -> str:
        return "\n".join(f"{i:3d}. {s}" for i, s in enumerate(self.steps, 1))

    def violations(self) -> list[Violation]:
        return view_problems(self.sim, self.scenario.protocol) + [
            Violation("error", self.sim.run_name, (), (), (), e) for e in self.errors
        ]


def _can_send(ep: Any, op: GroupOp) -> bool:
    if ep.sending_view is None:
        return False
    if op.to is None:
        return True
    view = ep.view
    return bool(ep.joined and not ep.flushing and view is not None and op.to in view.members)


class _Replay:
    """One replay of a scenario: the simulation, the failure detectors the test plays
    (whom each process has cause to suspect), the fault budget and what happened."""

    def __init__(self, scenario: GroupScenario, factory: GroupFactory) -> None:
        n = scenario.n
        self.scenario = scenario
        members = tuple(range(n - scenario.joining))
        #: P -> whom P's failure detector will suspect
        self.cause: dict[int, set[int]] = defaultdict(set)
        self.excluded_seen = 0
        self.sim = Simulation(
            [factory(pid, n, scenario.protocol, members) for pid in range(n)],
            adversarial=True,
            run=f"{scenario.protocol}-n{n}",
            on_view=self._on_view,
        )
        self.steps: list[str] = []
        self.errors: list[str] = []
        self.budget = scenario.faults
        self.falses = scenario.false_suspicions
        #: (P, Q, P's view id): suspicions applied
        self.done: set[tuple[int, int, int]] = set()
        self.cut: list[int] = []
        self.notes: set[str] = set()
        #: operations issued (or skipped); ``next_op`` is the first one left
        self.issued: set[int] = set()
        self.next_op = 0

    # -- the failure detectors the test plays --------------------------------------------------
    def _forget(self) -> None:
        """A detector has no cause against members of a view installed since, and an
        excluded process starts afresh."""
        for q, _ in self.sim.excluded[self.excluded_seen :]:
            self.cause[q].clear()
        self.excluded_seen = len(self.sim.excluded)

    def _on_view(self, sim: Simulation, pid: int, change: ViewChange) -> None:
        self._forget()
        self.cause[pid] &= set(change.view.members)

    def up(self, q: int) -> bool:
        return q not in self.sim.stopped

    def due(self) -> list[tuple[int, int]]:
        """Suspicions the modelled detectors owe: (P, Q) with Q in P's view."""
        self._forget()
        out = []
        sim = self.sim
        for p in range(self.scenario.n):
            view = view_of(sim.endpoints[p])
            if not self.up(p) or view is None:
                self.cause[p].clear()
                continue
            # a member that crashed, even one admitted after it crashed (a joiner that
            # died before its view), falls silent in this view: the detector has cause
            self.cause[p] |= {q for q in view.members if q in sim.stopped}
            for q in sorted(self.cause[p]):
                if q not in view.members:
                    self.cause[p].discard(q)
                elif (p, q, view.id) not in self.done:
                    out.append((p, q))
        return out

    # -- the events ------------------------------------------------------------------------------
    def enabled(self) -> list[tuple[str, Any]]:
        """The events Hypothesis may choose from now."""
        sim, scenario = self.sim, self.scenario
        packets = sim.packets()
        live = [q for q in range(scenario.n) if self.up(q)]
        events: list[tuple[str, Any]] = []
        events += [("op", k) for k in self._issuable()]
        held: list[tuple[str, Any]] = []
        if scenario.hold_state:  # held until the receiver is in a further flush; then
            held = [("state", p.id) for p in packets if self._frozen_for(p)]  # it's a choice
            packets = [p for p in packets if type(p.packet) is not StateTransfer]
            if packets:  # and the rest may arrive at once, so few are in flight after
                events.append(("deliver_all", None))
        events += [("arrive", p.id) for p in packets]
        if scenario.duplicate:
            events += [("duplicate", p.id) for p in packets]
        events += [("timer", q) for q in live if sim.endpoints[q].next_deadline() is not None]
        events += [("suspect", pq) for pq in self.due()]
        if self.budget > 0:
            events += self._faults(live, self.scenario.kinds)
        elif self.falses > 0:
            events += self._faults(live, {"suspect"})
        return events + held

    def _frozen_for(self, p: InFlight) -> bool:
        """``p`` is a state transfer whose receiver is frozen in a further flush."""
        receiver = self.sim.endpoints[p.dst]
        return type(p.packet) is StateTransfer and bool(getattr(receiver, "flushing", False))

    def _issuable(self) -> list[int]:
        """The operations Hypothesis may issue now: the next one; with held states, each
        process's next one, once that process can send (so a joiner may issue one while
        it waits for its state, or while it is frozen in a further flush)."""
        ops = self.scenario.ops
        if not self.scenario.hold_state:
            return [self.next_op] if self.next_op < len(ops) else []
        firsts: dict[int, int] = {}
        for k, op in enumerate(ops):
            if k not in self.issued:
                firsts.setdefault(op.pid, k)
        return [
            k
            for k in sorted(firsts.values())
            if not self.up(ops[k].pid) or _can_send(self.sim.endpoints[ops[k].pid], ops[k])
        ]

    def _faults(self, live: list[int], kinds: Collection[str]) -> list[tuple[str, Any]]:
        endpoints = self.sim.endpoints
        events: list[tuple[str, Any]] = []
        if "crash" in kinds:
            events += [("crash", q) for q in live]
        if "suspect" in kinds:
            events += [
                ("false", (p, q))
                for p in live
                for q in live
                if p != q and (view := view_of(endpoints[p])) is not None and q in view.members
            ]
        if "partition" in kinds and not self.cut:
            events += [("partition", q) for q in live]
        if "leave" in kinds:
            events += [
                ("leave", q)
                for q in live
                if getattr(endpoints[q], "sending_view", None) is not None
            ]
        return events

    def take(self, kind: str, arg: Any) -> None:
        """Apply the chosen event."""
        if kind in ("crash", "false", "leave", "partition"):
            if self.budget > 0:
                self.budget -= 1
            else:  # only false suspicions are enabled beyond the budget
                self.falses -= 1
        getattr(self, f"_{kind}")(arg)

    def _op(self, k: int) -> None:
        self.issue(self.scenario.ops[k])
        self.issued.add(k)
        while self.next_op in self.issued:
            self.next_op += 1

    def issue(self, op: GroupOp) -> None:
        sim = self.sim
        ep = sim.endpoints[op.pid]
        if not self.up(op.pid) or not _can_send(ep, op):
            self.steps.append(f"{op.describe()}: skipped (it cannot send now)")
            return
        if not getattr(ep, "joined", True):
            self.notes.add("sent without the state")  # it is queued: the joiner waits
        if op.to is None:
            mid = sim.broadcast(op.pid, op.payload)
        else:
            mid = sim.send(op.pid, op.payload, to=op.to)
        self.steps.append(f"{op.describe()} ({mid}) in view {sim.trace[-1].view}")

    def _state(self, packet_id: int) -> None:
        self._arrive(packet_id)

    def _deliver_all(self, arg: None, limit: int = 1_000) -> None:
        """Every packet in flight arrives, oldest first, but the held state transfers."""
        self.steps.append("every packet in flight arrives, oldest first (states are held):")
        for _ in range(limit):
            ready = [p for p in self.sim.packets() if type(p.packet) is not StateTransfer]
            if not ready:
                return
            self._arrive(ready[0].id)

    def _arrive(self, packet_id: int) -> None:
        p = self.sim.in_flight[packet_id]
        if self._frozen_for(p):
            self.notes.add("late state")  # the state arrives while a further flush runs
        what = f"{p.message_id}" if p.message_id is not None else type(p.packet).__name__
        name = f"packet {packet_id} ({what} P{p.src}->P{p.dst})"
        try:
            delivered = [a for a in self.sim.arrive(packet_id) if isinstance(a, Deliver)]
        except RemoteError as exc:
            self.errors.append(f"P{p.dst} rejected packet {packet_id} from P{p.src}: {exc}")
            self.steps.append(f"{name} is REJECTED: {exc}")
            return
        got = f"; P{p.dst} delivers {len(delivered)}" if delivered else ""
        self.steps.append(f"{name} arrives{got}")

    def _duplicate(self, packet_id: int) -> None:
        copy = self.sim.duplicate(packet_id)
        self.steps.append(f"packet {packet_id} is duplicated as {copy}")

    def _timer(self, q: int) -> None:
        sent = sum(isinstance(a, Transmit) for a in self.sim.fire(q))
        self.steps.append(f"P{q}'s timer fires at {self.sim.now:g}; it sends {sent} packet(s)")

    def _suspect(self, pq: tuple[int, int], why: str = "its failure detector has cause") -> None:
        p, q = pq
        view = view_of(self.sim.endpoints[p])
        assert view is not None
        self.done.add((p, q, view.id))
        try:
            self.sim.suspect(p, q)
        except RemoteError as exc:  # pragma: no cover - a correct group raises none
            self.errors.append(f"P{p} suspecting P{q}: {exc}")
        self.steps.append(f"P{p} suspects P{q} ({why})")

    def _crash(self, q: int) -> None:
        sim = self.sim
        mid_flush = " mid-flush" if getattr(sim.endpoints[q], "flushing", False) else ""
        self.notes.update({"crash", "crash" + mid_flush})
        live = [p for p in range(self.scenario.n) if self.up(p)]
        if any(getattr(sim.endpoints[p], "coordinator", None) == q for p in live):
            self.notes.update({"coordinator crash", "coordinator crash" + mid_flush})
        sim.crash(q)
        self.steps.append(f"P{q} crashes (crash-stop)")
        for p in range(self.scenario.n):
            if p != q:
                self.cause[p].add(q)

    def _false(self, pq: tuple[int, int]) -> None:
        self.notes.add("false suspicion")
        self._suspect(pq, why="FALSELY: it is alive")

    def _leave(self, q: int) -> None:
        self.notes.add("leave")
        self.sim.leave(q)
        self.steps.append(f"P{q} leaves the group")

    def _partition(self, q: int) -> None:
        others = [p for p in range(self.scenario.n) if p != q]
        self.sim.partition([[q], others], until=float("inf"))
        self.cut.append(q)
        self.notes.add("partition")
        self.steps.append(f"P{q} is cut off from the others")
        self.cause[q].update(others)
        for p in others:
            self.cause[p].add(q)

    # -- after the choices -----------------------------------------------------------------------
    def settle(self, max_steps: int) -> None:
        """Heal; then operations, packets oldest first (held states last), owed
        suspicions, timers."""
        sim = self.sim
        if self.cut:
            sim.partitions = []
            self.steps.append(f"the partition heals at {sim.now:g}")
        held = self.scenario.hold_state
        for _ in range(max_steps):
            if self.next_op < len(self.scenario.ops):
                self._op(self.next_op)
                continue
            packets = sim.packets()
            if held and any(type(p.packet) is not StateTransfer for p in packets):
                packets = [p for p in packets if type(p.packet) is not StateTransfer]
            if packets:
                self._arrive(packets[0].id)
                continue
            owed = self.due()
            if owed:
                self._suspect(owed[0])
                continue
            timed = [
                (d, q)
                for q in range(self.scenario.n)
                if self.up(q) and (d := sim.endpoints[q].next_deadline()) is not None
            ]
            if not timed:
                return
            self._timer(min(timed)[1])
        self.errors.append(f"the run did not settle within {max_steps} steps after the choices")

    def result(self) -> GroupRun:
        sim, n = self.sim, self.scenario.n
        if any(sim.views[q] and sim.views[q][-1].id >= out.view.id for q, out in sim.excluded):
            self.notes.add("rejoin")
        if any(len(v) > 1 for v in sim.views):
            self.notes.add("view change")
        if any(sim.views[q] for q in range(n - self.scenario.joining, n)):
            self.notes.add("join")
        crashed = frozenset(sim.stopped)
        return GroupRun(
            self.scenario,
            sim,
            tuple(self.steps),
            tuple(self.errors),
            crashed,
            frozenset(self.notes),
        )


def replay_group(
    scenario: GroupScenario,
    factory: GroupFactory = make_group,
    *,
    max_steps: int = 1_000,
) -> GroupRun:
    """Run ``scenario`` with Group endpoints made by ``factory``: choice c picks event
    c mod (the number of events enabled), then the run settles."""
    replay = _Replay(scenario, factory)
    for choice in scenario.choices:
        events = replay.enabled()
        if not events:
            break
        replay.take(*events[choice % len(events)])
    replay.settle(max_steps)
    return replay.result()


# -- the checks ---------------------------------------------------------------------------------
def _v(prop: str, run: str, reason: str, procs: tuple[int, ...] = ()) -> Violation:
    return Violation(prop, run, procs, (), (), reason)


def _views(trace: Sequence[Event]) -> dict[int, list[Event]]:
    out: dict[int, list[Event]] = defaultdict(list)
    for e in trace:
        if e.kind == "view":
            out[e.process].append(e)
    return out


def _delivered_in(trace: Sequence[Event]) -> dict[tuple[int, int], list[MessageId]]:
    """(process, view id) -> the messages it delivered in that view, in order."""
    out: dict[tuple[int, int], list[MessageId]] = defaultdict(list)
    for e in trace:
        if e.kind == "deliver" and e.view is not None:
            out[(e.process, e.view)].append(e.message)
    return out


def cohorts(
    trace: Sequence[Event], final: Mapping[int, int] | None = None
) -> dict[tuple[int, str], set[int]]:
    """The processes that leave view V together: (V, "next") -> those that installed V
    and then V + 1 as their next view; (V, "end") -> those that end the run in V, where
    ``final`` maps each process alive and settled at the end to the view it ends in."""
    final = final or {}
    out: dict[tuple[int, str], set[int]] = defaultdict(set)
    for p, views in _views(trace).items():
        ids = [e.message.seq for e in views]
        for a, b in itertools.pairwise(ids):
            if b == a + 1:
                out[(a, "next")].add(p)
        if ids and final.get(p) == ids[-1]:
            out[(ids[-1], "end")].add(p)
    return out


def final_views(sim: Simulation) -> dict[int, int]:
    """Each live process that holds a view and the state, and the id of that view."""
    out = {}
    for q, ep in enumerate(sim.endpoints):
        view = view_of(ep)
        if q not in sim.stopped and view is not None and getattr(ep, "joined", True):
            out[q] = view.id
    return out


def check_virtual_synchrony(
    trace: Sequence[Event], run: str = "", final: Mapping[int, int] | None = None
) -> list[Violation]:
    """Processes that install V and then V + 1 (or that both end the run alive in V)
    delivered the same set of messages in V (of those addressed to both: unicasts are
    not compared)."""
    got = _delivered_in(trace)
    dest = {e.message: e.dest for e in trace if e.kind == "send"}
    found = []
    for (vid, _), procs in sorted(cohorts(trace, final).items()):
        ps = sorted(procs)
        for p in ps[1:]:
            both = (ps[0], p)
            a = {m for m in got[(ps[0], vid)] if all(q in dest.get(m, both) for q in both)}
            b = {m for m in got[(p, vid)] if all(q in dest.get(m, both) for q in both)}
            if a != b:
                found.append(
                    _v(
                        "virtual_synchrony",
                        run,
                        f"in view {vid} P{ps[0]} delivered {sorted(a - b, key=str)} that P{p} "
                        f"did not, and P{p} {sorted(b - a, key=str)} that P{ps[0]} did not",
                        (ps[0], p),
                    )
                )
    return found


def check_uniform_agreement(
    trace: Sequence[Event], run: str = "", final: Mapping[int, int] | None = None
) -> list[Violation]:
    """Safe delivery: every message some process delivered in view V (one that crashed
    or was excluded afterwards included) is delivered in V by every process that
    installs V and then V + 1 (or ends the run alive in V)."""
    got = {key: set(ms) for key, ms in _delivered_in(trace).items()}
    groups = cohorts(trace, final)
    found = []
    seen: set[tuple[MessageId, int]] = set()
    for e in trace:
        if e.kind != "deliver" or e.view is None or (e.message, e.view) in seen:
            continue
        seen.add((e.message, e.view))
        staying = groups.get((e.view, "next"), set()) | groups.get((e.view, "end"), set())
        for q in sorted(staying):
            if e.message not in got.get((q, e.view), ()):
                found.append(
                    Violation(
                        "uniform_agreement",
                        run,
                        (e.process, q),
                        (e.message,),
                        (e.seq,),
                        f"P{e.process} delivered {e.message} in view {e.view} and P{q}, "
                        f"which went on from that view, never did",
                    )
                )
    return found


def check_group_liveness(
    trace: Sequence[Event], run: str = "", final: Mapping[int, int] | None = None
) -> list[Violation]:
    """Every message sent in view V by a process that goes on into V + 1 (or ends the run
    alive in V) is delivered by every process that leaves V the same way."""
    got = _delivered_in(trace)
    found = []
    groups = cohorts(trace, final)
    for e in trace:
        if e.kind != "send" or e.view is None:
            continue
        ours = [g for tag in ("next", "end") if e.process in (g := groups.get((e.view, tag), ()))]
        for q in sorted(ours[0] if ours else ()):
            if e.message not in got[(q, e.view)]:
                found.append(
                    Violation(
                        "liveness",
                        run,
                        (q,),
                        (e.message,),
                        (e.seq,),
                        f"P{q} never delivered {e.message}, sent in view {e.view}",
                    )
                )
    return found


def survivors_total(trace: Sequence[Event], final: Mapping[int, int] | None = None) -> list[Event]:
    """The trace without the deliveries that membership's total order does not compare:
    those of a process in a view it did not leave into the next view (or end in alive)."""
    keep = {(v, p) for (v, _), procs in cohorts(trace, final).items() for p in procs}
    return [e for e in trace if e.kind != "deliver" or (e.view, e.process) in keep]


def expected_members(sim: Simulation) -> list[int]:
    """The processes that should be members once a run settles: not stopped, not left
    for good, and in the group or trying to get in (idle slots are not)."""
    gone = {q for q, out in sim.excluded if not out.rejoining}
    out = []
    for q, ep in enumerate(sim.endpoints):
        if q in sim.stopped or (q in gone and view_of(ep) is None):
            continue
        if view_of(ep) is not None or ep.next_deadline() is not None:
            out.append(q)
    return out


def settled_problems(sim: Simulation, run: str = "", total: bool = False) -> list[Violation]:
    """After the run drained: the live processes share one view without the stopped ones,
    no view change is under way and their application states (the default ``on_state``
    log) agree: as sets, or as sequences under ``total`` order."""
    alive = expected_members(sim)
    found = []
    views = {q: view_of(sim.endpoints[q]) for q in alive}
    final = {v for v in views.values()}
    if len(final) != 1 or None in final:
        shown = {f"P{q}": v.id if v else None for q, v in views.items()}
        return [_v("liveness", run, f"the live processes ended in different views: {shown}")]
    view = next(iter(final))
    assert isinstance(view, View)
    if sorted(view.members) != alive:
        found.append(_v("liveness", run, f"view {view.id} is {list(view.members)}, alive {alive}"))
    for q in alive:
        ep: Any = sim.endpoints[q]
        if ep.flushing or not ep.joined:
            found.append(_v("liveness", run, f"P{q} is still flushing or joining", (q,)))
    ordered = total  # under total order the replicas' logs agree as sequences
    states = {q: [tuple(m) for m in sim.app_state[q]] for q in alive}
    if not ordered:
        states = {q: sorted(s) for q, s in states.items()}
    first = alive[0]
    broadcast = all("broadcast" in capabilities(sim.endpoints[q]) for q in alive)
    for q in alive[1:] if broadcast else ():
        if states[q] != states[first]:
            found.append(
                _v("state", run, f"P{first} and P{q} ended with different states", (first, q))
            )
    return found


def view_problems(sim: Simulation, protocol: str, uniform: bool | None = None) -> list[Violation]:
    """Every property of a membership run that the trace and the endpoints can show;
    ``uniform`` agreement too (by default: if every endpoint delivers safely)."""
    trace = sim.trace
    run = sim.run_name
    alive = final_views(sim)
    found = check_view_agreement(trace, run)
    found += check_self_inclusion(trace, run)
    found += check_same_view(trace, run)
    found += check_virtual_synchrony(trace, run, alive)
    if uniform is None:
        uniform = all(getattr(ep, "safe", False) is True for ep in sim.endpoints)
    if uniform:
        found += check_uniform_agreement(trace, run, alive)
    promises = entry(protocol).promises
    report = check(trace, [p for p in ("integrity", "fifo", "causal") if p in promises])
    found += [v for vs in report.violations.values() for v in vs]
    if "total" in promises:
        found += check(survivors_total(trace, alive), ["total"]).violations["total"]
    if entry(protocol).mode == "broadcast":
        found += check_group_liveness(trace, run, alive)
    found += settled_problems(sim, run, "total" in promises)
    return found


# -- known-buggy variants: the harness must catch each one --------------------------------------
class GroupSkipsFlushLog(Group):
    """Installs the next view without delivering what it lacks of the flush log: a message
    of a crashed sender that reached only some survivors stays missing at the others
    (virtual synchrony, liveness)."""

    protocol = "GroupSkipsFlushLog"

    def recover_flush_log(self, log: list[Any]) -> list[Action]:
        return []


class GroupNoQuorum(Group):
    """The coordinator installs the next view on its own promise alone, without the
    other survivors' logs (or their agreement): what they delivered and it did not is
    never recovered (virtual synchrony, liveness)."""

    protocol = "GroupNoQuorum"

    def flush_quorum(self) -> set[int]:
        return {self.pid} if self.view is not None else set()


class GroupSafeOwnHold(Group):
    """Safe delivery that hands a message over once this member holds it, without
    waiting for the others: a member delivers its own message and crashes before
    anyone else has it, and the survivors never deliver it (uniform agreement)."""

    protocol = "GroupSafeOwnHold"

    def safe_holds(self) -> list[Sequence[int]]:
        installed = self.installed
        assert installed is not None
        return [installed.hold_of(self.pid)]


class GroupSafeBelowMajority(Group):
    """Safe delivery by majority (``safe_quorum="majority"``) that counts one holder
    too few (at n = 3: this member alone): a member delivers its own message, the one
    that could have made the majority never gets it, and when the deliverer crashes
    the survivors' flush does not recover it (uniform agreement)."""

    protocol = "GroupSafeBelowMajority"

    def safe_needed(self) -> int | None:
        installed = self.installed
        assert installed is not None
        return max(1, len(installed.view.members) // 2)


class GroupSafeForgetsSilent(Group):
    """Safe delivery that forgets the members it has not heard an announcement from
    (they count as holding everything): until every member has announced once, a
    message is handed over as soon as its holders so far hold it (uniform agreement)."""

    protocol = "GroupSafeForgetsSilent"

    def safe_holds(self) -> list[Sequence[int]]:
        installed = self.installed
        assert installed is not None
        heard = [m for m in installed.view.members if m == self.pid or m in installed.stable]
        return [installed.hold_of(m) for m in heard]


class GroupSafeWrongFirst(Group):
    """Safe delivery that counts the view's last member as holding whatever this one
    delivered, as it rightly counts the sequencer (``first_to_deliver``), though the
    last member delivers nothing first: at n = 3 by majority a member hands its own
    message over alone, and when it is cut off the survivors never get it (uniform
    agreement)."""

    protocol = "GroupSafeWrongFirst"

    def safe_holds(self) -> list[Sequence[int]]:
        installed = self.installed
        assert installed is not None
        holds = installed.holds()
        last = len(holds) - 1
        if installed.rank != last:
            holds[last] = installed.low
        return holds


def variant_factory(cls: type[Group], **options: Any) -> GroupFactory:
    """A factory for ``replay_group`` that makes ``cls`` endpoints (``options`` go to
    the class: ``variant_factory(Group, safe=True)`` makes groups with safe delivery)."""

    def make(pid: int, n: int, protocol: str, members: tuple[int, ...]) -> Group:
        if pid in members:
            return cls(pid, n, protocol, members=members, **options)
        return cls(pid, n, protocol, contacts=members, **options)

    return make


def assert_group_properties(
    scenario: GroupScenario, factory: GroupFactory = make_group
) -> GroupRun:
    """Replay and raise AssertionError with the schedule if any property fails."""
    run = replay_group(scenario, factory)
    found = run.violations()
    if found:
        lines = "\n".join(v.explain() for v in found[:10])
        raise AssertionError(f"{len(found)} violation(s):\n{lines}\nschedule:\n{run.describe()}")
    return run


__all__ = [
    "VIEW_PROPERTIES",
    "GroupFactory",
    "GroupNoQuorum",
    "GroupOp",
    "GroupRun",
    "GroupSafeBelowMajority",
    "GroupSafeForgetsSilent",
    "GroupSafeOwnHold",
    "GroupSafeWrongFirst",
    "GroupScenario",
    "GroupSkipsFlushLog",
    "assert_group_properties",
    "check_group_liveness",
    "check_same_view",
    "check_self_inclusion",
    "check_uniform_agreement",
    "check_view_agreement",
    "check_virtual_synchrony",
    "group_scenarios",
    "make_group",
    "replay_group",
    "settled_problems",
    "survivors_total",
    "variant_factory",
    "view_problems",
]
