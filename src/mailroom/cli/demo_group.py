"""``mailroom demo --protocol group``: Carol's machine dies; the group goes on; Dave joins.

Alice, Bob and Carol broadcast with CBCAST inside a ``Group``. Carol's last
message reaches only Bob before she crashes; the survivors suspect her, the
flush hands her message to Alice, and both install view 2 without her. Then
Dave joins the running group and receives the state. docs/membership.md tells
the same story.
"""

from __future__ import annotations

from typing import TextIO

from mailroom.cli.demo import banner, show_diagram_and_verdict
from mailroom.core.actions import ViewChange
from mailroom.core.messages import MessageId
from mailroom.protocols.membership import Group
from mailroom.sim.simulation import Simulation
from mailroom.trace.checkers import VIEW_PROPERTIES, check

__all__ = ["GROUP_RUNS", "run_group_demo"]

NAMES = ("Alice", "Bob", "Carol", "Dave")
LABELS = {i: f"{name} (P{i})" for i, name in enumerate(NAMES)}

#: The runs ``--protocol`` can name, with their titles.
GROUP_RUNS = {"group": "Group membership: Carol crashes, the group goes on, Dave joins"}

LEGEND = """\
  Alice, Bob and Carol broadcast with CBCAST inside a Group (view 1 = {0, 1, 2});
  Dave (P3) is not a member yet. Carol's last message, m3, reaches only Bob;
  then her machine dies. In the diagram "V2 {0,1}" is the installation of view 2
  with members 0 and 1, "(flush)" a message the flush handed on, "✕ out" the
  end of a process that is no longer in the group.
"""


class _Story:
    """Drives the adversarial simulator and prints each step."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.names: dict[MessageId, str] = {}
        self.steps: list[int] = []
        self.step = 0
        first = (0, 1, 2)
        self.sim = Simulation(
            [Group(p, 4, "cbcast", members=first) for p in first] + [Group(3, 4, "cbcast")],
            adversarial=True,
            on_view=self._on_view,
        )

    def _on_view(self, sim: Simulation, pid: int, change: ViewChange) -> None:
        state = ""
        if change.state is not None:
            got = [self.names.get(MessageId(*m), "?") for m in change.state]
            state = f" with the state (the messages delivered so far: {', '.join(got)})"
        members = ", ".join(NAMES[m] for m in change.view.members)
        print(
            f"      {NAMES[pid]} installs view {change.view.id} [{members}]{state}", file=self.out
        )

    def say(self, text: str) -> None:
        self.step += 1
        print(f"\n  step {self.step}: {text}", file=self.out)

    def mark(self) -> None:
        self.steps += [self.step] * (len(self.sim.trace) - len(self.steps))

    def broadcast(self, name: str, pid: int) -> MessageId:
        mid = self.sim.broadcast(pid, f"{name} from {NAMES[pid]}")
        self.names[mid] = name
        return mid

    def settle(self) -> None:
        while self.sim.in_flight:
            self.sim.arrive(min(self.sim.in_flight))
        self.mark()

    def rename(self, text: str) -> str:
        return text  # the checkers' words as they are

    def delivered(self, pids: tuple[int, ...]) -> None:
        for pid in pids:
            got = [self.names.get(m.id, str(m.id)) for m in self.sim.delivered[pid]]
            print(f"      {NAMES[pid]:<6} delivered {', '.join(got) or 'nothing'}", file=self.out)


def _story(out: TextIO) -> _Story:
    d = _Story(out)
    sim = d.sim
    d.say("Alice broadcasts m1, Bob m2; everyone delivers both in view 1")
    d.broadcast("m1", 0)
    d.broadcast("m2", 1)
    d.settle()
    d.delivered((0, 1, 2))
    d.say("Carol broadcasts m3; it reaches Bob only, then Carol's machine dies")
    m3 = d.broadcast("m3", 2)
    sim.drop(sim.packets(m3, to=0)[0].id)
    sim.crash(2)
    sim.arrive_message(m3, 1)
    d.mark()
    d.delivered((0, 1))
    d.say("the failure detectors of Alice and Bob suspect Carol; Alice coordinates")
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    d.mark()
    alice = sim.endpoints[0]
    assert isinstance(alice, Group)
    print(
        f"      Alice freezes view 1 (flushing: {alice.flushing}); a message sent now "
        f"goes into view {alice.sending_view}",
        file=out,
    )
    d.broadcast("m4", 0)
    d.mark()
    d.say("the flush: Bob reports m3; both deliver what they lack, then view 2")
    d.settle()
    d.delivered((0, 1))
    d.say("Dave asks to join; Alice, the lowest member, hands over the state")
    sim.join(3, Group(3, 4, "cbcast", contacts=(0, 1)))
    d.settle()
    d.say("Dave broadcasts m5 in view 3: everyone delivers it")
    d.broadcast("m5", 3)
    d.settle()
    d.delivered((0, 1, 3))
    return d


def run_group_demo(out: TextIO, protocols: list[str]) -> int:
    """Print the group demo if asked for; return the number of runs with violations."""
    if "group" not in protocols:
        return 0
    banner(out, GROUP_RUNS["group"])
    print(LEGEND, file=out)
    d = _story(out)
    promises = ("integrity", "fifo", "causal", "liveness", *VIEW_PROPERTIES)
    report = check(d.sim.trace, promises)
    show_diagram_and_verdict(out, d, report, LABELS, marked=False)
    print(file=out)
    return 0 if report.ok else 1
