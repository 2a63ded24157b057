"""The fault model: what the nemesis does to a group, scripted or drawn from a seed.

A schedule is a list of faults applied one after another; each is applied, held
for ``hold`` seconds, healed, and then the harness waits for the group to deliver
again before the next. Every fault has one line of text, which is also the
scripted form, so a drawn schedule can be printed, edited and replayed::

    isolate 2 for 3               every link to and from P2 cut, both ways
    partition 0,1 | 2,3,4 for 4   two sides that cannot reach each other
    one-way 0 -> 1,2 for 3        P0's packets to P1 and P2 dropped; theirs reach P0
    bridge 0,1 | 2 | 3,4 for 3    the sides cut from each other, P2 reaches both
    flap 0 | 1,2 every 0.5 for 4  that partition on and off every 0.5 s
    kill 1 for 2                  kill -9 P1, restart it from its checkpoint 2 s later
    pause 0 for 4                 SIGSTOP P0, SIGCONT 4 s later
    clock 2 +30 for 3             P2's wall clock 30 s ahead, then back (``mono``
                                  after the offset moves its monotonic clock too)
    slow 0 0.2 jitter 0.05 for 4  P0's outgoing links hold each chunk 0.2-0.25 s

Lines are separated by newlines or ``;``; ``#`` starts a comment.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import attrs

from mailroom.core.errors import MailroomError
from mailroom.testing.nemesis.network import Cut

#: Every kind of fault, in the order the results table lists them.
KINDS = (
    "isolate",
    "partition",
    "one-way",
    "bridge",
    "flap",
    "kill",
    "pause",
    "clock",
    "slow",
)
NETWORK_KINDS = ("isolate", "partition", "one-way", "bridge", "flap")


class ScheduleError(MailroomError, ValueError):
    """A scripted schedule line that cannot be read (the message names it)."""


def _pids(text: str) -> tuple[int, ...]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() for t in items):
        raise ScheduleError(f"{text!r} is not a comma-separated list of pids")
    return tuple(sorted({int(t) for t in items}))


def _show(pids: Sequence[int]) -> str:
    return ",".join(str(p) for p in pids)


def _num(x: float) -> str:
    return f"{x:g}"


@attrs.frozen
class Fault:
    """One fault: its ``kind``, the ``sides`` it names (member lists), how long it is
    held, and its parameters (clock ``offset`` and ``mono``; link ``delay``,
    ``jitter``; flap ``every``)."""

    kind: str
    sides: tuple[tuple[int, ...], ...]
    hold: float
    offset: float = 0.0
    mono: bool = False
    delay: float = 0.0
    jitter: float = 0.0
    every: float = 0.0

    @property
    def targets(self) -> tuple[int, ...]:
        """The members a process fault (kill, pause, clock, slow) acts on."""
        return self.sides[0]

    def cuts(self, n: int) -> set[Cut]:
        """The links a network fault cuts among ``n`` members."""
        everyone = set(range(n))
        if self.kind == "isolate":
            (alone,) = self.sides
            rest = everyone - set(alone)
            return {Cut(a, b) for a in alone for b in rest} | {
                Cut(b, a) for a in alone for b in rest
            }
        if self.kind in ("partition", "flap"):
            a, b = self.sides
            return {Cut(x, y) for x in a for y in b} | {Cut(y, x) for x in a for y in b}
        if self.kind == "one-way":
            src, dst = self.sides
            return {Cut(x, y, one_way=True) for x in src for y in dst}
        if self.kind == "bridge":
            a, _, b = self.sides
            return {Cut(x, y) for x in a for y in b} | {Cut(y, x) for x in a for y in b}
        return set()

    def describe(self) -> str:
        """The fault as one line of a scripted schedule (``parse_schedule`` reads it)."""
        s = [_show(side) for side in self.sides]
        tail = f"for {_num(self.hold)}"
        if self.kind == "partition":
            return f"partition {s[0]} | {s[1]} {tail}"
        if self.kind == "one-way":
            return f"one-way {s[0]} -> {s[1]} {tail}"
        if self.kind == "bridge":
            return f"bridge {s[0]} | {s[1]} | {s[2]} {tail}"
        if self.kind == "flap":
            return f"flap {s[0]} | {s[1]} every {_num(self.every)} {tail}"
        if self.kind == "clock":
            sign = "+" if self.offset >= 0 else "-"
            mono = " mono" if self.mono else ""
            return f"clock {s[0]} {sign}{_num(abs(self.offset))}{mono} {tail}"
        if self.kind == "slow":
            return f"slow {s[0]} {_num(self.delay)} jitter {_num(self.jitter)} {tail}"
        return f"{self.kind} {s[0]} {tail}"

    def label(self) -> str:
        """The row name in the results table: the kind (and ``mono`` for clock faults that
        move the monotonic clock too)."""
        return "clock mono" if self.kind == "clock" and self.mono else self.kind


_NUM = r"(\d+(?:\.\d+)?)"
_LIST = r"(\d+(?:\s*,\s*\d+)*)"
_PATTERNS: dict[str, str] = {
    "isolate": rf"isolate {_LIST}",
    "kill": rf"kill {_LIST}",
    "pause": rf"pause {_LIST}",
    "partition": rf"partition {_LIST} \| {_LIST}",
    "one-way": rf"one-way {_LIST} -> {_LIST}",
    "bridge": rf"bridge {_LIST} \| {_LIST} \| {_LIST}",
    "flap": rf"flap {_LIST} \| {_LIST} every {_NUM}",
    "clock": rf"clock {_LIST} ([+-]){_NUM}( mono)?",
    "slow": rf"slow {_LIST} {_NUM}(?: jitter {_NUM})?",
}


def parse_fault(line: str) -> Fault:
    """One scripted line as a ``Fault``; ScheduleError says what is wrong."""
    text = " ".join(line.split())
    head, sep, hold = text.rpartition(" for ")
    kind = text.split(" ", 1)[0]
    if not sep or kind not in _PATTERNS or not re.fullmatch(_NUM, hold):
        raise ScheduleError(
            f"cannot read fault {line.strip()!r}: expected '<kind> ... for SECONDS'"
            f" with kind one of {', '.join(KINDS)}"
        )
    m = re.fullmatch(_PATTERNS[kind], head)
    if m is None:
        raise ScheduleError(f"cannot read fault {line.strip()!r} (see the fault model's forms)")
    g = m.groups()
    held = float(hold)
    if kind == "clock":
        offset = float(g[2]) * (1 if g[1] == "+" else -1)
        return Fault(kind, (_pids(g[0]),), held, offset=offset, mono=g[3] is not None)
    if kind == "slow":
        return Fault(kind, (_pids(g[0]),), held, delay=float(g[1]), jitter=float(g[2] or 0))
    if kind == "flap":
        return Fault(kind, (_pids(g[0]), _pids(g[1])), held, every=float(g[2]))
    return Fault(kind, tuple(_pids(x) for x in g), held)


def parse_schedule(text: str) -> list[Fault]:
    """A scripted schedule: one fault per line (or per ``;``), ``#`` comments."""
    faults = []
    for raw in re.split(r"[;\n]", text):
        line = raw.split("#", 1)[0].strip()
        if line:
            faults.append(parse_fault(line))
    return faults


def check_schedule(faults: Sequence[Fault], n: int) -> None:
    """ScheduleError if a fault names a member outside ``0..n-1`` or the same one twice,
    or if clock faults mix the two clocks (libfaketime is set up per process start)."""
    for f in faults:
        named = [p for side in f.sides for p in side]
        if any(p >= n for p in named):
            raise ScheduleError(f"{f.describe()!r} names a member outside 0..{n - 1}")
        if len(named) != len(set(named)):
            raise ScheduleError(f"{f.describe()!r} names a member on two sides")
        if f.kind == "bridge" and len(f.sides[1]) != 1:
            raise ScheduleError(f"{f.describe()!r}: a bridge is one member")
    if len({f.mono for f in faults if f.kind == "clock"}) > 1:
        raise ScheduleError(
            "clock faults of one run move either the wall clock only or "
            "the monotonic clock too ('mono'), not both"
        )


def draw(rng: random.Random, kind: str, n: int, suspect_after: float, mono: bool = False) -> Fault:
    """One fault of ``kind`` for ``n`` members, its targets and timing drawn from ``rng``.

    Process faults hit a minority (so a majority can go on); pauses and kills last
    longer than the suspicion timeout (the member is excluded and comes back),
    other faults between half and twice it.
    """
    pids = list(range(n))
    rng.shuffle(pids)
    minority = max(1, (n - 1) // 2)
    k = rng.randint(1, minority)
    hold = round(rng.uniform(0.5, 2.0) * suspect_after, 1)
    long_hold = round(rng.uniform(1.5, 3.0) * suspect_after, 1)
    if kind == "isolate":
        return Fault(kind, (tuple(sorted(pids[:1])),), hold)
    if kind in ("partition", "flap"):
        a, b = tuple(sorted(pids[:k])), tuple(sorted(pids[k:]))
        every = round(rng.uniform(0.2, 1.0) * suspect_after, 1) if kind == "flap" else 0.0
        return Fault(kind, (a, b), long_hold if kind == "flap" else hold, every=every)
    if kind == "one-way":
        return Fault(kind, (tuple(sorted(pids[:k])), tuple(sorted(pids[k:]))), hold)
    if kind == "bridge":
        if n < 3:
            raise ScheduleError("a bridge partition needs at least 3 members")
        half = (n - 1) // 2
        sides = (pids[:half], pids[half : half + 1], pids[half + 1 :])
        return Fault(kind, tuple(tuple(sorted(s)) for s in sides), hold)
    if kind in ("kill", "pause"):
        return Fault(kind, (tuple(sorted(pids[:k])),), long_hold)
    if kind == "clock":
        offset = rng.choice([-1, 1]) * rng.choice([5, 30, 300])
        return Fault(kind, (tuple(sorted(pids[:1])),), hold, offset=offset, mono=mono)
    if kind == "slow":
        delay = round(rng.uniform(0.05, 0.5) * suspect_after, 2)
        jitter = round(delay / 4, 2)
        return Fault(kind, (tuple(sorted(pids[:k])),), hold, delay=delay, jitter=jitter)
    raise ScheduleError(f"unknown fault kind {kind!r}; choose from {', '.join(KINDS)}")


def random_schedule(
    seed: int,
    n: int,
    count: int,
    kinds: Sequence[str] = KINDS,
    suspect_after: float = 1.0,
    mono: bool = False,
) -> list[Fault]:
    """``count`` faults drawn from ``kinds`` by a generator seeded with ``seed``; each
    kind comes once in every round of ``len(kinds)`` faults, in a drawn order. Clock
    faults move the monotonic clock too with ``mono`` (a run's members are started for
    one or the other: see ``check_schedule``)."""
    rng = random.Random(seed)
    kinds = [k for k in kinds if n >= 3 or k != "bridge"]
    out: list[Fault] = []
    for _ in range(count):  # bounded: one fault per turn
        if not out or len(out) % len(kinds) == 0:
            order = list(kinds)
            rng.shuffle(order)
        out.append(draw(rng, order[len(out) % len(kinds)], n, suspect_after, mono))
    return out


__all__ = [
    "KINDS",
    "NETWORK_KINDS",
    "Fault",
    "ScheduleError",
    "check_schedule",
    "draw",
    "parse_fault",
    "parse_schedule",
    "random_schedule",
]
