"""Laws of the clock types, checked by Hypothesis, and their basic behaviour."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mailroom import DelivVector, LamportClock, SentMatrix, VectorClock

N = 4
counters = st.integers(0, 5)
clocks = st.lists(counters, min_size=N, max_size=N).map(VectorClock)


@given(clocks, clocks)
def test_merge_is_commutative(a: VectorClock, b: VectorClock) -> None:
    assert a.merge(b) == b.merge(a)


@given(clocks, clocks, clocks)
def test_merge_is_associative(a: VectorClock, b: VectorClock, c: VectorClock) -> None:
    assert a.merge(b).merge(c) == a.merge(b.merge(c))


@given(clocks)
def test_merge_is_idempotent(a: VectorClock) -> None:
    assert a.merge(a) == a


@given(clocks, clocks)
def test_merge_is_the_least_upper_bound(a: VectorClock, b: VectorClock) -> None:
    m = a.merge(b)
    assert a <= m and b <= m
    assert all(m[k] in (a[k], b[k]) for k in range(N))


@given(clocks)
def test_happened_before_is_irreflexive(a: VectorClock) -> None:
    assert not a < a


@given(clocks, clocks)
def test_happened_before_is_asymmetric(a: VectorClock, b: VectorClock) -> None:
    assert not (a < b and b < a)


@given(clocks, clocks, clocks)
def test_happened_before_is_transitive(a: VectorClock, b: VectorClock, c: VectorClock) -> None:
    if a < b and b < c:
        assert a < c


@given(clocks, clocks)
def test_concurrent_is_symmetric_and_exclusive(a: VectorClock, b: VectorClock) -> None:
    assert a.concurrent(b) == b.concurrent(a)
    # exactly one of: equal, a < b, b < a, concurrent
    assert [a == b, a < b, b < a, a.concurrent(b)].count(True) == 1


@given(clocks, st.integers(0, N - 1))
def test_tick_moves_strictly_forward(a: VectorClock, k: int) -> None:
    assert a < a.tick(k)
    assert a.tick(k)[k] == a[k] + 1


def test_vector_clock_basics() -> None:
    a = VectorClock([1, 0, 0])
    b = VectorClock([2, 0, 2])
    assert a < b and a <= b and b > a and b >= a
    assert VectorClock([1, 0]).concurrent(VectorClock([0, 1]))
    assert a.tolist() == [1, 0, 0]
    assert a.to_sparse() == {0: 1}
    assert VectorClock.from_sparse({2: 3}, 3) == VectorClock([0, 0, 3])
    with pytest.raises(ValueError, match="sizes"):
        _ = a < VectorClock([1, 0])
    with pytest.raises(ValueError, match="non-negative"):
        VectorClock([-1, 0])
    with pytest.raises(ValueError, match="outside"):
        VectorClock.from_sparse({5: 1}, 3)


matrices = st.lists(st.lists(counters, min_size=3, max_size=3), min_size=3, max_size=3)


@given(matrices, matrices)
def test_sent_matrix_merge_is_commutative_and_idempotent(
    a: list[list[int]], b: list[list[int]]
) -> None:
    x, y = SentMatrix(3, a), SentMatrix(3, b)
    xy, yx = x.copy(), y.copy()
    xy.merge(y)
    yx.merge(x)
    assert xy == yx
    again = xy.copy()
    again.merge(xy)
    assert again == xy
    assert all(xy[i, j] == max(a[i][j], b[i][j]) for i in range(3) for j in range(3))


def test_sent_matrix_and_deliv_vector() -> None:
    s = SentMatrix(3)
    s.increment(0, 2)
    assert s.tolist() == [[0, 0, 1], [0, 0, 0], [0, 0, 0]]
    assert s.column(2) == [1, 0, 0]
    assert s.freeze() == ((0, 0, 1), (0, 0, 0), (0, 0, 0))
    with pytest.raises(ValueError):
        SentMatrix(3, [[0, 0], [0, 0]])
    d = DelivVector(3)
    d.increment(1)
    assert d.tolist() == [0, 1, 0] and d[1] == 1 and len(d) == 3
    with pytest.raises(ValueError):
        DelivVector(3, [0, -1, 0])


def test_lamport_clock() -> None:
    c = LamportClock()
    assert c.tick() == 1
    assert c.merge(5) == 5
    assert c.merge(2) == 5
    assert c.tolist() == [5]
