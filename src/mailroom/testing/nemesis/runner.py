"""Run a schedule of faults against a system and measure how it recovers.

If the members do not all deliver within the settle bound of the start, the group
never formed and no fault is applied (the run says so). Otherwise, for each fault
in turn: apply it, hold it, heal it, then wait (bounded) until every running member
has delivered, from every running member still sending, a message sent after the
heal; that wait is the fault's recovery time (None if the bound passed). After
the last fault the workload is left to finish and settle (bounded: ``settle`` after
the later of the last fault and the workload's planned end), the members are stopped
with SIGTERM, and the system's verdict is taken. The network, the processes, the
proxies and the clock files are torn down whatever happens.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import attrs

from mailroom.testing.nemesis.cluster import Cluster, System
from mailroom.testing.nemesis.faults import NETWORK_KINDS, Fault, check_schedule
from mailroom.testing.nemesis.network import Network
from mailroom.testing.nemesis.progress import Progress
from mailroom.testing.nemesis.verdict import Verdict

#: Poll interval of the harness while it waits (s).
POLL = 0.05


class Judged(System, Protocol):
    """A system that can judge its own run at the end."""

    def verdict(self) -> Verdict: ...


@attrs.define
class FaultResult:
    """One fault event: what it was, when, and how long the group took to deliver again."""

    fault: str
    label: str
    started: float
    healed: float
    recovery: float | None
    #: False when no client was still sending at the heal: nothing to measure with
    measured: bool = True


@attrs.define
class RunResult:
    """A whole run: the system, the seed, each fault's result and the verdict."""

    system: str
    n: int
    seed: int | None
    faults: list[FaultResult]
    verdict: Verdict
    settled: bool
    folder: str
    #: every member delivered before the first fault (False: the group never formed)
    formed: bool = True

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.define
class Timing:
    """How long the harness waits: for recovery after a heal, between faults, at the end."""

    #: the bound on a recovery: past it the fault counts as "stuck"
    recover: float = attrs.field(default=30.0, validator=attrs.validators.gt(0))
    #: the pause between a recovery and the next fault
    gap: float = attrs.field(default=0.5, validator=attrs.validators.ge(0))
    #: traffic before the first fault
    warmup: float = attrs.field(default=2.0, validator=attrs.validators.ge(0))
    #: the bound on the first deliveries and on the workload's end
    settle: float = attrs.field(default=90.0, validator=attrs.validators.gt(0))
    #: how long the clients call from the start, if known: the end's bound counts from
    #: the later of the last fault and then (a schedule of quick faults ends first)
    workload: float = attrs.field(default=0.0, validator=attrs.validators.ge(0))


def _sleep(seconds: float) -> None:
    time.sleep(max(0.0, seconds))


def _wait(predicate: Any, bound: float) -> float | None:
    """Poll ``predicate`` until true; the seconds it took, or None past ``bound``."""
    start = time.monotonic()
    while time.monotonic() - start < bound:
        if predicate():
            return time.monotonic() - start
        _sleep(POLL)
    return None


class Nemesis:
    """Applies and heals faults on a cluster (and its network)."""

    def __init__(self, cluster: Cluster, net: Network | None) -> None:
        self.cluster = cluster
        self.net = net

    def apply(self, f: Fault) -> None:
        c = self.cluster
        if f.kind in NETWORK_KINDS and f.kind != "flap":
            self._net().cut(f.cuts(c.system.n))
        elif f.kind == "kill":
            for i in f.targets:
                c.kill(i)
        elif f.kind == "pause":
            for i in f.targets:
                c.pause(i)
        elif f.kind == "clock":
            for i in f.targets:
                c.set_clock(i, f.offset)
        elif f.kind == "slow":
            for i in f.targets:
                c.set_delay(i, f.delay, f.jitter)

    def hold(self, f: Fault) -> None:
        """Wait out the fault; a flapping partition goes on and off meanwhile."""
        if f.kind != "flap":
            _sleep(f.hold)
            return
        end = time.monotonic() + f.hold
        on = False
        for _ in range(int(f.hold / max(f.every, POLL)) + 2):  # bounded by the hold
            if time.monotonic() >= end:
                break
            on = not on
            if on:
                self._net().cut(f.cuts(self.cluster.system.n))
            else:
                self._net().heal()
            _sleep(min(f.every, end - time.monotonic()))

    def heal(self, f: Fault) -> None:
        c = self.cluster
        if f.kind in NETWORK_KINDS:
            self._net().heal()
        elif f.kind == "kill":
            for i in f.targets:
                c.start(i, restart=True)
        elif f.kind == "pause":
            for i in f.targets:
                c.resume(i)
        elif f.kind == "clock":
            for i in f.targets:
                c.set_clock(i, 0.0)
        elif f.kind == "slow":
            for i in f.targets:
                c.set_delay(i, 0.0, 0.0)

    def _net(self) -> Network:
        if self.net is None:
            raise RuntimeError("network faults need the namespaces (run as root)")
        return self.net


def clock_mode(faults: Sequence[Fault]) -> str | None:
    """How members must be started for the schedule's clock faults (None: no faketime)."""
    clocks = [f for f in faults if f.kind == "clock"]
    if not clocks:
        return None
    return "mono" if any(f.mono for f in clocks) else "real"


def run_schedule(
    system: Judged,
    faults: Sequence[Fault],
    *,
    seed: int | None = None,
    timing: Timing | None = None,
    log: Any = None,
) -> RunResult:
    """Start ``system`` in its own namespaces, run ``faults``, stop it and judge it."""
    timing = timing or Timing()
    check_schedule(faults, system.n)
    system.folder.mkdir(parents=True, exist_ok=True)
    (system.folder / "schedule.txt").write_text("".join(f.describe() + "\n" for f in faults))
    results: list[FaultResult] = []
    notes: list[str] = []
    first: float | None = None
    say = log or (lambda text: None)
    proxied = any(f.kind == "slow" for f in faults)
    with _network(system, proxied) as net:
        cluster = Cluster(system, net, clock=clock_mode(faults), seed=seed or 0)
        nemesis = Nemesis(cluster, net)
        try:
            cluster.start_all()
            calls_end = time.monotonic() + timing.workload
            progress = system.progress()
            first = _formed(system, progress, timing)
            say(f"{system.name}: every member delivered after {first}")
            if first is None:
                notes.append(
                    f"the group never formed: not every member delivered from every "
                    f"member within {timing.settle:g} s of the start and again after "
                    f"the warm-up; no fault was applied"
                )
            for k, f in enumerate(faults if first is not None else []):
                results.append(_one(nemesis, progress, f, timing))
                r = results[-1]
                say(f"[{k + 1}/{len(faults)}] {f.describe()}: recovery {r.recovery}")
                _sleep(timing.gap)
            bound = timing.settle + max(0.0, calls_end - time.monotonic())
            settled = _wait(lambda: system.settled(progress), bound) is not None
            for i, code in sorted(cluster.exited().items()):
                notes.append(f"P{i} exited by itself with code {code}: {_last_line(system, i)}")
            cluster.stop()
        finally:
            cluster.close()
    verdict = system.verdict()
    verdict.notes[:0] = notes
    if not settled:
        verdict.notes.append(f"did not settle within {bound:.0f} s: {progress.summary()}")
        unsettled(verdict)
    result = RunResult(
        system.name,
        system.n,
        seed,
        results,
        verdict,
        settled,
        str(system.folder),
        formed=first is not None,
    )
    (system.folder / "result.json").write_text(json.dumps(result.to_dict(), indent=1))
    return result


def _formed(system: System, progress: Progress, timing: Timing) -> float | None:
    """Seconds until every member delivered from every member, and did again after the
    warm-up (a member excluded at the start fails the second wait); None if not."""
    everyone = range(system.n)
    first = _wait(lambda: progress.caught_up({}, everyone), timing.settle)
    if first is None:
        return None
    _sleep(timing.warmup)
    marks = progress.marks()
    again = _wait(lambda: progress.caught_up(marks, everyone), timing.recover)
    return None if again is None else first


def _last_line(system: System, i: int) -> str:
    """The last line member ``i`` printed (its error, when it exited by itself)."""
    try:
        lines = (system.folder / f"out{i}.log").read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def unsettled(verdict: Verdict) -> None:
    """A run stopped with messages in flight: final states that differ prove nothing, so
    they are noted, not counted."""
    if verdict.divergent:
        verdict.notes.append(
            f"{verdict.divergent} final state(s) differ, compared with "
            "messages still in flight: not counted"
        )
        verdict.divergent = 0


def _one(nemesis: Nemesis, progress: Progress, f: Fault, timing: Timing) -> FaultResult:
    start = time.monotonic()
    nemesis.apply(f)
    nemesis.hold(f)
    nemesis.heal(f)
    healed = time.monotonic()
    marks = progress.marks()
    running = nemesis.cluster.running
    if not progress.sending(running()):
        return FaultResult(f.describe(), f.label(), start, healed, None, measured=False)
    recovery = _wait(lambda: progress.caught_up(marks, running()), timing.recover)
    return FaultResult(f.describe(), f.label(), start, healed, recovery)


@contextlib.contextmanager
def _network(system: System, proxied: bool) -> Iterator[Network]:
    with Network(system.n, [system.port] * system.n, proxied=proxied) as net:
        yield net


__all__ = ["FaultResult", "Judged", "Nemesis", "RunResult", "Timing", "clock_mode", "run_schedule"]
