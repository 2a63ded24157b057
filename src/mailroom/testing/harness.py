"""A Hypothesis harness for any endpoint: Hypothesis chooses workload and schedule.

A ``Scenario`` is a workload (a list of operations: who sends what to whom) and
a list of choices. Replaying it runs the simulator in adversarial mode: at
each step the enabled events are "issue the next operation", "packet k arrives"
for every in-flight packet, "P's timer fires" for every endpoint with a deadline
(time jumps to it), and, if enabled, "duplicate packet k", "drop packet k",
"P crashes" (it loses its memory and the packets on their way to it, and restarts
from the checkpoint taken after its last step) and "P is cut off" (a partition
isolating P for the next 5 time units, then healing); choice c picks event
c mod (number of events). When the choices run
out, the remaining operations are issued and the network drains oldest-first.
Choices shrink towards 0, so a minimal counterexample issues operations early
and delivers packets in order unless the bug needs otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence

import attrs
from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from mailroom.core.actions import Deliver
from mailroom.core.endpoint import Endpoint, require
from mailroom.core.errors import RemoteError
from mailroom.core.registry import restore_endpoint
from mailroom.sim.simulation import DeliverHook, Simulation, StableHook
from mailroom.trace.checkers import PROPERTIES, Violation, check
from mailroom.trace.events import Event

Factory = Callable[[int, int], Endpoint]
MODES = ("unicast", "broadcast", "multicast", "batch", "unicast_batch")
#: The most messages a "batch" operation broadcasts (or a "unicast_batch" one sends to
#: one process) at once (Hypothesis picks 0..this).
MAX_BATCH_OP = 5


@attrs.frozen
class Op:
    """Process ``pid`` sends ``payload``: to ``to`` (unicast), to everyone (None),
    or to a set (multicast, a tuple of pids); or sends ``batch`` (its payloads, maybe
    none) as one step: to everyone with ``broadcast_many`` (``to`` is None) or to the
    process ``to`` with ``send_many``."""

    pid: int
    to: int | tuple[int, ...] | None
    payload: str
    batch: tuple[str, ...] | None = None

    def describe(self) -> str:
        if self.batch is not None and self.to is None:
            return f"P{self.pid} broadcasts the batch {list(self.batch)!r}"
        if self.batch is not None:
            return f"P{self.pid} sends the batch {list(self.batch)!r} to P{self.to}"
        if self.to is None:
            return f"P{self.pid} broadcasts {self.payload!r}"
        if isinstance(self.to, tuple):
            return f"P{self.pid} multicasts {self.payload!r} to {list(self.to)}"
        return f"P{self.pid} sends {self.payload!r} to P{self.to}"


@attrs.frozen
class Scenario:
    """``n`` processes, the operations they issue, and the choices that schedule them;
    ``faults`` are the faults the choices may inject besides reordering."""

    n: int
    ops: tuple[Op, ...]
    choices: tuple[int, ...]
    faults: frozenset[str] = frozenset()


@attrs.frozen
class Run:
    """A replayed scenario: the simulation it left behind and the steps it took."""

    scenario: Scenario
    sim: Simulation
    steps: tuple[str, ...]
    #: RemoteErrors raised by packets that correct peers produced: always a bug.
    errors: tuple[str, ...] = ()

    @property
    def trace(self) -> list[Event]:
        return self.sim.trace

    def violations(self, properties: Sequence[str] = PROPERTIES) -> list[Violation]:
        """Trace violations of ``properties``; liveness also demands empty mail rooms."""
        report = check(self.sim.trace, properties)
        found = [v for prop in properties for v in report.violations[prop]]
        found += [Violation("error", self.sim.run_name, (), (), (), e) for e in self.errors]
        if "liveness" in properties:
            for ep in self.sim.endpoints:
                for p in ep.pending():
                    found.append(
                        Violation(
                            "liveness",
                            self.sim.run_name,
                            (ep.pid,),
                            (p.message.id,),
                            (),
                            f"P{ep.pid} still holds {p.explain()}",
                        )
                    )
        return found

    def describe(self) -> str:
        return "\n".join(f"{i:3d}. {s}" for i, s in enumerate(self.steps, 1))


@st.composite
def scenarios(
    draw: st.DrawFn,
    *,
    n: int | tuple[int, int] = (2, 4),
    mode: str | Sequence[str] = "unicast",
    max_ops: int = 8,
    max_choices: int = 80,
    duplicate: bool = True,
    drop: bool = False,
    self_sends: bool = True,
    crash: bool = False,
    partition: bool = False,
) -> Scenario:
    """Hypothesis strategy for scenarios; ``mode`` may list several op kinds to mix."""
    size = n if isinstance(n, int) else draw(st.integers(*n))
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    for m in modes:
        if m not in MODES:
            raise ValueError(f"unknown mode {m!r}; choose from {MODES}")
    ops = []
    for i in range(draw(st.integers(1, max_ops))):
        pid = draw(st.integers(0, size - 1))
        kind = draw(st.sampled_from(modes))
        to: int | tuple[int, ...] | None
        if kind in ("broadcast", "batch"):
            to = None
        elif kind == "multicast":
            to = tuple(sorted(draw(st.sets(st.integers(0, size - 1), min_size=1))))
        else:
            targets = [q for q in range(size) if self_sends or q != pid or size == 1]
            to = draw(st.sampled_from(targets))
        if kind.endswith("batch"):
            count = draw(st.integers(0, MAX_BATCH_OP))
            ops.append(Op(pid, to, f"m{i}", tuple(f"m{i}.{k}" for k in range(count))))
        else:
            ops.append(Op(pid, to, f"m{i}"))
    choices = draw(st.lists(st.integers(0, 255), max_size=max_choices))
    options = (("duplicate", duplicate), ("drop", drop), ("crash", crash), ("partition", partition))
    faults = frozenset(f for f, on in options if on)
    return Scenario(size, tuple(ops), tuple(choices), faults)


def replay(
    factory: Factory,
    scenario: Scenario,
    *,
    max_steps: int = 100_000,
    on_deliver: DeliverHook | None = None,
    on_stable: StableHook | None = None,
    restore_at: int | None = None,
) -> Run:
    """Run ``scenario`` against endpoints made by ``factory(pid, n)``.

    ``on_deliver`` and ``on_stable`` are passed to the Simulation: the application
    may send from inside its delivery handling (the callback model).
    ``restore_at``: before that step, every process continues from its
    ``snapshot()`` sent through JSON and restored (mid-run, packets in flight);
    a correct snapshot leaves the rest of the run exactly as it would have been.
    """
    endpoints = [factory(pid, scenario.n) for pid in range(scenario.n)]
    needed = {_capability(op) for op in scenario.ops}
    for ep in endpoints:  # refuse at once a workload the endpoints cannot run
        for capability in sorted(needed):
            require(ep, capability)
    sim = Simulation(
        endpoints,
        adversarial=True,
        on_deliver=on_deliver,
        on_stable=on_stable,
        checkpoints="crash" in scenario.faults,
    )
    replaying = _Replaying(sim, scenario)
    choices = scenario.choices
    for step in range(max_steps):
        if step == restore_at:
            replaying.restore()
        events = replaying.enabled(choosing=step < len(choices))
        if not events:
            break
        choice = choices[step] if step < len(choices) else 0
        replaying.take(*events[choice % len(events)])
    else:
        raise RuntimeError(f"scenario did not finish within {max_steps} steps")
    return Run(scenario, sim, tuple(replaying.steps), tuple(replaying.errors))


@attrs.define
class _Replaying:
    """A scenario being replayed: the events enabled at each step, and taking one."""

    sim: Simulation
    scenario: Scenario
    next_op: int = 0
    steps: list[str] = attrs.field(factory=list)
    #: RemoteErrors raised by packets that correct peers produced
    errors: list[str] = attrs.field(factory=list)

    def restore(self) -> None:
        """Every process continues from its snapshot, sent through JSON."""
        sim = self.sim
        for pid, ep in enumerate(sim.endpoints):
            sim.replace(pid, restore_endpoint(json.loads(json.dumps(ep.snapshot()))))
        self.steps.append("every process restarts from its snapshot")

    def enabled(self, choosing: bool) -> list[tuple[str, int]]:
        """The events to choose from, in a fixed order; crashes and partitions only
        while ``choosing`` (they end with the choices)."""
        sim, scenario = self.sim, self.scenario
        packets = sim.packets()
        events: list[tuple[str, int]] = (
            [("op", self.next_op)] if self.next_op < len(scenario.ops) else []
        )
        events += [("arrive", p.id) for p in packets]
        events += [
            ("timer", q) for q, ep in enumerate(sim.endpoints) if ep.next_deadline() is not None
        ]
        faults = scenario.faults
        if "duplicate" in faults:
            events += [("duplicate", p.id) for p in packets]
        if "drop" in faults:
            events += [("drop", p.id) for p in packets]
        if "crash" in faults and choosing:
            events += [("crash", q) for q in range(scenario.n)]
        if "partition" in faults and choosing:
            events += [("partition", q) for q in range(scenario.n)]
        return events

    def take(self, kind: str, arg: int) -> None:
        """Take the event ``kind`` (of ``arg``, a packet or a process) and say what happened."""
        sim = self.sim
        if kind == "op":
            self.next_op += 1
            self.steps.append(self.issue(self.scenario.ops[arg]))
        elif kind == "timer":
            sent = sum(type(a).__name__ == "Transmit" for a in sim.fire(arg))
            self.steps.append(f"P{arg}'s timer fires at {sim.now:g}; it sends {sent} packet(s)")
        elif kind == "crash":
            sim.crash(arg)
            self.steps.append(f"P{arg} crashes and restarts from its checkpoint")
        elif kind == "partition":
            others = [q for q in range(self.scenario.n) if q != arg]
            sim.partition([[arg], others], until=sim.now + 5)
            self.steps.append(f"P{arg} is cut off until time {sim.now + 5:g}")
        else:
            self.steps.append(self.packet(kind, arg))

    def issue(self, op: Op) -> str:
        sim = self.sim
        if op.batch is not None:
            if op.to is None:
                mids = sim.broadcast_many(op.pid, op.batch)
            else:
                mids = sim.send_many(op.pid, op.batch, to=op.to)  # type: ignore[arg-type]
            return f"{op.describe()} ({', '.join(map(str, mids)) or 'nothing'})"
        if op.to is None:
            mid = sim.broadcast(op.pid, op.payload)
        elif isinstance(op.to, tuple):
            mid = sim.multicast(op.pid, op.payload, op.to)
        else:
            mid = sim.send(op.pid, op.payload, to=op.to)
        return f"{op.describe()} ({mid})"

    def packet(self, kind: str, arg: int) -> str:
        """Packet ``arg`` arrives, is duplicated or is lost."""
        sim = self.sim
        p = sim.in_flight[arg]
        what = f"{p.message_id}" if p.message_id is not None else type(p.packet).__name__
        name = f"packet {arg} ({what} P{p.src}->P{p.dst})"
        if kind == "duplicate":
            return f"{name} is duplicated as {sim.duplicate(arg)}"
        if kind == "drop":
            sim.drop(arg)
            return f"{name} is lost"
        try:
            delivered = [a for a in sim.arrive(arg) if isinstance(a, Deliver)]
        except RemoteError as exc:
            self.errors.append(f"P{p.dst} rejected packet {arg} from P{p.src}: {exc}")
            return f"{name} is REJECTED: {exc}"
        return f"{name} arrives" + (f"; P{p.dst} delivers {len(delivered)}" if delivered else "")


def _capability(op: Op) -> str:
    if op.to is None:
        return "broadcast"
    return "multicast" if isinstance(op.to, tuple) else "unicast"


def assert_properties(
    factory: Factory, scenario: Scenario, properties: Sequence[str] = PROPERTIES
) -> Run:
    """Replay and raise AssertionError with the schedule if any property fails."""
    run = replay(factory, scenario)
    found = run.violations(properties)
    if found:
        lines = "\n".join(v.explain() for v in found[:10])
        raise AssertionError(f"{len(found)} violation(s):\n{lines}\nschedule:\n{run.describe()}")
    return run


def find_counterexample(
    factory: Factory,
    properties: Iterable[str],
    *,
    max_examples: int = 2000,
    **scenario_options: object,
) -> Run | None:
    """Search for a scenario that violates one of ``properties``; return it shrunk, or None."""
    props = tuple(properties)

    def fails(s: Scenario) -> bool:
        return bool(replay(factory, s).violations(props))

    try:
        found = find(
            scenarios(**scenario_options),  # type: ignore[arg-type]
            fails,
            settings=settings(
                max_examples=max_examples,
                database=None,
                derandomize=True,
                deadline=None,
                suppress_health_check=list(HealthCheck),
            ),
        )
    except NoSuchExample:
        return None
    return replay(factory, found)
