"""The reordering window the protocols share (``mailroom.protocols._window``)."""

from __future__ import annotations

from mailroom.protocols import _window as reorder


def test_in_order_moves_the_window_and_early_indexes_wait_above_it() -> None:
    low, high = [0, 0], [set(), set()]
    reorder.mark(low, high, 1, 1, 3)  # 1..3 in order
    assert (low, high) == ([0, 3], [set(), set()])
    reorder.mark(low, high, 1, 6, 2)  # 6, 7 early
    assert (low, high) == ([0, 3], [set(), {6, 7}])
    assert reorder.unseen(low, high, 1, 3, 6) == [1, 2, 5]  # 4, 5 and 8
    assert reorder.seen(low, high, 1, 2) and reorder.seen(low, high, 1, 7)
    assert not reorder.seen(low, high, 1, 4) and not reorder.seen(low, high, 0, 1)
    reorder.mark(low, high, 1, 4)  # 4 closes nothing yet: 5 is missing
    assert (low, high) == ([0, 4], [set(), {6, 7}])
    reorder.mark(low, high, 1, 5)  # 5 closes the gap: 6 and 7 join the low mark
    assert (low, high) == ([0, 7], [set(), set()])
    assert reorder.unseen(low, high, 1, 8, 2) == [0, 1]
