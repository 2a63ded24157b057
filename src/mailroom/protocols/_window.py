"""A reordering window per process: which of its indexes have arrived (or been
numbered), kept as ``low[p]`` (every index up to it) and ``high[p]`` (the ones above
``low[p] + 1`` that came early). Snapshots write it with ``persist.window``."""

from __future__ import annotations


def seen(low: list[int], high: list[set[int]], p: int, index: int) -> bool:
    """Whether ``index`` of process ``p`` is in the window."""
    return index <= low[p] or index in high[p]


def unseen(low: list[int], high: list[set[int]], p: int, first: int, count: int) -> list[int]:
    """The offsets k (0 <= k < count) whose index ``first + k`` of ``p`` is not in it."""
    if first > low[p] and not high[p]:  # (the common case: in order, none early)
        return list(range(count))
    return [k for k in range(count) if not seen(low, high, p, first + k)]


def mark(low: list[int], high: list[set[int]], p: int, first: int, count: int = 1) -> None:
    """Put indexes ``first .. first + count - 1`` of ``p``, none in it yet, in the window."""
    early = high[p]
    if first == low[p] + 1 and not early:  # in order: the window moves
        low[p] += count
        return
    early.update(range(first, first + count))
    while low[p] + 1 in early:
        low[p] += 1
        early.discard(low[p])


__all__ = ["mark", "seen", "unseen"]
