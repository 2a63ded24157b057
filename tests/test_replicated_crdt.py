"""The CRDT flavour in the library (mailroom.replicated.crdt): the counter and the
multi-value map converge under Hypothesis-chosen schedules and match their sequential
specifications computed from the trace's happens-before; the examples' old import
paths still work."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mailroom import Message, MessageId, TaggedCausalBroadcast, TaggedMessage
from mailroom.replicated.crdt import AWSet, Counter, MVMap, MVRegister, Replica
from mailroom.testing import Scenario, replay, scenarios
from mailroom.trace import happened_before, send_clocks

OPS = {
    "counter": st.builds(Counter.add, st.integers(-3, 3)),
    "mvmap": st.one_of(
        st.builds(MVMap.put, st.sampled_from("xy"), st.integers(0, 3)),
        st.builds(MVMap.rmv, st.sampled_from("xy")),
    ),
}


def spec(kind: str, ops: dict[MessageId, Any], clocks: dict[MessageId, dict[int, int]]) -> Any:
    """The sequential specification over a set of delivered operations."""
    if kind == "counter":
        return sum(p["n"] for p in ops.values())
    out: dict[str, tuple[Any, ...]] = {}
    for key in sorted({p["key"] for p in ops.values()}):
        on_key = {m: p for m, p in ops.items() if p["key"] == key}
        live = {
            p["value"]
            for m, p in on_key.items()
            if p["op"] == "put" and not any(happened_before(clocks[m], clocks[w]) for w in on_key)
        }
        if live:
            out[key] = tuple(sorted(live))
    return out


@given(
    st.sampled_from(sorted(OPS)).flatmap(
        lambda k: st.tuples(st.just(k), scenarios(mode="broadcast", max_ops=7, max_choices=100))
    ),
    st.data(),
)
@settings(max_examples=100)
def test_replicas_agree_with_the_specification(drawn: tuple[str, Scenario], data: Any) -> None:
    kind, s = drawn
    ops = tuple(attrs.evolve(o, payload=data.draw(OPS[kind])) for o in s.ops)
    s = attrs.evolve(s, ops=ops)
    types = [Counter() if kind == "counter" else MVMap() for _ in range(s.n)]
    applied: list[dict[MessageId, Any]] = [{} for _ in range(s.n)]
    seen: list[tuple[int, dict[MessageId, Any], Any]] = []

    def on_deliver(sim: Any, pid: int, m: Message) -> None:
        assert isinstance(m, TaggedMessage)
        types[pid].effect(m)
        applied[pid][m.id] = m.payload
        seen.append((pid, dict(applied[pid]), types[pid].value))

    def on_stable(sim: Any, pid: int, ids: tuple[MessageId, ...]) -> None:
        types[pid].on_stable(ids)
        seen.append((pid, dict(applied[pid]), types[pid].value))

    run = replay(TaggedCausalBroadcast, s, on_deliver=on_deliver, on_stable=on_stable)
    assert run.errors == ()
    clocks = send_clocks(run.sim.trace)
    for pid, delivered, value in seen:
        assert value == spec(kind, delivered, clocks), (pid, delivered)
    assert len({repr(t.value) for t in types}) == 1
    if kind == "mvmap":
        assert all(t.tagged == 0 for t in types)  # the network drained: all stable


def test_a_put_concurrent_with_a_remove_survives_it() -> None:
    r = [Replica(p, 2, MVMap()) for p in range(2)]
    wire(r, r[0].apply(MVMap.put("k", 1)))
    wire(r, r[0].apply(MVMap.rmv("k")) + r[1].apply(MVMap.put("k", 2)))
    assert r[0].value == r[1].value == {"k": (2,)}
    wire(r, r[1].apply(MVMap.rmv("k")))
    assert r[0].value == r[1].value == {}


def test_a_counter_adds_up_everywhere() -> None:
    r = [Replica(p, 3, Counter()) for p in range(3)]
    wire(r, r[0].apply(Counter.add(5)) + r[1].apply(Counter.add(-2)) + r[2].apply(Counter.add(1)))
    assert [x.value for x in r] == [4, 4, 4]
    with pytest.raises(TypeError):
        Counter.add(1.5)  # type: ignore[arg-type]


def test_the_examples_import_paths_still_work() -> None:
    import examples.crdt as crdt
    from examples.crdt.awset import AWSet as Moved

    assert crdt.AWSet is AWSet is Moved and crdt.MVRegister is MVRegister
    assert crdt.Replica is Replica


def wire(replicas: list[Replica], transmits: list[Any]) -> None:
    while transmits:
        t = transmits.pop(0)
        transmits += replicas[t.to].receive(t.packet)
