"""Exploring protocol variants: counterexamples, watched runs and equivalence.

- ``counterexample(factory, properties, ...)`` asks the Hypothesis harness for a
  schedule that breaks one of ``properties`` and returns it shrunk, as a
  ``Finding`` that can describe itself step by step and draw itself.
- ``watch(factory, after)`` wraps endpoints so that ``after(endpoint)`` runs
  after every call (send, broadcast, receive, tick): to assert an invariant
  in every reachable state, or to record states.
- ``compare(a, b, scenario, state=...)`` replays one scenario against two
  protocols and reports the first difference: in what each process delivered
  (the same messages in the same order), or, if ``state`` is given, in the
  state of some process after some call. ``find_difference`` lets Hypothesis
  search for a scenario where they differ. Both protocols see the same
  choices; that is the same schedule as long as both put the same number of
  packets on the wire for each send, which is true of every variant here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import attrs
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

from mailroom.core.actions import Action
from mailroom.core.endpoint import Endpoint, Snapshot
from mailroom.core.messages import MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.diagram.draw import Diagram, draw
from mailroom.testing.harness import Factory, Run, Scenario, replay, scenarios
from mailroom.trace.checkers import Violation


@attrs.frozen
class Finding:
    """A (shrunk) run and the violations it shows."""

    run: Run
    violations: tuple[Violation, ...]

    @property
    def scenario(self) -> Scenario:
        return self.run.scenario

    def describe(self) -> str:
        """The schedule step by step, then the violations."""
        lines = [self.run.describe(), ""]
        lines += [v.explain() for v in self.violations]
        return "\n".join(lines)

    def diagram(self, title: str = "") -> Diagram:
        return draw(self.run.trace, violations=self.violations, title=title)


def search_settings(max_examples: int) -> settings:
    """Deterministic, no example database, and no deadline: a loaded machine (or a
    notebook, where no test profile is loaded) must not turn slowness into failures."""
    return settings(
        max_examples=max_examples,
        database=None,
        derandomize=True,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def counterexample(
    factory: Factory,
    properties: Iterable[str],
    *,
    max_examples: int = 500,
    **scenario_options: object,
) -> Finding | None:
    """A minimal schedule on which ``factory``'s endpoints break a property, or None.

    The same search as ``mailroom.testing.find_counterexample``, with ``search_settings``.
    """
    props = tuple(properties)
    try:
        found = find(
            scenarios(**scenario_options),  # type: ignore[arg-type]
            lambda s: bool(replay(factory, s).violations(props)),
            settings=search_settings(max_examples),
        )
    except NoSuchExample:
        return None
    run = replay(factory, found)
    return Finding(run, tuple(run.violations(props)))


class Watched:
    """An endpoint that calls ``after(inner)`` after every call it forwards."""

    def __init__(self, inner: Endpoint, after: Callable[[Any], None]) -> None:
        self.inner = inner
        self.after = after
        self.pid = inner.pid
        self.n = inner.n

    def _then(self, actions: list[Action]) -> list[Action]:
        self.after(self.inner)
        return actions

    def send(self, payload: Payload, to: int) -> list[Action]:
        return self._then(self.inner.send(payload, to=to))  # type: ignore[attr-defined]

    def broadcast(self, payload: Payload) -> list[Action]:
        return self._then(self.inner.broadcast(payload))  # type: ignore[attr-defined]

    def multicast(self, payload: Payload, to: set[int]) -> list[Action]:
        return self._then(self.inner.multicast(payload, to=to))  # type: ignore[attr-defined]

    def receive(self, packet: object) -> list[Action]:
        return self._then(self.inner.receive(packet))

    def tick(self, now: float) -> list[Action]:
        return self._then(self.inner.tick(now))

    def next_deadline(self) -> float | None:
        return self.inner.next_deadline()

    def pending(self) -> list[Pending]:
        return self.inner.pending()

    def buffered(self) -> int:
        return self.inner.buffered()

    def snapshot(self) -> Snapshot:
        return self.inner.snapshot()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def watch(factory: Factory, after: Callable[[Any], None]) -> Factory:
    """A factory whose endpoints run ``after(endpoint)`` after every call."""

    def build(pid: int, n: int) -> Endpoint:
        return Watched(factory(pid, n), after)

    return build


StateOf = Callable[[Any], object]


@attrs.frozen
class Difference:
    """Two protocols disagree on ``scenario``: ``reason`` says where."""

    scenario: Scenario
    runs: tuple[Run, Run]
    reason: str

    def describe(self) -> str:
        return f"{self.reason}\nschedule (as protocol A ran it):\n{self.runs[0].describe()}"

    def diagrams(self) -> tuple[Diagram, Diagram]:
        return (
            draw(self.runs[0].trace, title="A"),
            draw(self.runs[1].trace, title="B"),
        )


def _replay_recording(
    factory: Factory, scenario: Scenario, state: StateOf | None
) -> tuple[Run, dict[int, list[object]]]:
    history: dict[int, list[object]] = {}
    if state is None:
        return replay(factory, scenario), history

    def record(ep: Any) -> None:
        history.setdefault(ep.pid, []).append(state(ep))

    return replay(watch(factory, record), scenario), history


def _delivered(run: Run) -> list[list[MessageId]]:
    return [[m.id for m in ms] for ms in run.sim.delivered]


def compare(
    a: Factory, b: Factory, scenario: Scenario, *, state: StateOf | None = None
) -> Difference | None:
    """The first difference between ``a`` and ``b`` on ``scenario``, or None."""
    run_a, hist_a = _replay_recording(a, scenario, state)
    run_b, hist_b = _replay_recording(b, scenario, state)
    runs = (run_a, run_b)
    if run_a.steps != run_b.steps:
        for i, (x, y) in enumerate(zip(run_a.steps, run_b.steps, strict=False), 1):
            if x != y:
                return Difference(scenario, runs, f"step {i}: A: {x} | B: {y}")
        return Difference(scenario, runs, "the runs took different numbers of steps")
    for pid, (da, db) in enumerate(zip(_delivered(run_a), _delivered(run_b), strict=True)):
        if da != db:
            return Difference(scenario, runs, f"P{pid} delivered {da} under A but {db} under B")
    for pid in sorted(hist_a):
        for k, (sa, sb) in enumerate(zip(hist_a[pid], hist_b.get(pid, []), strict=False), 1):
            if sa != sb:
                return Difference(
                    scenario, runs, f"P{pid} after its call {k}: A has {sa!r}, B has {sb!r}"
                )
    return None


def find_difference(
    a: Factory,
    b: Factory,
    *,
    state: StateOf | None = None,
    max_examples: int = 300,
    **scenario_options: object,
) -> Difference | None:
    """Let Hypothesis search for a scenario on which ``a`` and ``b`` differ."""
    try:
        found = find(
            scenarios(**scenario_options),  # type: ignore[arg-type]
            lambda s: compare(a, b, s, state=state) is not None,
            settings=search_settings(max_examples),
        )
    except NoSuchExample:
        return None
    return compare(a, b, found, state=state)


def rst_state(ep: Any) -> tuple[list[list[int]], list[int]]:
    """(SENT, DELIV) of an RST-like endpoint, for ``compare(state=...)``."""
    return ep.sent.tolist(), ep.deliv.tolist()
