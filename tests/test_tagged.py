"""Tagged causal stable broadcast: the callback-model example, its two pitfalls, precise
tags and causal stability under Hypothesis-chosen schedules, and NaiveTagged caught."""

from __future__ import annotations

import json
from collections import deque
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import strategies as st

from mailroom import (
    Deliver,
    Fifo,
    LocalError,
    Message,
    MessageId,
    RemoteError,
    Stable,
    Stack,
    TaggedCausalBroadcast,
    TaggedMessage,
    Transmit,
    VectorClock,
)
from mailroom.core.endpoint import Endpoint
from mailroom.protocols import StabilityAck, TaggedPacket
from mailroom.sim import Simulation
from mailroom.testing import (
    NaiveTagged,
    Op,
    Scenario,
    replay,
    scenarios,
    stability_violations,
    tag_violations,
    unstable_violations,
)
from mailroom.trace import Event, check
from tests.strategies import assert_restore_midway_changes_nothing

CAUSAL = ("integrity", "fifo", "causal", "liveness")


class Explicit(TaggedCausalBroadcast):
    """Tagged causal broadcast with explicit consumption (precise tags under batching)."""

    def __init__(self, pid: int, n: int, *, ack_every: int | None = 1) -> None:
        super().__init__(pid, n, ack_every=ack_every, consume="explicit")


A, B, X = MessageId(0, 1), MessageId(1, 1), MessageId(2, 1)


def vc(*entries: int) -> VectorClock:
    return VectorClock(entries)


# -- the pitfalls, concretely ---------------------------------------------------------


def callback_model_run(cls: type[TaggedCausalBroadcast]) -> Simulation:
    """P0 broadcasts a; P1 delivers a and broadcasts b; b reaches P2 before a, so P2
    delivers the batch [a, b]. P2's application replies x from inside its handling
    of a (the callback model): x is concurrent with b."""

    def reply(sim: Simulation, pid: int, m: Message) -> None:
        if pid == 2 and m.payload == "a":
            sim.broadcast(2, "x")

    sim = Simulation([cls(p, 3) for p in range(3)], adversarial=True, on_deliver=reply)
    sim.broadcast(0, "a")
    sim.arrive_message(A, 1)
    sim.broadcast(1, "b")
    sim.arrive_message(B, 2)
    sim.arrive_message(A, 2)
    return sim


def test_callback_model_tags_x_precisely() -> None:
    sim = callback_model_run(Explicit)
    assert [(m.payload, m.tag) for m in sim.delivered[2]] == [  # type: ignore[attr-defined]
        ("a", vc(1, 0, 0)),
        ("x", vc(1, 0, 1)),  # P2 had seen a, and only a, when it sent x
        ("b", vc(1, 1, 0)),
    ]
    assert vc(1, 0, 1).concurrent(vc(1, 1, 0))
    # the welcome side-effect: x does not wait for b at P0
    actions = sim.arrive_message(X, 0)
    assert [a.message.id for a in actions if isinstance(a, Deliver)] == [X]
    assert tag_violations(sim) == []


def test_callback_model_naive_over_orders() -> None:
    sim = callback_model_run(NaiveTagged)
    x = sim.delivered[2][1]
    assert isinstance(x, TaggedMessage) and x.tag == vc(1, 1, 1)  # claims x saw b
    assert vc(1, 1, 0) < x.tag
    # ...so P0 makes x wait for b, which it does not depend on
    assert sim.arrive_message(X, 0) == []
    assert [p.explain() for p in sim.endpoints[0].pending()] == [
        "P2#1 waits for 1 message from P1 (seq 1)"
    ]
    (v,) = tag_violations(sim)
    assert v.messages == (B, X) and "over-orders" in v.reason
    assert check(sim.trace, ["causal"]).ok  # over-ordering does not break causal delivery


def test_two_thread_model() -> None:
    """Deliveries wait in a queue the application has not consumed: a send made after
    taking a, with b still queued, is tagged with a only."""
    p = [Explicit(i, 3) for i in range(3)]
    naive = NaiveTagged(2, 3)
    pa = p[0].broadcast("a")[0].packet
    p[1].receive(pa)
    p[1].consume(A)
    pb = p[1].broadcast("b")[0].packet
    for ep in (p[2], naive):
        assert ep.receive(pb) == []
        out = ep.receive(pa)
        assert [a.message.id for a in out if isinstance(a, Deliver)] == [A, B]
        assert ep.unconsumed() == [A, B]
        ep.consume(A)  # the application thread takes a; b is still queued
    tag = p[2].broadcast("x")[-1].message.tag  # type: ignore[union-attr]
    assert tag == vc(1, 0, 1)
    assert naive.broadcast("x")[-1].message.tag == vc(1, 1, 1)  # type: ignore[union-attr]
    assert p[2].unconsumed() == [B]
    p[2].consume(B)
    assert p[2].clock == vc(1, 1, 1)
    assert p[2].delivered == vc(1, 1, 1)


def test_stability_and_garbage_collection() -> None:
    sim = callback_model_run(Explicit)
    while sim.in_flight:
        sim.arrive(min(sim.in_flight))
    assert sim.stable == [[A, B, X], [A, B, X], [A, X, B]]  # each in its delivery order
    assert stability_violations(sim) == []
    assert unstable_violations(sim) == []
    for ep in sim.endpoints:
        assert isinstance(ep, TaggedCausalBroadcast)
        assert ep.retained() == 0
        assert ep.stable_clock == vc(1, 1, 1)


def test_single_process_messages_are_stable_at_once() -> None:
    ep = Explicit(0, 1)
    out = ep.broadcast("solo")
    assert out == [
        Deliver(TaggedMessage(MessageId(0, 1), 0, "solo", vc(1))),
        Stable((MessageId(0, 1),)),
    ]
    assert ep.retained() == 0


def test_acks_spread_knowledge_and_announce_on_demand() -> None:
    p0, p1 = Explicit(0, 2), Explicit(1, 2, ack_every=None)
    packet = p0.broadcast("a")[0].packet
    (deliver,) = p1.receive(packet)
    # P1 knows both applications have seen a (P0 sent it); no ack is sent yet
    assert p1.consume(deliver.message.id) == [Stable((A,))]
    assert p0.retained() == 1 and p0.stable_clock == vc(0, 0)  # P0 cannot know that
    (ack,) = p1.announce()
    assert ack == Transmit(0, StabilityAck(1, (1, 0)), None)
    assert p0.receive(ack.packet) == [Stable((A,))]
    assert p0.retained() == p1.retained() == 0


# -- bad input ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "packet",
    [
        TaggedPacket(0, (1, 0), "wrong dimension"),
        TaggedPacket(0, (1, 0, 0, 0), "wrong dimension"),
        TaggedPacket(0, (1, 0, 1), "claims P2 broadcast once; it has not"),
        TaggedPacket(0, (0, 0, 0), "own entry zero"),
        TaggedPacket(2, (0, 0, 1), "an echo of a broadcast P2 never made"),
        TaggedPacket(7, (1, 0, 0), "unknown sender"),
        TaggedPacket(0, (1, -1, 0), "negative"),
        TaggedPacket(0, (1, "x", 0), "not a counter"),
        StabilityAck(0, (0, 0, 3)),
        StabilityAck(0, (1, 1)),
        StabilityAck(2, (1, 0, 0)),  # "from P2" and claims P2 saw more than it has
        "not a packet",
    ],
)
def test_bad_packets_are_remote_errors_and_change_nothing(packet: object) -> None:
    p1 = Explicit(1, 3)
    p2 = Explicit(2, 3)
    pa = Explicit(0, 3).broadcast("a")[0].packet
    p1.consume_all()
    p2.receive(p1.broadcast("b")[1].packet)  # P2 has a delivered, unconsumed message
    before = p2.snapshot()
    with pytest.raises(RemoteError):
        p2.receive(packet)
    assert p2.snapshot() == before
    assert p2.receive(pa)  # and it carries on


def test_duplicates_and_echoes_are_dropped_and_counted() -> None:
    p0, p1 = Explicit(0, 2), Explicit(1, 2)
    packet = p0.broadcast("a")[0].packet
    assert len(p1.receive(packet)) == 1
    assert p1.receive(packet) == []
    assert p1.duplicates == 1 and p1.unconsumed() == [A]
    (ack,) = [t.packet for t in p1.consume_all() if isinstance(t, Transmit)]
    before = p1.snapshot()
    assert p1.receive(ack) == []  # the echo of its own acknowledgement
    assert p0.receive(packet) == []  # the echo of its own broadcast
    assert p1.duplicates == 2 and p0.duplicates == 1
    assert {**p1.snapshot(), "duplicates": 1} == before


def test_consume_misuse_is_a_local_error() -> None:
    p0, p1 = Explicit(0, 2), Explicit(1, 2)
    with pytest.raises(LocalError):
        p1.consume()
    p1.receive(p0.broadcast("a")[0].packet)
    p1.receive(p0.broadcast("b")[0].packet)
    with pytest.raises(LocalError):
        p1.consume(MessageId(0, 2))  # not the next one
    with pytest.raises(LocalError):
        p1.consume(MessageId(1, 1))  # P1 sent nothing yet
    p1.consume(MessageId(0, 1))
    assert p1.unconsumed() == [MessageId(0, 2)]
    with pytest.raises(LocalError):
        Explicit(0, 2, ack_every=0)


# -- Hypothesis: the callback model in the simulator ----------------------------------


def replier(sim: Simulation, pid: int, m: Message) -> None:
    """A delivery of a message marked "!" from another process makes its receiver
    reply from inside its delivery handling (the callback model)."""
    if pid != m.sender and isinstance(m.payload, str) and m.payload.endswith("!"):
        sim.broadcast(pid, f"re:{m.payload[:-1]}@P{pid}")


@st.composite
def callback_scenarios(draw: st.DrawFn, **options: Any) -> Scenario:
    s: Scenario = draw(scenarios(mode="broadcast", **options))
    marks = draw(st.lists(st.booleans(), min_size=len(s.ops), max_size=len(s.ops)))
    ops = tuple(
        attrs.evolve(op, payload=op.payload + ("!" if mark else ""))
        for op, mark in zip(s.ops, marks, strict=True)
    )
    return attrs.evolve(s, ops=ops)


def all_violations(sim: Simulation) -> list[str]:
    found = [v.explain() for v in check(sim.trace, CAUSAL).violations.values() for v in v]
    found += [v.explain() for v in tag_violations(sim) + stability_violations(sim)]
    return found


@given(callback_scenarios(max_ops=6))
@settings(max_examples=100)
def test_tagged_is_causal_precise_stable_and_collects_garbage(s: Scenario) -> None:
    run = replay(Explicit, s, on_deliver=replier)
    sim = run.sim
    assert run.errors == ()  # no packet was rejected
    assert all_violations(sim) == [], run.describe()
    # the network drained fairly: everything is stable everywhere, nothing retained
    assert [v.explain() for v in unstable_violations(sim)] == []
    for ep in sim.endpoints:
        assert isinstance(ep, TaggedCausalBroadcast)
        assert ep.retained() == 0 and ep.pending() == []


@pytest.mark.parametrize("mode", ["explicit", "delivery"])
@given(callback_scenarios(max_ops=4, max_choices=30), st.data())
@settings(max_examples=40)
def test_snapshot_restore_midway_changes_nothing(
    mode: str, s: Scenario, data: st.DataObject
) -> None:
    """Every process restarts from its snapshot mid-run (buffers, acknowledgements and
    stability reports in the air, replies sent from handlers): the run ends exactly
    as without."""

    def make(pid: int, n: int) -> TaggedCausalBroadcast:
        return TaggedCausalBroadcast(pid, n, consume=mode)

    assert_restore_midway_changes_nothing(make, s, data, on_deliver=replier)


def test_naive_tagged_is_caught_over_ordering_in_the_callback_model() -> None:
    def over_orders(s: Scenario) -> bool:
        return bool(tag_violations(replay(NaiveTagged, s, on_deliver=replier).sim))

    found = find(
        callback_scenarios(n=3, max_ops=4, duplicate=False),
        over_orders,
        settings=settings(
            max_examples=2000,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    naive = replay(NaiveTagged, found, on_deliver=replier).sim
    assert all("over-orders" in v.reason for v in tag_violations(naive))
    assert check(naive.trace, CAUSAL).ok  # causal delivery itself still holds
    assert all_violations(replay(Explicit, found, on_deliver=replier).sim) == []


# -- Hypothesis: the two-thread model ---------------------------------------------------


class TwoThreads:
    """Middleware and application as independent threads: deliveries wait in a queue
    per process until the application takes them (the trace's deliver event), and
    the application may send at any time, also while deliveries are queued."""

    run_name = "two-threads"

    def __init__(self, factory: type[TaggedCausalBroadcast], n: int) -> None:
        self.n = n
        self.endpoints = [factory(p, n) for p in range(n)]
        self.queues: list[deque[Message]] = [deque() for _ in range(n)]
        self.wire: dict[int, tuple[int, object]] = {}
        self.trace: list[Event] = []
        self.delivered: list[list[Message]] = [[] for _ in range(n)]
        self.stable: list[list[MessageId]] = [[] for _ in range(n)]
        self.stable_log: list[tuple[int, MessageId, int]] = []
        self._packets = 0

    def _record(self, pid: int, kind: str, m: Message) -> None:
        seq = sum(1 for e in self.trace if e.process == pid) + 1
        dest = tuple(range(self.n))
        self.trace.append(Event(self.run_name, pid, seq, kind, m.id, m.sender, dest))

    def _apply(self, pid: int, actions: list[Any]) -> None:
        for a in actions:
            if isinstance(a, Transmit):
                self._packets += 1
                self.wire[self._packets] = (a.to, a.packet)
            elif isinstance(a, Deliver):
                if a.message.sender == pid:  # own message: seen when sent
                    self._record(pid, "deliver", a.message)
                    self.delivered[pid].append(a.message)
                else:
                    self.queues[pid].append(a.message)
            elif isinstance(a, Stable):
                self.stable[pid] += a.messages
                self.stable_log += [(pid, m, len(self.trace)) for m in a.messages]

    def broadcast(self, pid: int, payload: str) -> None:
        ep = self.endpoints[pid]
        m = Message(MessageId(pid, ep.sent_count + 1), pid, payload)
        self._record(pid, "send", m)
        self._apply(pid, ep.broadcast(payload))

    def arrive(self, packet_id: int) -> None:
        to, packet = self.wire.pop(packet_id)
        self._apply(to, self.endpoints[to].receive(packet))
        self.endpoints[to].defer()  # queued for the application thread, not handed to it

    def take(self, pid: int) -> None:
        m = self.queues[pid].popleft()
        follow = self.endpoints[pid].consume(m.id)
        self._record(pid, "deliver", m)
        self.delivered[pid].append(m)
        self._apply(pid, follow)
        if m.payload.endswith("!"):
            self.broadcast(pid, f"re:{m.payload[:-1]}@P{pid}")

    def run(self, ops: list[tuple[int, str]], choices: list[int], drain: bool = True) -> TwoThreads:
        step = 0
        while drain or step < len(choices):
            events: list[tuple[str, int]] = [("op", 0)] if ops else []
            events += [("arrive", k) for k in sorted(self.wire)]
            events += [("take", p) for p in range(self.n) if self.queues[p]]
            if not events:
                return self
            choice = choices[step] if step < len(choices) else 0
            step += 1
            kind, arg = events[choice % len(events)]
            if kind == "op":
                self.broadcast(*ops.pop(0))
            elif kind == "arrive":
                self.arrive(arg)
            else:
                self.take(arg)
        return self


two_thread_runs = st.tuples(
    st.integers(2, 4).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.tuples(st.integers(0, n - 1), st.sampled_from(["", "!"])),
                min_size=1,
                max_size=6,
            ),
        )
    ),
    st.lists(st.integers(0, 255), max_size=80),
)


def run_two_threads(factory: type[TaggedCausalBroadcast], drawn: Any) -> TwoThreads:
    (n, ops), choices = drawn
    payloads = [(pid, f"m{i}{mark}") for i, (pid, mark) in enumerate(ops)]
    return TwoThreads(factory, n).run(payloads, choices)


@given(two_thread_runs)
@settings(max_examples=100)
def test_two_thread_model_tags_are_precise_and_stability_is_safe(drawn: Any) -> None:
    t = run_two_threads(Explicit, drawn)
    sim: Any = t
    assert [v.explain() for v in check(t.trace, CAUSAL).violations.values() for v in v] == []
    assert [v.explain() for v in tag_violations(sim) + stability_violations(sim)] == []
    assert unstable_violations(sim) == []
    assert all(ep.retained() == 0 for ep in t.endpoints)


@given(two_thread_runs)
@settings(max_examples=50)
def test_two_thread_snapshots_round_trip_midway(drawn: Any) -> None:
    (n, ops), choices = drawn
    t = TwoThreads(Explicit, n).run(
        [(pid, f"m{i}{mark}") for i, (pid, mark) in enumerate(ops)], choices, drain=False
    )
    for ep in t.endpoints:
        data = ep.snapshot()
        copy = TaggedCausalBroadcast.restore(data)
        assert copy.snapshot() == data
        assert copy.unconsumed() == ep.unconsumed() and copy.retained() == ep.retained()


def test_naive_tagged_is_caught_in_the_two_thread_model() -> None:
    found = find(
        two_thread_runs,
        lambda d: bool(tag_violations(run_two_threads(NaiveTagged, d))),  # type: ignore[arg-type]
        settings=settings(
            max_examples=2000,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    precise: Any = run_two_threads(Explicit, found)
    assert tag_violations(precise) == []


# -- garbage collection: memory stays flat ------------------------------------------------


def test_retained_entries_stay_bounded_over_a_long_run() -> None:
    """2,000 broadcasts over a reordering network: the per-message state an endpoint
    keeps stays bounded by what is in flight, and drops to zero at the end."""
    n = 4
    eps: list[Endpoint] = [Explicit(p, n) for p in range(n)]
    sim = Simulation(eps, seed=7)  # timed: uniform delays in (1, 1) plus jitter below
    sim.network = attrs.evolve(sim.network, delay=(0.5, 3.0))
    peak = [0]

    def sample(s: Simulation) -> None:
        peak[0] = max(peak[0], *(ep.retained() for ep in s.endpoints))  # type: ignore[attr-defined]

    for i in range(2000):
        sim.schedule(i * 0.5, lambda s, i=i: (s.broadcast(i % n, i), sample(s)))
    sim.run()
    assert all(ep.retained() == 0 for ep in eps)  # type: ignore[attr-defined]
    assert 0 < peak[0] <= 60  # a few delays' worth of broadcasts, not 2,000
    assert [len(s) for s in sim.stable] == [2000] * n


def test_replier_answers_from_inside_delivery_handling() -> None:
    s = Scenario(2, (Op(0, None, "m0!"),), ())
    run = replay(Explicit, s, on_deliver=replier)
    assert [m.payload for m in run.sim.delivered[0]] == ["m0!", "re:m0@P1"]


# -- the endpoint contract -----------------------------------------------------------------


def busy() -> tuple[TaggedCausalBroadcast, object]:
    """P2 with a consumed delivery, an unconsumed one, a buffered one, and the packet
    that would release it."""
    p0, p1, p2 = (Explicit(i, 3) for i in range(3))
    first = p0.broadcast("a")[0].packet
    second = p0.broadcast("b")[0].packet
    third = p0.broadcast("c")[0].packet
    p2.receive(first)
    p2.consume_all()
    p1.receive(first)
    p2.receive(p1.consume_all()[1].packet)  # P1's ack to P2
    p2.receive(p1.broadcast("d")[1].packet)  # unconsumed
    p2.receive(third)  # buffered: waits for b
    return p2, second


@given(st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_garbage_is_a_remote_error_and_changes_nothing(junk: object) -> None:
    ep, _ = busy()
    before = ep.snapshot()
    with pytest.raises(RemoteError, match="expected") as info:
        ep.receive(junk)
    assert info.value.hint
    assert ep.snapshot() == before


def test_snapshot_is_json_and_the_restored_endpoint_continues() -> None:
    ep, second = busy()
    assert ep.unconsumed() == [MessageId(1, 1)] and ep.buffered() == 1
    assert [p.explain() for p in ep.pending()] == ["P0#3 waits for 1 message from P0 (seq 2)"]
    data = ep.snapshot()
    assert json.loads(json.dumps(data)) == data
    clone = TaggedCausalBroadcast.restore(data)
    assert clone.snapshot() == data
    assert clone.receive(second) == ep.receive(second)
    assert clone.consume_all() == ep.consume_all()
    assert clone.snapshot() == ep.snapshot()
    naive = NaiveTagged(1, 2)
    assert NaiveTagged.restore(naive.snapshot()).snapshot() == naive.snapshot()


def test_local_errors_for_payloads_and_snapshots() -> None:
    ep = Explicit(0, 2)
    for payload in (object(), {1: "x"}, float("nan")):
        with pytest.raises(LocalError):
            ep.broadcast(payload)
    assert ep.snapshot() == Explicit(0, 2).snapshot()
    with pytest.raises(LocalError, match="not 'TaggedCausalBroadcast'"):
        TaggedCausalBroadcast.restore(NaiveTagged(0, 2).snapshot())
    data = ep.snapshot()
    data["knows"] = [[0, 0]]
    with pytest.raises(LocalError, match="knows"):
        TaggedCausalBroadcast.restore(data)


def test_packet_classes_are_registered() -> None:
    from mailroom.core.wire import PACKET_TYPES

    assert PACKET_TYPES["TaggedPacket"] is TaggedPacket
    assert PACKET_TYPES["StabilityAck"] is StabilityAck


def fifo_below_tagged(pid: int, n: int) -> Stack:
    return Stack(Fifo(pid, n), Explicit(pid, n))


@given(callback_scenarios(max_ops=5))
@settings(max_examples=40)
def test_tagged_on_top_of_a_stack(s: Scenario) -> None:
    """Stack forwards consume() to its upper layer, so tags stay precise when
    tagged causal broadcast runs over another layer."""
    run = replay(fifo_below_tagged, s, on_deliver=replier)
    assert run.errors == ()
    assert all_violations(run.sim) == [], run.describe()
    assert unstable_violations(run.sim) == []
    with pytest.raises(LocalError, match="does not offer consume"):
        Stack(Fifo(0, 2)).consume()  # the Stack offers exactly its top layer's capabilities


# -- the checkers catch what they claim to ---------------------------------------------------


class UnderTagged(Explicit):
    """Known-buggy: tags carry only the sender's own count, so causality is lost."""

    protocol = "UnderTagged"

    def stamp(self) -> tuple[int, ...]:
        return tuple(v if k == self.pid else 0 for k, v in enumerate(self.clock.entries))


class EagerStable(Explicit):
    """Known-buggy: reports every message stable as soon as it is delivered."""

    protocol = "EagerStable"

    def _stabilize(self) -> list[Any]:
        done = tuple(self._unstable)
        self._unstable.clear()
        return [Stable(done)] if done else []


def test_checkers_catch_under_ordering_early_stability_and_disorder() -> None:
    under = callback_model_run(UnderTagged)
    assert any("under-orders P0#1" in v.reason for v in tag_violations(under))

    eager = callback_model_run(EagerStable)
    assert any("before P" in v.reason for v in stability_violations(eager))

    sim = callback_model_run(Explicit)
    while sim.in_flight:
        sim.arrive(min(sim.in_flight))
    sim.stable[0].reverse()
    (v,) = stability_violations(sim)
    assert "out of delivery order" in v.reason
    m = sim.delivered[1][0]
    sim.delivered[1][0] = TaggedMessage(m.id, m.sender, m.payload, vc(9, 9, 9))
    assert any("another process" in v.reason for v in tag_violations(sim))


class AckTooSoon(Explicit):
    """Known-buggy: trusts an acknowledgement before consuming the messages its sender
    had sent before it; one of those, concurrent with a message it reports stable,
    can still be delivered afterwards."""

    protocol = "AckTooSoon"

    def _use_ack(self, j: int) -> None:
        for k, v in enumerate(self._acks[j]):
            self._knows[j][k] = max(self._knows[j][k], v)


def test_trusting_acks_too_soon_is_caught() -> None:
    def early(s: Scenario) -> bool:
        return bool(stability_violations(replay(AckTooSoon, s, on_deliver=replier).sim))

    found = find(
        callback_scenarios(max_ops=4, duplicate=False),
        early,
        settings=settings(
            max_examples=2000,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        ),
    )
    (v, *_) = stability_violations(replay(AckTooSoon, found, on_deliver=replier).sim)
    assert "not in its causal future" in v.reason
    assert stability_violations(replay(Explicit, found, on_deliver=replier).sim) == []


# -- consumption modes: forgetting consume() is impossible or loud ----------------------


def _question_answer(p1: TaggedCausalBroadcast) -> list[str]:
    """P0 asks; P1 is handed the question and answers; P2 gets the answer first.
    Returns what P2 delivers once both have arrived."""
    p0, p2 = TaggedCausalBroadcast(0, 3), TaggedCausalBroadcast(2, 3)
    question = p0.broadcast("question")[0].packet
    p1.receive(question)
    answer = [a for a in p1.broadcast("answer") if isinstance(a, Transmit) and a.to == 2]
    got = p2.receive(answer[0].packet) + p2.receive(question)
    return [a.message.payload for a in got if isinstance(a, Deliver)]


def test_default_mode_consumes_on_delivery_so_the_answer_follows_the_question() -> None:
    p1 = TaggedCausalBroadcast(1, 3)
    assert not p1.needs_consume
    assert _question_answer(p1) == ["question", "answer"]
    assert p1.unconsumed() == []
    assert p1.consume(MessageId(0, 1)) == []  # already consumed: old-style hosts still work
    with pytest.raises(LocalError, match="consume='delivery'"):
        p1.consume(MessageId(2, 1))


def test_explicit_mode_refuses_a_broadcast_that_forgot_consume() -> None:
    p1 = TaggedCausalBroadcast(1, 3, consume="explicit")
    assert p1.needs_consume
    before = p1.snapshot()
    with pytest.raises(LocalError, match="not consumed yet"):
        _question_answer(p1)
    assert p1.snapshot()["sent_count"] == before["sent_count"] == 0
    p1.consume()  # the application took the question: now it may answer
    assert [a.message.payload for a in p1.broadcast("answer") if isinstance(a, Deliver)] == [
        "answer"
    ]
    with pytest.raises(LocalError, match="consume"):
        TaggedCausalBroadcast(0, 2, consume="sometimes")


@pytest.mark.parametrize("record", [True, False])
def test_simulation_drives_consume_with_or_without_recording(record: bool) -> None:
    replies: list[str] = []

    def reply(sim: Simulation, pid: int, m: Message) -> None:
        if pid == 1 and m.payload == "question":
            sim.broadcast(1, "answer")
            replies.append("answer")

    eps = [TaggedCausalBroadcast(p, 3, consume="explicit") for p in range(3)]
    sim = Simulation(eps, record=record, on_deliver=reply)
    sim.broadcast(0, "question")
    sim.run()
    assert replies == ["answer"]
    assert all(ep.unconsumed() == [] for ep in eps)
    assert all(ep.retained() == 0 for ep in eps)  # consumed, acknowledged, stable
