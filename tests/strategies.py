"""Hypothesis strategies built from the @packet registry, shared by codec and hostile tests.

Every registered packet class gets a strategy from its attrs fields, so packets
that other protocols add are covered without changing these tests.
"""

from __future__ import annotations

from typing import Any

import attrs
from hypothesis import assume
from hypothesis import strategies as st

import mailroom.protocols
import mailroom.testing  # registers the variants' packet classes too
from mailroom.clocks import VectorClock
from mailroom.core.messages import MessageId
from mailroom.core.wire import PACKET_TYPES

assert mailroom.protocols and mailroom.testing

counters = st.integers(0, 2**64 - 1) | st.integers(0, 300)
small_pids = st.integers(-2, 40)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=12,
)


def vectors(max_size: int = 40) -> st.SearchStrategy[tuple[int, ...]]:
    sparse = st.lists(st.sampled_from([0, 0, 0, 1, 7, 300]), max_size=max_size)
    return (st.lists(counters, max_size=max_size) | sparse).map(tuple)


@st.composite
def matrices(draw: st.DrawFn) -> tuple[tuple[int, ...], ...]:
    rows, cols = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    entry = st.sampled_from([0, 0, 0, 0, 1, 2, 130]) | counters
    return tuple(tuple(draw(entry) for _ in range(cols)) for _ in range(rows))


field_values: st.SearchStrategy[Any] = (
    small_pids
    | counters
    | vectors()
    | matrices()
    | json_values
    | st.builds(VectorClock, vectors(12))
    | st.builds(MessageId, st.integers(0, 50), st.integers(0, 2**40))
)


plain_values: st.SearchStrategy[Any] = small_pids | counters | vectors() | matrices() | json_values


def _for_field(name: str, annotation: object, depth: int, loose: bool) -> st.SearchStrategy[Any]:
    """Values for one field: a carried packet (``depth`` > 0) holds plain data in its
    other fields and a payload holds JSON data or a packet, unless ``loose``."""
    text = str(annotation)
    if name == "payload":
        inner = st.deferred(lambda: packets(depth + 1, loose))
        if loose and depth < 2:  # also what no application sends: vectors, packets in lists
            return json_values | field_values | inner | st.lists(inner, min_size=1, max_size=2)
        return json_values if depth else json_values | inner
    if text in ("Row",) or text.startswith("tuple[int"):
        return vectors()
    if text in ("FrozenMatrix",):
        return matrices()
    if text == "VectorClock":
        return st.builds(VectorClock, vectors(12))
    if text == "int":
        return small_pids | counters | st.integers(-(2**63), 2**63 - 1)
    return field_values if loose or not depth else plain_values


def packet_classes() -> list[type]:
    return [PACKET_TYPES[name] for name in sorted(PACKET_TYPES)]


@st.composite
def packets_of(draw: st.DrawFn, cls: type, depth: int = 0, loose: bool = False) -> Any:
    """A packet of ``cls`` with arbitrary (often impossible) field values that the codec
    can carry; with ``loose``, values it may have to refuse too."""
    fields = attrs.fields(cls)  # type: ignore[misc]
    values = [draw(_for_field(f.name, f.type, depth, loose)) for f in fields]
    try:
        return cls(*values)
    except (TypeError, ValueError):
        assume(False)  # the class itself refuses these values


def packets(depth: int = 0, loose: bool = False) -> st.SearchStrategy[Any]:
    return st.sampled_from(packet_classes()).flatmap(lambda c: packets_of(c, depth, loose))


def assert_restore_midway_changes_nothing(
    factory: Any, scenario: Any, data: Any, **options: Any
) -> None:
    """Replay ``scenario``, then again with every process restored from its snapshot
    (through JSON) before a step ``data`` draws among the run's steps: deliveries,
    stability reports and final states must be the same."""
    from mailroom.testing import replay

    plain = replay(factory, scenario, **options)
    cut = data.draw(st.integers(0, max(0, len(plain.steps) - 1)), label="restore before step")
    again = replay(factory, scenario, restore_at=cut, **options)
    assert "every process restarts from its snapshot" in again.steps
    ids = [[m.id for m in d] for d in plain.sim.delivered]
    assert [[m.id for m in d] for d in again.sim.delivered] == ids
    assert again.sim.stable == plain.sim.stable
    assert [ep.snapshot() for ep in again.sim.endpoints] == [
        ep.snapshot() for ep in plain.sim.endpoints
    ]
