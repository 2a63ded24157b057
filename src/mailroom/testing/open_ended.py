"""Open-ended scenarios: services that never reach quiescence, run in the simulator.

A ``Steady`` scenario has every process send at a fixed rate (one message every
``period``, staggered) for ``duration`` time units, over links whose delays lie
within ``delay``, optionally lossy (then every endpoint runs over ``Reliable``).
It is timed, not adversarial: the network model draws the delays. The two
properties every protocol must hold in it (``open_ended_problems``):

- bounded latency: the worst delay from send to delivery of the messages sent in
  the second half of the run is at most ``latency_bound`` (a small multiple of
  the link delay, plus retransmission timeouts when lossy), whatever the run's
  length. A delivery rule that waits for the traffic to pause (the textbook
  Skeen rule, ``mailroom.lab.SkeenAllFinal``) breaks it: its latency grows with the run.
- flat state: the size of the endpoints' ``snapshot()`` (JSON bytes, summed over
  the group, sampled 32 times) in the last quarter of the run is not larger
  than in the second quarter by more than a quarter plus ``SIZE_SLACK`` bytes per
  process, comparing each quarter's smallest sample (what remains when the
  traffic in flight ebbs). State kept per message forever
  (``Skeen(keep_finals=huge)``) breaks it. A lossy network is judged at rest
  instead (below): there a lost packet holds everything behind it on its channel
  for a retransmission timeout, so what is in flight swings by more than the
  state itself, over stretches as long as a short run.
- state at rest: once the run drained, the same traffic is sent twice more,
  draining after each; the state at the last rest is not larger than at the one
  before by more than a tenth plus ``REST_SLACK`` bytes per process (counters
  that gained a digit). State kept per message grows with the traffic served;
  bounded state does not, once what is bounded by a count rather than by time
  has filled (Skeen's last ``keep_finals`` numbers: the first two bursts fill it).

Every message must also be delivered at every destination once the senders
stop and the network drains (liveness), in every burst.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

import attrs
from hypothesis import strategies as st

from mailroom.core.actions import Action
from mailroom.core.endpoint import Endpoint, Snapshot, capabilities, upcoming_id
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.stack import Stack
from mailroom.protocols.reliable import Reliable
from mailroom.sim.simulation import NetworkModel, Simulation

Factory = Callable[[int, int], Endpoint]

#: Bytes of snapshot growth per process tolerated between the middle and the end:
#: the fluctuation of what is in flight, never growth per message.
SIZE_SLACK = 1024
#: Bytes per process the state at rest may gain from one burst of traffic to the next.
REST_SLACK = 128
#: Latency bound, in multiples of the largest link delay (plus timeouts if lossy).
DELAY_MULTIPLE = 8.0


@attrs.frozen
class Steady:
    """Every process sends one message every ``period`` until ``duration``."""

    n: int
    period: float
    duration: float
    delay: tuple[float, float] = (1.0, 1.0)
    mode: str = "broadcast"
    loss: float = 0.0
    rto: float = 4.0
    seed: int = 0

    @property
    def lossy(self) -> bool:
        return self.loss > 0

    def latency_bound(self) -> float:
        """The worst latency allowed: a small multiple of the link delay and the
        sending period, plus, when lossy, a few (capped) retransmission timeouts."""
        delay = self.delay[1]
        if self.lossy:  # a lost packet comes again within max_rto (2 * rto in ``endpoints``)
            delay += 2 * self.rto
        return DELAY_MULTIPLE * delay + 2 * self.period

    def endpoints(self, factory: Factory) -> list[Endpoint]:
        """The group; over ``Reliable`` when the network loses packets."""
        if not self.lossy:
            return [factory(pid, self.n) for pid in range(self.n)]
        return [
            Stack(Reliable(pid, self.n, rto=self.rto, max_rto=2 * self.rto), factory(pid, self.n))
            for pid in range(self.n)
        ]


@attrs.define
class SteadyRun:
    """What a steady run measured: latencies and snapshot sizes over time."""

    scenario: Steady
    #: (send time, delay to one destination's delivery) for every delivery
    latencies: list[tuple[float, float]] = attrs.field(factory=list)
    #: (time, summed JSON size of every endpoint's snapshot)
    sizes: list[tuple[float, int]] = attrs.field(factory=list)
    #: deliveries expected but missing once the network drained (every burst)
    missing: int = 0
    #: summed snapshot size each time the network drained: after the run, and after
    #: each of the two bursts of the same traffic that follow it
    rest: list[int] = attrs.field(factory=list)
    first_delivery: list[float | None] = attrs.field(factory=list)

    def worst_latency(self, sent_after: float) -> float:
        late = [d for t, d in self.latencies if t >= sent_after]
        return max(late, default=0.0)

    def percentile(self, q: float) -> float:
        values = sorted(d for _, d in self.latencies)
        if not values:
            return 0.0
        return values[min(len(values) - 1, int(q * len(values)))]

    def floor_size(self, start: float, end: float) -> int:
        """The smallest snapshot size sampled in [start, end]: what stays when the
        traffic in flight ebbs (per-message leaks raise it; fluctuations do not)."""
        return min((s for t, s in self.sizes if start <= t <= end), default=0)


def run_steady(factory: Factory, scenario: Steady, *, samples: int = 32) -> SteadyRun:
    """Run ``scenario`` to the end of its traffic, then drain; measure as it goes.
    Then send the same traffic twice more, draining after each, for the state at
    rest (``rest``)."""
    s = scenario
    out = SteadyRun(s, first_delivery=[None] * s.n)
    sent_at: dict[MessageId, float] = {}
    expected: dict[MessageId, int] = {}
    got: dict[MessageId, int] = {}
    measuring = True  # latencies and first deliveries of the first burst only

    def on_deliver(sim: Simulation, pid: int, m: Message) -> None:
        got[m.id] = got.get(m.id, 0) + 1
        if not measuring:
            return
        if out.first_delivery[pid] is None:
            out.first_delivery[pid] = sim.now
        at = sent_at.get(m.id)
        if at is not None:
            out.latencies.append((at, sim.now - at))

    network = NetworkModel(delay=s.delay, loss=s.loss)
    sim = Simulation(
        s.endpoints(factory), network, seed=s.seed, record=False, on_deliver=on_deliver
    )
    pick = random.Random(s.seed)

    def send(pid: int) -> Callable[[Simulation], object]:
        def op(sim: Simulation) -> None:
            mid = upcoming_id(sim.endpoints[pid])
            sent_at[mid] = sim.now  # before the call: a broadcast delivers at once
            if s.mode == "broadcast":
                expected[mid] = s.n
                sim.broadcast(pid, f"{pid}@{sim.now:g}")
            else:
                expected[mid] = 1
                to = pick.choice([q for q in range(s.n) if q != pid] or [pid])
                sim.send(pid, f"{pid}@{sim.now:g}", to=to)

        return op

    def size() -> int:
        return sum(len(json.dumps(ep.snapshot())) for ep in sim.endpoints)

    def measure(sim: Simulation) -> None:
        out.sizes.append((sim.now, size()))

    def burst(start: float) -> None:
        for k in range(int(s.duration / s.period)):
            for pid in range(s.n):
                sim.schedule(start + k * s.period + pid * s.period / s.n, send(pid))

    burst(0.0)
    for k in range(1, samples + 1):
        sim.schedule(s.duration * k / samples - 1e-9, measure)
    sim.run()
    out.rest.append(size())
    measuring = False
    for _ in range(2):
        burst(sim.now + s.period)
        sim.run()
        out.rest.append(size())
    out.missing = sum(expected[m] - got.get(m, 0) for m in expected)
    return out


def open_ended_problems(run: SteadyRun) -> list[str]:
    """What the run breaks of the two open-ended properties (and liveness)."""
    s = run.scenario
    problems = []
    if run.missing:
        problems.append(f"{run.missing} deliveries never happened")
    worst = run.worst_latency(s.duration / 2)
    if worst > s.latency_bound():
        problems.append(
            f"latency of late messages {worst:.2f} exceeds {s.latency_bound():.2f} "
            f"(run of {s.duration:g}, link delay up to {s.delay[1]:g})"
        )
    if not s.lossy:
        middle = run.floor_size(s.duration / 4, s.duration / 2)
        end = run.floor_size(3 * s.duration / 4, s.duration)
        if end > middle + middle // 4 + SIZE_SLACK * s.n:
            problems.append(f"snapshot size grew from {middle} bytes mid-run to {end} at the end")
    before, last = run.rest[-2:]
    if last > before + before // 10 + REST_SLACK * s.n:
        problems.append(
            f"state at rest grew from {before} bytes to {last} with one more burst of "
            "the same traffic"
        )
    return problems


@st.composite
def steady_scenarios(
    draw: st.DrawFn,
    *,
    mode: str = "broadcast",
    n: tuple[int, int] = (2, 4),
    lossy: bool = False,
    duration: tuple[float, float] = (60.0, 240.0),
) -> Steady:
    """Hypothesis strategy: group size, rate, delay bound, run length and seed."""
    size = draw(st.integers(*n))
    high = draw(st.sampled_from([0.5, 1.0, 2.0]))
    low = draw(st.sampled_from([0.0, 0.5, 1.0])) * high
    # a lossy network gets a lighter load: retransmissions multiply the traffic
    period = draw(st.sampled_from([1.0, 2.0] if lossy else [0.25, 0.5, 1.0, 2.0])) * high
    length = draw(st.floats(*duration, allow_nan=False))
    loss = draw(st.sampled_from([0.05, 0.1])) if lossy else 0.0
    return Steady(
        n=size,
        period=period,
        duration=round(length, 1),
        delay=(low, high),
        mode=mode,
        loss=loss,
        rto=4.0 * high,
        seed=draw(st.integers(0, 2**16)),
    )


__all__ = [
    "DELAY_MULTIPLE",
    "REST_SLACK",
    "SIZE_SLACK",
    "ShiftedClock",
    "Steady",
    "SteadyRun",
    "open_ended_problems",
    "run_steady",
    "steady_scenarios",
]


class ShiftedClock:
    """An endpoint whose host clock reads the simulator's time plus ``offset``: a
    process restored on a machine whose clock differs (``offset`` < 0: rebooted,
    its clock restarted; > 0: a clock far ahead). Everything else passes through."""

    def __init__(self, inner: Any, offset: float) -> None:
        self.inner = inner
        self.offset = offset
        self.capabilities = capabilities(inner)

    def __repr__(self) -> str:
        return f"ShiftedClock({self.inner!r}, {self.offset:+g})"

    pid = property(lambda self: self.inner.pid)
    n = property(lambda self: self.inner.n)
    sent_count = property(lambda self: self.inner.sent_count)
    duplicates = property(lambda self: self.inner.duplicates)

    def tick(self, now: float) -> list[Action]:
        return list(self.inner.tick(now + self.offset))

    def next_deadline(self) -> float | None:
        d = self.inner.next_deadline()
        return None if d is None else float(d) - self.offset

    def receive(self, packet: object) -> list[Action]:
        return list(self.inner.receive(packet))

    def send(self, payload: Payload, to: int) -> list[Action]:
        return list(self.inner.send(payload, to=to))

    def broadcast(self, payload: Payload) -> list[Action]:
        return list(self.inner.broadcast(payload))

    def pending(self) -> list[Pending]:
        return list(self.inner.pending())

    def buffered(self) -> int:
        return int(self.inner.buffered())

    def snapshot(self) -> Snapshot:
        return dict(self.inner.snapshot())
