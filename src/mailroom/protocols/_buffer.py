"""The mail room shared by FIFO and the causal protocols.

Every buffered message is the ``index``-th (0-based) message of its sender's
stream to this process, and carries a vector ``need``: it may be delivered once
``delivered[sender] == index`` (it is next from its sender) and
``delivered[k] >= need[k]`` for every other k. RST, CBCAST and FIFO are all this
rule with different ``need`` vectors.

Only the head of each sender's stream can be deliverable. A head that is not is
parked on the first process k it waits for, keyed by the count it needs; when a
delivery from k raises ``delivered[k]`` far enough the head resumes its scan
where it stopped. Each message's vector is thus scanned once in all, so buffered
delivery costs amortized O(n) per message and never rescans the buffer.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar

from mailroom.core.pending import Wait

T = TypeVar("T")


class _Item(Generic[T]):
    __slots__ = ("index", "need", "scan", "sender", "value")

    def __init__(self, sender: int, index: int, need: Sequence[int], value: T) -> None:
        self.sender = sender
        self.index = index
        self.need = need
        self.value = value
        self.scan = 0


class DependencyBuffer(Generic[T]):
    """Messages waiting for their dependencies; ``delivered`` is the owner's live counts."""

    def __init__(self, delivered: list[int]) -> None:
        n = len(delivered)
        self._delivered = delivered
        self._streams: list[dict[int, _Item[T]]] = [{} for _ in range(n)]
        self._parked: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._ready: deque[int] = deque()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def holds(self, sender: int, index: int) -> bool:
        return index in self._streams[sender]

    def add(self, sender: int, index: int, need: Sequence[int], value: T) -> None:
        """Store a message that is neither delivered nor already held."""
        self._streams[sender][index] = _Item(sender, index, need, value)
        self._size += 1
        if index == self._delivered[sender]:
            self._evaluate(sender)

    def pop_ready(self) -> T | None:
        """Remove and return a deliverable message, or None.

        The caller must deliver it and then call ``delivered_one(sender)``.
        """
        if not self._ready:
            return None
        sender = self._ready.popleft()
        item = self._streams[sender].pop(self._delivered[sender])
        self._size -= 1
        return item.value

    def delivered_one(self, sender: int) -> None:
        """``delivered[sender]`` just went up by one: wake whatever that enables."""
        count = self._delivered[sender]
        parked = self._parked[sender]
        while parked and parked[0][0] <= count:
            _, waiting = heapq.heappop(parked)
            self._evaluate(waiting)
        if count in self._streams[sender]:
            self._evaluate(sender)

    def _evaluate(self, sender: int) -> None:
        item = self._streams[sender][self._delivered[sender]]
        delivered, need = self._delivered, item.need
        for k in range(item.scan, len(need)):
            if k != sender and delivered[k] < need[k]:
                item.scan = k
                heapq.heappush(self._parked[k], (need[k], sender))
                return
        item.scan = len(need)
        self._ready.append(sender)

    def items(self) -> Iterator[tuple[int, int, T]]:
        """Every held message as (sender, index, value), by sender then index."""
        for sender, stream in enumerate(self._streams):
            for index in sorted(stream):
                yield sender, index, stream[index].value

    def waits(self, sender: int, index: int, unit: str) -> tuple[Wait, ...]:
        """What the held message (sender, index) is waiting for."""
        item = self._streams[sender][index]
        delivered = self._delivered
        waits = [
            Wait(k, delivered[k], item.need[k], unit)
            for k in range(len(item.need))
            if k != sender and delivered[k] < item.need[k]
        ]
        if index > delivered[sender]:
            waits.append(Wait(sender, delivered[sender], index, unit))
        return tuple(sorted(waits, key=lambda w: w.sender))
