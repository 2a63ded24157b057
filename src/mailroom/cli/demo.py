"""``mailroom demo``: Alice, Bob and Carol's messages under Unordered, RST and CBCAST.

The story is told in docs/story.md. The schedule is the bad one: Alice's
message to Carol (m1) is slow, so Bob's message to Carol (m3), which Alice's
message to Bob (m2) caused, reaches Carol first. Each step prints the event,
every process's clocks and what waits in the mail room; then a space-time
diagram and the checkers' verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, TextIO

from mailroom.core.endpoint import Endpoint
from mailroom.core.messages import MessageId
from mailroom.diagram.text import render_text
from mailroom.protocols import CBCAST, RST, Unordered
from mailroom.sim.simulation import Simulation
from mailroom.trace.checkers import Report, check
from mailroom.trace.events import Event

NAMES = ("Alice", "Bob", "Carol")
LABELS = {i: f"{name} (P{i})" for i, name in enumerate(NAMES)}
TEXTS = {
    "m1": "Let's meet at 3pm to talk about the Foo project.",
    "m2": "Can you join a meeting with Carol and me at 3pm?",
    "m3": "What's the 3pm meeting with Alice about?",
}
COLUMN = 18

INTRO = """\
mailroom demo: Alice (P0), Bob (P1) and Carol (P2) exchange messages over a
network that reorders them. Alice tells Carol about a 3pm meeting (m1), then
invites Bob (m2); Bob asks Carol about it (m3), and m3 reaches Carol before m1.
Each protocol's clerk decides when to deliver what arrives: run after run, the
steps show every event, each process's clocks and what waits in its mail room,
then a space-time diagram and the verdict of the reference checkers. The
total-order runs (sequencer, skeen, lamport) tell a second story: Alice and
Carol propose 3pm and 4pm at the same time, and everyone must deliver the two
in one order. The last run (group) tells a third: Carol's machine dies, Alice
and Bob go on in a new view, and Dave joins the running group (docs/membership.md).
The stories are told in full in docs/story.md.
"""

LEGEND = """\
  How to read the steps:
    SENT    (RST) row k, column j: how many messages this process knows P(k) sent
            to P(j); a message carries a copy of its sender's SENT
    DELIV   (RST) entry k: how many messages from P(k) this process delivered
    clock   (CBCAST) entry k: how many broadcasts of P(k) this process delivered
            (its own entry: its own broadcasts)
    mail room: messages received but held back, and what each waits for
  How to read the diagram (one row per event; "step" is the step that caused it):
    send m1 ─▶ P2   a send           m2 ▶ recv   a packet arrived
    deliver m2      handed to the application
    ┊ m3 held       m3 waits in the mail room    ✗  a delivery out of causal order
"""


def _row(title: str, cells: list[str]) -> str:
    return f"    {title:<10}" + "".join(f"{c:<{COLUMN}}" for c in cells).rstrip()


def _clocks(endpoints: list[Any]) -> list[str]:
    """The clocks of every process, as rows side by side."""
    lines = [_row("", [LABELS[ep.pid] for ep in endpoints])]
    first = endpoints[0]
    if isinstance(first, RST):
        for r in range(first.n):
            cells = [" ".join(str(v) for v in ep.sent.tolist()[r]) for ep in endpoints]
            lines.append(_row("SENT" if r == 0 else "", cells))
        lines.append(_row("DELIV", [" ".join(map(str, ep.deliv.tolist())) for ep in endpoints]))
    else:
        lines.append(_row("clock", [" ".join(map(str, ep.clock.tolist())) for ep in endpoints]))
    return lines


def _mailroom(endpoints: list[Any], names: dict[MessageId, str]) -> list[str]:
    lines = []
    for ep in endpoints:
        for p in ep.pending():
            waits = " and ".join(w.describe() for w in p.waits)
            for k, name in enumerate(NAMES):
                waits = waits.replace(f"from P{k} ", f"from {name} ").replace(
                    f"to P{k})", f"to {name})"
                )
            lines.append(
                f"    {NAMES[ep.pid]}'s mail room: {names[p.message.id]} waits for {waits}"
            )
    return lines or ["    mail rooms: empty"]


class Stepper:
    """An adversarial simulation of ``n`` processes told step by step: ``names`` are the
    story's names of the messages; ``steps``, the step that caused each trace event
    (the diagram's step column)."""

    def __init__(self, make: Callable[[int, int], Endpoint], out: TextIO, n: int = 3) -> None:
        self.sim = Simulation([make(pid, n) for pid in range(n)], adversarial=True)
        self.out = out
        self.names: dict[MessageId, str] = {}
        self.step_no = 0
        self.steps: list[int] = []

    def next_step(self, text: str, mark: int, said: Callable[[list[Event]], str]) -> None:
        """Number and print the next step: the trace events since ``mark`` belong to it;
        ``said`` words its deliveries."""
        self.step_no += 1
        self.steps += [self.step_no] * (len(self.sim.trace) - len(self.steps))
        got = [e for e in self.sim.trace[mark:] if e.kind == "deliver"]
        print(f"\n  step {self.step_no}: {text}{said(got)}", file=self.out)

    def message(self, name: str) -> MessageId:
        """The id of the message the story calls ``name``."""
        return next(m for m, n in self.names.items() if n == name)

    def rename(self, text: str) -> str:
        """``text`` with the message ids replaced by the story's names."""
        for mid, name in self.names.items():
            text = text.replace(str(mid), name)
        return text

    def epilogue(self) -> None:
        """What the endpoints have to add after the verdict (nothing by default)."""


class Told(Protocol):
    """A run told step by step: its simulation, the story's names of the messages, the
    step of each trace event; ``rename`` puts the story's names into a checker's words."""

    sim: Simulation
    names: dict[MessageId, str]
    steps: list[int]

    def rename(self, text: str) -> str: ...


def show_diagram_and_verdict(
    out: TextIO, run: Told, report: Report, labels: dict[int, str], *, marked: bool = True
) -> None:
    """The run's space-time diagram (its deliveries in violations ``marked``), then the
    checkers' verdict."""
    violations = [v for vs in report.violations.values() for v in vs] if marked else []
    print("\n  space-time diagram:\n", file=out)
    diagram = render_text(
        run.sim.trace, labels=labels, names=run.names, violations=violations, steps=run.steps
    )
    print("\n".join("  " + line for line in diagram.splitlines()), file=out)
    print("\n  verdict of the reference checkers:", file=out)
    for line in report.summary().splitlines():
        print("    " + run.rename(line), file=out)


class _Demo(Stepper):
    def _step(self, text: str, mark: int) -> None:
        def said(got: list[Event]) -> str:
            named = [self.names[e.message] for e in got]
            return f"  (delivers {', '.join(named)})" if named else ""

        self.next_step(text, mark, said)
        for line in _clocks(self.sim.endpoints) + _mailroom(self.sim.endpoints, self.names):
            print(line, file=self.out)

    def send(self, name: str, src: int, dst: int | None) -> None:
        mark = len(self.sim.trace)
        if dst is None:
            mid = self.sim.broadcast(src, TEXTS[name])
        else:
            mid = self.sim.send(src, TEXTS[name], to=dst)
        self.names[mid] = name
        where = "everyone" if dst is None else NAMES[dst]
        self._step(f'{NAMES[src]} sends {name} to {where}: "{TEXTS[name]}"', mark)

    def arrive(self, name: str, dst: int) -> None:
        mark = len(self.sim.trace)
        self.sim.arrive_message(self.message(name), dst)
        self._step(f"{name} reaches {NAMES[dst]}", mark)

    def epilogue(self) -> None:
        """What Carol's causality detector (Unordered) caught."""
        for v in getattr(self.sim.endpoints[2], "violations", []):
            print(
                f"    the causality detector at Carol: {self.names[v.message]} arrived stamped "
                f"{v.timestamp.tolist()} after she already knew {v.known.tolist()}",
                file=self.out,
            )


def _unicast_run(make: Callable[[int, int], Endpoint], out: TextIO) -> _Demo:
    d = _Demo(make, out)
    d.send("m1", 0, 2)
    d.send("m2", 0, 1)
    d.arrive("m2", 1)
    d.send("m3", 1, 2)
    d.arrive("m3", 2)  # the bad schedule: m3 overtakes m1
    d.arrive("m1", 2)
    return d


def _broadcast_run(make: Callable[[int, int], Endpoint], out: TextIO) -> _Demo:
    d = _Demo(make, out)
    d.send("m1", 0, None)
    d.send("m2", 0, None)
    d.arrive("m1", 1)
    d.arrive("m2", 1)
    d.send("m3", 1, None)
    d.arrive("m3", 0)
    d.arrive("m3", 2)  # the link Alice -> Carol is slow: m3 overtakes m1 and m2
    d.arrive("m1", 2)
    d.arrive("m2", 2)
    return d


RUNS: dict[str, tuple[str, Callable[[int, int], Endpoint], Callable[..., _Demo]]] = {
    "unordered": ("Unordered: deliver on receipt (the bug)", Unordered, _unicast_run),
    "rst": ("RST: Raynal-Schiper-Toueg causal unicast", RST, _unicast_run),
    "cbcast": ("CBCAST: causal broadcast, everyone in one chat room", CBCAST, _broadcast_run),
}


def introduce(out: TextIO) -> None:
    """What the demo shows, before the first run."""
    print(INTRO, file=out)


def banner(out: TextIO, title: str) -> None:
    """The heading of one protocol's run."""
    print("=" * 78, file=out)
    print(f"  {title}", file=out)
    print("=" * 78, file=out)


def tell(
    out: TextIO,
    protocols: list[str],
    runs: Mapping[str, tuple[str, Callable[[int, int], Any], Callable[..., Stepper]]],
    legend: str,
    promises: tuple[str, ...],
) -> int:
    """Tell each named run: its title, the legend, its steps, the diagram and the
    verdict on ``promises``, and what its endpoints add; the number of runs with violations."""
    bad_runs = 0
    for key in protocols:
        title, make, script = runs[key]
        banner(out, title)
        print(legend, file=out)
        d = script(make, out)
        report = check(d.sim.trace, promises)
        show_diagram_and_verdict(out, d, report, LABELS)
        d.epilogue()
        if not report.ok:
            bad_runs += 1
        print(file=out)
    return bad_runs


def run_demo(out: TextIO, protocols: list[str]) -> int:
    """Print the demo for each named protocol; return the number of runs with violations."""
    return tell(out, protocols, RUNS, LEGEND, ("integrity", "fifo", "causal", "liveness"))
