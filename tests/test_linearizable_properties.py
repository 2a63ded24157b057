"""Properties of the linearizability checker: histories of an atomic object pass,
corrupted ones and a checker without real-time order are caught, and the partitioned
search agrees with the search of the whole history."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import attrs
from hypothesis import given
from hypothesis import strategies as st

from mailroom.linearizable import (
    LINEARIZABLE,
    MODELS,
    NOT_LINEARIZABLE,
    Call,
    check_calls,
    pair,
    search,
)
from mailroom.linearizable.history import Op

# an action: (process, key, f, value, complete-now?)
ACTION = st.tuples(
    st.integers(0, 3),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["read", "write", "cas"]),
    st.integers(0, 2),
    st.sampled_from(["ok", "ok", "ok", "info", "later"]),
)


def run_atomic(actions: Sequence[tuple[int, str, str, int, str]]) -> list[Op]:
    """A history of clients of an atomic register per key: each operation takes effect
    at one instant between its invocation and its completion (at the completion, or at
    the invocation of an ``info`` one, which is left open)."""
    values: dict[str, Hashable] = {}
    pending: dict[int, Op] = {}
    ops: list[Op] = []
    gone: set[int] = set()  # processes whose last invocation never completes
    for p, key, f, n, how in actions:
        if p in gone:
            continue
        if p in pending:
            inv = pending.pop(p)
            ops.append(_complete(inv, values, len(ops) + 1))
            continue
        arg = None if f == "read" else (n if f == "write" else (n, (n + 1) % 3))
        inv = Op(p, "invoke", f, arg, key, len(ops) + 1)
        ops.append(inv)
        if how == "info":
            _apply(inv, values)
            ops.append(attrs.evolve(inv, type="info", line=len(ops) + 1))
        elif how == "ok":
            pending[p] = inv
        else:
            gone.add(p)
    return ops


def _apply(inv: Op, values: dict[str, Hashable]) -> tuple[str, Hashable]:
    key = str(inv.key)
    if inv.f == "read":
        return "ok", values.get(key)
    if inv.f == "write":
        values[key] = inv.value
        return "ok", inv.value
    old, new = inv.value
    if values.get(key) != old:
        return "fail", inv.value
    values[key] = new
    return "ok", inv.value


def _complete(inv: Op, values: dict[str, Hashable], line: int) -> Op:
    kind, value = _apply(inv, values)
    return attrs.evolve(inv, type=kind, value=value, line=line)


HISTORIES = st.lists(ACTION, max_size=40).map(run_atomic)


@given(HISTORIES)
def test_histories_of_an_atomic_object_are_linearizable(ops: list[Op]) -> None:
    assert check_calls(pair(ops), MODELS["register"]).verdict == LINEARIZABLE


@given(HISTORIES)
def test_partitioned_and_whole_searches_agree(ops: list[Op]) -> None:
    calls = pair(ops)
    apart = check_calls(calls, MODELS["register"]).verdict
    whole = check_calls(calls, MODELS["register"], partition=False).verdict
    assert apart == whole


@given(HISTORIES, st.data())
def test_partitioned_and_whole_agree_on_corrupted_kv_histories(
    ops: list[Op], data: st.DataObject
) -> None:
    calls = [c for c in pair(ops) if c.f != "cas"]
    calls = [attrs.evolve(c, f={"read": "get", "write": "put"}[c.f]) for c in calls]
    reads = [i for i, c in enumerate(calls) if c.f == "get" and not c.open]
    if reads:
        i = data.draw(st.sampled_from(reads))
        calls[i] = attrs.evolve(calls[i], result=data.draw(st.sampled_from([None, 0, 1, 2])))
    apart = check_calls(calls, MODELS["kv"]).verdict
    assert apart == check_calls(calls, MODELS["kv"], partition=False).verdict


@given(HISTORIES, st.data())
def test_a_read_of_a_value_never_written_is_caught(ops: list[Op], data: st.DataObject) -> None:
    calls = pair(ops)
    reads = [i for i, c in enumerate(calls) if c.f == "read" and not c.open]
    if not reads:
        return
    i = data.draw(st.sampled_from(reads))
    calls[i] = attrs.evolve(calls[i], result=99)  # no write ever writes 99
    assert check_calls(calls, MODELS["register"]).verdict == NOT_LINEARIZABLE


def _without_real_time(calls: Sequence[Call]) -> list[Call]:
    """A buggy checker's view: every call open from the start (no real-time order)."""
    return [attrs.evolve(c, called=0, returned=None) for c in calls]


def test_a_checker_without_real_time_order_misses_a_stale_read() -> None:
    ops = run_atomic(
        [
            (0, "a", "write", 1, "ok"),
            (0, "a", "write", 1, "ok"),
            (1, "a", "read", 0, "ok"),
            (1, "a", "read", 0, "ok"),
        ]
    )
    stale = pair(ops)
    stale[1] = attrs.evolve(stale[1], result=None)  # the read after the write saw nil
    assert check_calls(stale, MODELS["register"]).verdict == NOT_LINEARIZABLE
    # without real-time order every call could run first: the stale read passes, and
    # an open call need not happen, so a buggy checker accepts the history
    assert search(_without_real_time(stale), MODELS["register"], 1000).verdict == LINEARIZABLE


@given(HISTORIES)
def test_the_witness_prefix_is_a_legal_sequential_run(ops: list[Op]) -> None:
    calls = pair(ops)
    reads = [i for i, c in enumerate(calls) if c.f == "read" and not c.open]
    if not reads:
        return
    calls[reads[-1]] = attrs.evolve(calls[reads[-1]], result=99)
    v = check_calls(calls, MODELS["register"])
    w = v.witness
    assert w is not None and w.blocked is not None
    state: Hashable = None
    for c in w.prefix:  # the prefix replays on the model
        ok, state = MODELS["register"].step(state, c)
        assert ok
    assert w.blocked not in w.prefix


# a counter's clients: (process, f, how it completes); info incs are often alike
COUNTER_ACTION = st.tuples(
    st.integers(0, 4), st.sampled_from(["inc", "inc", "read"]), st.sampled_from(["ok", "info"])
)


def run_counter(actions: Sequence[tuple[int, str, str]]) -> list[Op]:
    """A history of an atomic counter's clients: an ``ok`` call takes effect at its
    completion, an ``info`` inc at its invocation or, every other one, never."""
    value, ops, pending, skip = 0, [], {}, False
    for p, f, how in actions:
        if p in pending:
            f0 = pending.pop(p)
            value += f0 == "inc"
            ops.append(Op(p, "ok", f0, value, "c", len(ops) + 1))
            continue
        ops.append(Op(p, "invoke", f, None, "c", len(ops) + 1))
        if how == "info":
            skip = not skip
            value += f == "inc" and skip
            ops.append(Op(p, "info", f, None, "c", len(ops) + 1))
        else:
            pending[p] = f
    return ops


@given(st.lists(COUNTER_ACTION, max_size=40).map(run_counter), st.data())
def test_lifting_alike_open_calls_in_order_changes_no_verdict(
    ops: list[Op], data: st.DataObject
) -> None:
    """The search's symmetry rule (``search.twins``) against the plain search, on
    counter histories full of alike ``info`` incs, and with one result forged."""
    calls = pair(ops)
    model = MODELS["counter"]
    assert search(calls, model, 10**6).verdict == LINEARIZABLE
    done = [i for i, c in enumerate(calls) if not c.open]
    if done:
        i = data.draw(st.sampled_from(done))
        calls[i] = attrs.evolve(calls[i], result=calls[i].result + data.draw(st.integers(-2, 2)))
    fast, plain = search(calls, model, 10**6), search(calls, model, 10**6, symmetry=False)
    assert fast.verdict == plain.verdict and fast.explored <= plain.explored
