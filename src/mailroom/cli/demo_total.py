"""``mailroom demo --protocol sequencer|skeen|lamport``: two concurrent broadcasts.

Alice, Bob and Carol each see the two messages arrive in a different order, and
every one of them delivers the two in the same order. Each step prints the
event, what was delivered, the Lamport clocks (Skeen, Lamport) and what waits
in the mail room; then a space-time diagram and the checkers' verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

from mailroom.cli.demo import NAMES, Stepper, tell
from mailroom.core.endpoint import Endpoint
from mailroom.core.messages import MessageId
from mailroom.protocols.total import (
    LamportAck,
    LamportTotalOrder,
    Sequencer,
    SequencerOrder,
    Skeen,
    SkeenFinal,
    SkeenProposal,
)
from mailroom.sim.network import InFlight
from mailroom.trace.events import Event

TEXTS = {"m1": "Let's meet at 3pm.", "m2": "Let's meet at 4pm."}

LEGEND = """\
  How to read the steps:
    Lamport clocks  (Skeen, Lamport) each process's logical clock after the step
    + ... waits     a message entered a mail room, and what it waits for
    ~ ... now waits what a waiting message waits for changed
    - ... no longer waits   it left the mail room (it was delivered)
  In the diagram, "step" is the step that caused each event, and
  "┊ m1 held" means m1 waits in that process's mail room.
"""

#: (message name, destination) arrivals of the packets carrying the messages, in order
Script = list[tuple[str, int]]


class _TotalDemo(Stepper):
    def __init__(self, make: Callable[[int, int], Endpoint], out: TextIO) -> None:
        super().__init__(make, out)
        self.waiting: list[str] = []

    def rename(self, text: str) -> str:
        for mid, name in self.names.items():
            text = text.replace(str(mid), name)
        for k, who in enumerate(NAMES):
            text = text.replace(f"P{k}", who)
        return text

    def _step(self, text: str, mark: int) -> None:
        def said(got: list[Event]) -> str:
            named = [f"{NAMES[e.process]} delivers {self.names[e.message]}" for e in got]
            return f"  ({'; '.join(named)})" if named else ""

        self.next_step(text, mark, said)
        tops: list[Any] = [getattr(ep, "top", ep) for ep in self.sim.endpoints]
        if all(hasattr(t, "clock") for t in tops):
            clocks = ", ".join(f"{NAMES[t.pid]} {t.clock}" for t in tops)
            print(f"    Lamport clocks: {clocks}", file=self.out)
        waiting = [
            f"{NAMES[ep.pid]}'s mail room: {self.rename(p.explain())}"
            for ep in self.sim.endpoints
            for p in ep.pending()
        ]
        # only what changed: new waits, changed waits, and messages that left
        before = {line.split(" waits ")[0]: line for line in self.waiting}
        now = {line.split(" waits ")[0]: line for line in waiting}
        for key, line in now.items():
            if key not in before:
                print(f"    + {line}", file=self.out)
            elif before[key] != line:
                print(f"    ~ {line.replace(' waits ', ' now waits ', 1)}", file=self.out)
        for key in before:
            if key not in now:
                print(f"    - {key} no longer waits", file=self.out)
        if waiting and waiting == self.waiting:
            print(f"    mail rooms unchanged ({len(waiting)} waiting)", file=self.out)
        self.waiting = waiting

    def broadcast(self, name: str, src: int) -> None:
        mark = len(self.sim.trace)
        self.names[self.sim.broadcast(src, TEXTS[name])] = name
        self._step(f'{NAMES[src]} broadcasts {name}: "{TEXTS[name]}"', mark)

    def arrive(self, name: str, dst: int) -> None:
        mark = len(self.sim.trace)
        p = self.sim.packets(self.message(name), dst)[0]
        inner = self._arrive(p)
        kind = "request" if type(inner).__name__ == "SequencerRequest" else self._describe(inner)
        self._step(f"{name} ({kind}) from {NAMES[p.src]} reaches {NAMES[dst]}", mark)

    def _arrive(self, p: InFlight) -> Any:
        """Packet ``p`` arrives; the innermost packet it carries (below Reliable, FIFO)."""
        self.sim.arrive(p.id)
        inner: Any = p.packet
        while hasattr(inner, "payload") and not isinstance(inner.payload, str):
            inner = inner.payload
        return inner

    def _describe(self, packet: object) -> str:
        """A control packet in words: what it says about which message."""
        origin, seq = getattr(packet, "origin", None), getattr(packet, "seq", None)
        name = "?"
        if isinstance(origin, int) and isinstance(seq, int):
            name = self.names.get(MessageId(origin, seq), "?")
        if isinstance(packet, SkeenProposal):
            return f"proposal {packet.number} for {name}"
        if isinstance(packet, SkeenFinal):
            return f"final number {packet.number} for {name}"
        if isinstance(packet, LamportAck):
            return f"acknowledgement of {name} stamped {packet.ts}"
        if isinstance(packet, SequencerOrder):
            return f"number {packet.number}"
        return "message"

    def order(self) -> None:
        """The order in which each process delivered the messages."""
        print("\n  delivery order:", file=self.out)
        for pid, got in enumerate(self.sim.delivered):
            print(f"    {NAMES[pid]:<6} {', '.join(self.names[m.id] for m in got)}", file=self.out)

    def drain(self) -> None:
        """Every other packet arrives, oldest first."""
        while self.sim.in_flight:
            mark = len(self.sim.trace)
            p = self.sim.packets()[0]
            what = self._describe(self._arrive(p))
            if p.message_id is not None:
                what = f"{self.names[p.message_id]} ({what})"
            self._step(f"{what} from {NAMES[p.src]} reaches {NAMES[p.dst]}", mark)


def _peer_run(make: Callable[[int, int], Endpoint], out: TextIO) -> _TotalDemo:
    d = _TotalDemo(make, out)
    d.broadcast("m1", 0)
    d.broadcast("m2", 2)
    d.arrive("m2", 1)  # Bob gets m2 first...
    d.arrive("m1", 1)
    d.arrive("m2", 0)  # ...Alice has m1 (her own) first, Carol has m2 (her own) first
    d.arrive("m1", 2)
    d.drain()
    d.order()
    return d


def _sequencer_run(make: Callable[[int, int], Endpoint], out: TextIO) -> _TotalDemo:
    d = _TotalDemo(make, out)
    d.broadcast("m1", 1)
    d.broadcast("m2", 2)
    d.arrive("m2", 0)  # Carol's request reaches the sequencer (Alice) first: number 1
    d.arrive("m1", 0)
    d.arrive("m1", 1)  # Bob gets number 2 (his own m1) first and must hold it
    d.arrive("m2", 2)
    d.arrive("m1", 2)
    d.arrive("m2", 1)
    d.drain()
    d.order()
    return d


def _lamport(pid: int, n: int) -> Endpoint:
    return LamportTotalOrder.stack(pid, n)


TOTAL_RUNS: dict[str, tuple[str, Callable[[int, int], Any], Callable[..., _TotalDemo]]] = {
    "sequencer": ("Sequencer: Alice (P0) numbers every message", Sequencer, _sequencer_run),
    "skeen": ("Skeen: proposals, then the largest is final", Skeen, _peer_run),
    "lamport": ("Lamport: acknowledge to all, over FIFO channels", _lamport, _peer_run),
}


def run_total_demo(out: TextIO, protocols: list[str]) -> int:
    """Print the demo for each named protocol; return the number of runs with violations."""
    return tell(out, protocols, TOTAL_RUNS, LEGEND, ("integrity", "total", "liveness"))
