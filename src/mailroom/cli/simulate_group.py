"""``mailroom simulate --group``: a random broadcast workload in a process group, with
crash-stops and joins, checked for the protocol's promises and the view properties.

Every process is a ``HeartbeatDetector(Group(...))``: the group runs the protocol
inside views, the detector suspects a member silent for ``--suspect-after``. A
crashed process stops for good; a joiner takes a new pid and receives the state.
The run ends a while after the last crash, join and message, since heartbeats
never stop; the report lists every process's views and, per crash, how long the
survivors went without delivering a message sent after it.
"""

from __future__ import annotations

import argparse
import random
import sys
from functools import partial
from typing import Any, TextIO

import attrs

from mailroom import __version__
from mailroom.protocols.membership import Group
from mailroom.protocols.membership.detector import HeartbeatDetector
from mailroom.sim.registry import PROTOCOLS
from mailroom.sim.simulation import NetworkModel, Simulation
from mailroom.trace.checkers import PROPERTIES, VIEW_PROPERTIES, check
from mailroom.trace.jsonl import write_jsonl

__all__ = ["group_problem", "run_group", "write_trace"]


def group_problem(args: argparse.Namespace, mode: str) -> str | None:
    """What is wrong with the group options, or None."""
    n = args.processes
    joins = [p for p, _ in args.join]
    if len(set(joins)) != len(joins):
        return "--join names a pid twice"
    if any(p < n for p in joins):
        return f"--join takes a new pid, at least --processes ({n})"
    crashed = [p for p, _ in args.crash]
    if len(set(crashed)) != len(crashed):
        return "--crash names a pid twice"
    times = dict(args.join)
    for p, t in args.crash:
        if p >= n and p not in times:
            return f"--crash names P{p}, which is neither a process nor a joiner"
        if p in times and t <= times[p]:
            return f"--crash of joiner P{p} must come after its join (at {times[p]:g})"
    if not args.heartbeat > 0:
        return "--heartbeat must be positive"
    if args.suspect_after is not None and not args.suspect_after > args.heartbeat:
        return "--suspect-after must be longer than --heartbeat"
    return None


def _member_of(ep: Any) -> Any:
    return getattr(ep, "group", ep)


def run_group(args: argparse.Namespace, out: TextIO | None) -> int:
    """Run the group simulation, print its report; 0 if every promise held."""
    run = _GroupRun.of(args)
    sim = run.simulation()
    end = run.schedule(sim)
    sim.run(until=end)
    promised = run.promised
    if run.mode == "unicast":  # a unicast in flight at a view change is delivered nowhere
        promised = tuple(x for x in promised if x != "liveness")
    promises = (*promised, *VIEW_PROPERTIES)
    print(
        f"{args.protocol} in a group of {run.n} (pids 0..{run.universe - 1}); heartbeat every "
        f"{args.heartbeat:g}, suspicion after {run.timeout:g}; ran until t={end:g}\n"
    )
    _print_views(sim, run.universe)
    for p, t in args.crash:
        print(f"\nP{p} crashed at t={t:g}: {_stall(sim, p, t)}")
    unpromised = tuple(x for x in PROPERTIES if x not in promises)
    report = check(
        sim.trace, promises, mode="summary", not_promised=unpromised, protocol=args.protocol
    )
    print(f"\nchecked {len(sim.trace)} events; promised: {', '.join(promises)}")
    print(report.summary())
    settings = {
        "messages": args.messages,
        "group": True,
        "crash": [list(c) for c in args.crash],
        "join": [list(j) for j in args.join],
        "heartbeat": args.heartbeat,
        "suspect_after": run.timeout,
    }
    if out is not None and not write_trace(sim, args, out, promises, settings):
        return 2
    return 1 if any(report.count(x) for x in promises) else 0


@attrs.frozen
class _GroupRun:
    """The group run the options describe: ``n`` members in view 1 and slots up to
    ``universe`` for the joiners; a member is suspected after ``timeout`` of silence."""

    args: argparse.Namespace
    n: int
    universe: int
    mode: str
    promised: tuple[str, ...]
    timeout: float
    rng: random.Random

    @classmethod
    def of(cls, args: argparse.Namespace) -> _GroupRun:
        n = args.processes
        _, mode, promised = PROTOCOLS[args.protocol]
        universe = max([n] + [p + 1 for p, _ in args.join])
        timeout = args.suspect_after or 2 * args.heartbeat + 2 * args.delay[1]
        return cls(args, n, universe, mode, promised, timeout, random.Random(args.seed))

    def group(self, pid: int, **where: Any) -> Group:
        """A group endpoint at ``pid`` (``members`` or ``contacts`` in ``where``); over the
        reliable layer when the network loses packets."""
        a = self.args
        retry = 2 * a.delay[1] + 1.0
        return Group(pid, self.universe, a.protocol, reliable=a.loss > 0, retry=retry, **where)

    def detector(self, group: Group) -> HeartbeatDetector:
        return HeartbeatDetector(group, interval=self.args.heartbeat, timeout=self.timeout)

    def simulation(self) -> Simulation:
        """The members under their detectors, and the slots the joiners take later (no
        view, no contacts, no traffic)."""
        a = self.args
        endpoints: list[Any] = [
            self.detector(self.group(p, members=range(self.n)))
            if p < self.n
            else Group(p, self.universe, a.protocol)
            for p in range(self.universe)
        ]
        network = NetworkModel(delay=tuple(a.delay), duplicate=a.duplicate, loss=a.loss)
        return Simulation(endpoints, network, seed=a.seed, run=f"group-{a.protocol}-seed{a.seed}")

    def schedule(self, sim: Simulation) -> float:
        """Schedule the messages at random times, the crashes and the joins; when to stop."""
        a = self.args
        events = [t for _, t in a.crash] + [t for _, t in a.join]
        span = max([10.0, *(t + 5 * self.timeout for t in events)])
        for k in range(a.messages):
            sim.schedule(self.rng.uniform(0, span), partial(self.send, k=k))
        for p, t in a.crash:
            sim.schedule(t, partial(Simulation.crash, pid=p))
        for p, t in a.join:
            sim.schedule(t, partial(self.join, pid=p))
        end: float = span + 10 * self.timeout + 20 * a.delay[1]
        return end

    def send(self, s: Simulation, k: int) -> None:
        """A member that may send now sends message ``k`` (a unicast waits out a view change)."""
        ready = [
            p
            for p in range(self.universe)
            if s.is_up(p)
            and p not in s.stopped
            and _member_of(s.endpoints[p]).joined
            and (self.mode == "broadcast" or not _member_of(s.endpoints[p]).flushing)
        ]
        if not ready:
            return
        p = self.rng.choice(ready)
        if self.mode == "broadcast":
            s.broadcast(p, f"m{k}")
            return
        others = [q for q in _member_of(s.endpoints[p]).view.members if q != p]
        if others:
            s.send(p, f"m{k}", to=self.rng.choice(others))

    def join(self, s: Simulation, pid: int) -> None:
        s.join(pid, self.detector(self.group(pid, contacts=range(self.n))))


def _print_views(sim: Simulation, universe: int) -> None:
    print("views installed (id: members), per process:")
    for p in range(universe):
        views = [e for e in sim.trace if e.kind == "view" and e.process == p]
        gone = " (crashed)" if p in sim.stopped else ""
        shown = ", ".join(f"{e.view}: {list(e.dest)}" for e in views) or "none"
        print(f"  P{p}{gone}: {shown}")


def write_trace(
    sim: Simulation,
    args: argparse.Namespace,
    out: TextIO,
    promises: tuple[str, ...],
    settings: dict[str, Any],
) -> bool:
    """Write the run's trace to ``args.trace`` (opened early as ``out``) with a header
    naming its promises and ``settings``; False, with a one-line message, if it fails."""
    header = sim.trace_header(args.protocol, promises, f"mailroom simulate {__version__}")
    header = attrs.evolve(header, settings={**header.settings, **settings})
    out.close()
    try:
        write_jsonl(sim.trace, args.trace, header=header)
    except OSError as exc:
        print(f"mailroom simulate: cannot write {args.trace}: {exc}", file=sys.stderr)
        return False
    print(f"\ntrace of {len(sim.trace)} events written to {args.trace}")
    return True


def _stall(sim: Simulation, victim: int, at: float) -> str:
    """When the survivors installed a view without ``victim`` and delivered again."""
    sent = {e.message: e.time for e in sim.trace if e.kind == "send"}
    members = {  # the processes that were in a view with the victim when it crashed
        e.process
        for e in sim.trace
        if e.kind == "view" and e.time is not None and e.time <= at and victim in e.dest
    }
    views: dict[int, float] = {}
    first: dict[int, float] = {}
    for e in sim.trace:
        if e.time is None or e.time < at or e.process == victim or e.process not in members:
            continue
        if e.kind == "view" and victim not in e.dest:
            views.setdefault(e.process, e.time)
        when = sent.get(e.message)
        if e.kind == "deliver" and when is not None and when > at:
            first.setdefault(e.process, e.time)
    if not views:
        return "no survivor installed a view without it"
    view = f"{min(views.values()) - at:.4g} (last survivor {max(views.values()) - at:.4g})"
    if not first:
        return f"view without it after {view}; no message sent after the crash was delivered"
    deliver = f"{min(first.values()) - at:.4g} (last survivor {max(first.values()) - at:.4g})"
    return (
        f"view without it after {view};\n  first delivery of a message sent after the "
        f"crash after {deliver}"
    )
