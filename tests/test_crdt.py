"""Operation-based CRDTs on tagged causal stable broadcast (examples/crdt): replicas
converge under Hypothesis-chosen schedules, match the sequential specification
computed from the trace's happens-before, and stability empties the set's log."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from crdt import AWSet, MVRegister, Replica

from mailroom import Message, MessageId, TaggedCausalBroadcast, TaggedMessage
from mailroom.sim import Simulation
from mailroom.testing import Scenario, replay, scenarios
from mailroom.trace import happened_before, send_clocks

ELEMENTS = ("x", "y")


# -- exact examples ----------------------------------------------------------------------


def wire(replicas: list[Replica], transmits: list[Any], hold: set[int] | None = None) -> list[Any]:
    """Deliver transmits (and what they cause) except those to processes in ``hold``."""
    held = []
    queue = list(transmits)
    while queue:
        t = queue.pop(0)
        if hold and t.to in hold:
            held.append(t)
        else:
            queue += replicas[t.to].receive(t.packet)
    return held


def test_add_wins_over_a_concurrent_remove() -> None:
    r = [Replica(p, 2, AWSet()) for p in range(2)]
    wire(r, r[0].apply(AWSet.add("x")))
    assert r[0].value == r[1].value == {"x"}
    # P0 removes x while P1, concurrently, adds it again
    t0 = r[0].apply(AWSet.rmv("x"))
    t1 = r[1].apply(AWSet.add("x"))
    assert r[0].value == set() and r[1].value == {"x"}
    wire(r, t0 + t1)
    assert r[0].value == r[1].value == {"x"}  # add wins
    # a remove that saw every add wins over them all
    wire(r, r[1].apply(AWSet.rmv("x")))
    assert r[0].value == r[1].value == set()
    assert r[0].data.log == r[1].data.log == {}


def test_the_log_is_pruned_by_stability() -> None:
    r = [Replica(p, 3, AWSet()) for p in range(3)]
    held = wire(r, r[0].apply(AWSet.add("x")) + r[1].apply(AWSet.add("y")), hold={2})
    # P2 has seen nothing yet: neither add is stable, both stay in the logs
    assert [sorted(e for _, e in x.data.log.values()) for x in r] == [["x", "y"], ["x", "y"], []]
    assert r[0].data.stable == set()
    wire(r, held)
    for x in r:
        assert x.data.log == {} and x.data.stable == {"x", "y"} and x.endpoint.retained() == 0
    # a remove after stability still removes the stable element
    wire(r, r[2].apply(AWSet.rmv("x")))
    assert [x.value for x in r] == [{"y"}] * 3


def test_multi_value_register_keeps_concurrent_writes() -> None:
    r = [Replica(p, 2, MVRegister()) for p in range(2)]
    t = r[0].apply(MVRegister.write("a")) + r[1].apply(MVRegister.write("b"))
    wire(r, t)
    assert r[0].value == r[1].value == ("a", "b")
    wire(r, r[1].apply(MVRegister.write("c")))
    assert r[0].value == r[1].value == ("c",)
    assert r[0].data.tagged == r[1].data.tagged == 0  # stable: no tags kept


# -- Hypothesis: replicas under chosen schedules -----------------------------------------


@st.composite
def crdt_scenarios(draw: st.DrawFn, kind: str) -> Scenario:
    s: Scenario = draw(scenarios(mode="broadcast", max_ops=7, max_choices=100))
    if kind == "awset":
        op = st.builds(
            lambda o, e: {"op": o, "elem": e},
            st.sampled_from(["add", "rmv"]),
            st.sampled_from(ELEMENTS),
        )
    else:
        op = st.builds(lambda v: {"op": "write", "value": v}, st.sampled_from("abcd"))
    ops = tuple(attrs.evolve(o, payload=draw(op)) for o in s.ops)
    return attrs.evolve(s, ops=ops)


def spec_value(
    kind: str, ops: dict[MessageId, Any], clocks: dict[MessageId, dict[int, int]]
) -> Any:
    """The sequential specification over a set of delivered operations."""

    def before(a: MessageId, b: MessageId) -> bool:
        return happened_before(clocks[a], clocks[b])

    if kind == "awset":
        return frozenset(
            p["elem"]
            for a, p in ops.items()
            if p["op"] == "add"
            and not any(
                q["op"] == "rmv" and q["elem"] == p["elem"] and before(a, r) for r, q in ops.items()
            )
        )
    return tuple(sorted({p["value"] for w, p in ops.items() if not any(before(w, v) for v in ops)}))


def run_replicas(
    kind: str, s: Scenario
) -> tuple[Simulation, list[Any], list[tuple[int, frozenset[MessageId], Any]]]:
    data: list[Any] = [AWSet() if kind == "awset" else MVRegister() for _ in range(s.n)]
    applied: list[dict[MessageId, Any]] = [{} for _ in range(s.n)]
    history: list[tuple[int, frozenset[MessageId], Any]] = []

    def on_deliver(sim: Simulation, pid: int, m: Message) -> None:
        assert isinstance(m, TaggedMessage)
        data[pid].effect(m)
        applied[pid][m.id] = m.payload
        history.append((pid, frozenset(applied[pid]), data[pid].value))

    def on_stable(sim: Simulation, pid: int, messages: tuple[MessageId, ...]) -> None:
        data[pid].on_stable(messages)
        history.append((pid, frozenset(applied[pid]), data[pid].value))

    run = replay(TaggedCausalBroadcast, s, on_deliver=on_deliver, on_stable=on_stable)
    assert run.errors == ()
    return run.sim, data, history


@given(
    st.sampled_from(["awset", "mvregister"]).flatmap(
        lambda k: st.tuples(st.just(k), crdt_scenarios(k))
    )
)
@settings(max_examples=150)
def test_replicas_that_delivered_the_same_messages_agree(drawn: tuple[str, Scenario]) -> None:
    kind, s = drawn
    sim, data, history = run_replicas(kind, s)
    clocks = send_clocks(sim.trace)
    payloads = {e.message: e.payload for e in sim.trace if e.kind == "send"}
    seen: dict[frozenset[MessageId], Any] = {}
    for pid, delivered, value in history:
        # every replica, at every step, holds the specification's value of what it delivered
        assert value == spec_value(kind, {m: payloads[m] for m in delivered}, clocks), (
            pid,
            delivered,
        )
        assert seen.setdefault(delivered, value) == value
    # the network drained: all replicas equal, and stability emptied the logs
    assert len({d.value for d in data}) == 1
    for d in data:
        if kind == "awset":
            assert d.log == {}
        else:
            assert d.tagged == 0


# -- a replica joins a running group (group membership) ----------------------------------------
def test_an_awset_replica_joins_a_running_group_and_converges() -> None:
    """AWSet replicas on tagged broadcast inside a Group: at each view boundary every
    operation of the old view is delivered everywhere and precedes all later ones, so
    the log moves to ``stable``; a joiner starts from the transferred elements. Carol
    crashes with an add that reached only Bob, Dave joins, and all replicas agree."""
    from mailroom import Group, ViewChange

    sets = {p: AWSet() for p in range(4)}

    def on_view(sim: Simulation, pid: int, change: ViewChange) -> None:
        s = sets[pid]
        if change.state is not None:  # a joiner: the group's elements at the boundary
            s.stable, s.log = set(change.state), {}
            return
        s.stable |= {element for _, element in s.log.values()}
        s.log.clear()

    def flush_deliver(sim: Simulation, pid: int, message: Message) -> None:
        if isinstance(message, TaggedMessage):
            sets[pid].effect(message)
        else:  # recovered by the flush (no tag): in the causal past of everything later
            op, element = message.payload["op"], message.payload["elem"]
            (sets[pid].stable.add if op == "add" else sets[pid].stable.discard)(element)

    sim = Simulation(
        [Group(p, 4, "tagged", members=(0, 1, 2)) for p in range(3)] + [Group(3, 4, "tagged")],
        adversarial=True,
        on_deliver=flush_deliver,
        on_stable=lambda sim, pid, ids: sets[pid].on_stable(ids),
        on_view=on_view,
        on_state=lambda sim, pid, view: sorted(sets[pid].value),
    )

    def settle() -> None:
        while sim.in_flight:
            sim.arrive(min(sim.in_flight))

    sim.broadcast(0, AWSet.add("x"))
    sim.broadcast(1, AWSet.add("y"))
    settle()
    carol = sim.broadcast(2, AWSet.add("z"))
    sim.drop(sim.packets(carol, to=0)[0].id)
    sim.crash(2)
    sim.arrive_message(carol, 1)
    sim.suspect(0, 2)
    sim.suspect(1, 2)
    settle()
    assert sets[0].value == sets[1].value == {"x", "y", "z"}  # the flush gave z to Alice
    sim.join(3, Group(3, 4, "tagged", contacts=(0, 1)))
    settle()
    assert sets[3].value == {"x", "y", "z"}
    sim.broadcast(3, AWSet.rmv("x"))
    sim.broadcast(0, AWSet.add("w"))
    settle()
    assert sets[0].value == sets[1].value == sets[3].value == {"w", "y", "z"}
