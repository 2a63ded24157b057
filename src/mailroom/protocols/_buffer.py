"""The mail room shared by FIFO and the causal protocols.

Every buffered message is the ``index``-th (0-based) message of its sender's
stream to this process, and carries a vector ``need``: it may be delivered once
``delivered[sender] == index`` (it is next from its sender) and
``delivered[k] >= need[k]`` for every other k. RST, CBCAST and FIFO are all this
rule with different ``need`` vectors.

Release order: whenever several held messages are deliverable at once (one
arrival or delivery released a cascade), the one that *arrived* first is
delivered first, and the choice is made again after every delivery. The order
depends only on which messages are deliverable and on the arrival order, never
on the protocol's metadata, so two protocols with the same exact deliverability
condition (RST and KS: "every causal predecessor addressed to me is delivered")
deliver the same sequence under the same schedule. ``ArrivalOrder`` is that
rule; KS's own mail room uses it too.

Only the head of each sender's stream can be deliverable. A head that is not is
parked on the first process k it waits for, keyed by the count it needs; when a
delivery from k raises ``delivered[k]`` far enough the head resumes its scan
where it stopped. Each message's vector is thus scanned once in all, so buffered
delivery costs amortized O(n) per message and never rescans the buffer.

A run (``offer_run``) is k consecutive messages of one sender that arrived
together with the same needs on the others (a batch): it is held as one item, one
arrival and one scan, and each message's value is built only when it is released
(or listed). It releases exactly what k single offers would, in the same order:
its messages' arrivals would have been consecutive, so no other message's falls
between them.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from operator import itemgetter
from typing import Generic, TypeVar

import attrs

from mailroom.core.actions import Action
from mailroom.core.pending import Wait

T = TypeVar("T")
K = TypeVar("K")


class ArrivalOrder(Generic[K]):
    """The deliverable messages of a mail room, released oldest arrival first.

    ``stamp()`` numbers each accepted (non-duplicate) arrival; ``push`` marks a held
    message deliverable under its stamp; ``pop`` returns the deliverable message that
    arrived first. Stamps are unique, so keys are never compared.
    """

    __slots__ = ("_arrivals", "_heap")

    def __init__(self) -> None:
        self._heap: list[tuple[int, K]] = []
        self._arrivals = 0

    def __len__(self) -> int:
        return len(self._heap)

    def stamp(self) -> int:
        """The next arrival's number."""
        self._arrivals += 1
        return self._arrivals

    def push(self, arrival: int, key: K) -> None:
        heapq.heappush(self._heap, (arrival, key))

    def pop(self) -> K | None:
        """The deliverable message that arrived first, or None."""
        return heapq.heappop(self._heap)[1] if self._heap else None


@attrs.define(eq=False)
class _Item(Generic[T]):
    """A held message: the ``index``-th of ``sender``'s stream, its ``need`` vector,
    its ``arrival`` number, and how far its needs were scanned. A run's item stands
    for messages ``index``, ``index + 1``...: ``make(i)`` builds the value of the i-th."""

    sender: int
    index: int
    need: Sequence[int]
    value: T | None
    arrival: int
    scan: int = 0
    make: Callable[[int], T] | None = None

    def value_of(self, index: int) -> T:
        """The value of the held message ``index`` (one this item stands for)."""
        if self.make is not None:
            return self.make(index - self.index)
        assert self.value is not None
        return self.value


class DependencyBuffer(Generic[T]):
    """Messages waiting for their dependencies; ``delivered`` is the owner's live counts."""

    def __init__(self, delivered: list[int]) -> None:
        n = len(delivered)
        #: the owner's live delivered counts (the owner raises them as it delivers)
        self.delivered = delivered
        self._streams: list[dict[int, _Item[T]]] = [{} for _ in range(n)]
        self._parked: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self._ready: ArrivalOrder[int] = ArrivalOrder()
        #: how many messages are held (an attribute: the owners' fast paths read it
        #: on every packet, "is anything held at all?")
        self.held = 0

    def __len__(self) -> int:
        return self.held

    def holds(self, sender: int, index: int) -> bool:
        return index in self._streams[sender]

    def offer(self, sender: int, index: int, need: Sequence[int], value: T) -> bool:
        """Store a message unless it is delivered or held already (then False)."""
        stream = self._streams[sender]
        if index < self.delivered[sender] or index in stream:
            return False
        stream[index] = _Item(sender, index, need, value, self._ready.stamp())
        self.held += 1
        if index == self.delivered[sender]:
            self._evaluate(sender)
        return True

    def offer_run(
        self, sender: int, index: int, need: Sequence[int], count: int, make: Callable[[int], T]
    ) -> bool:
        """Hold ``count`` messages ``index``.. of ``sender`` with the same needs on the
        others as one run (``make(i)``: the i-th's value), unless one of them is
        delivered or held already (then False, nothing held: offer them one by one)."""
        stream = self._streams[sender]
        if index < self.delivered[sender] or any(i in stream for i in range(index, index + count)):
            return False
        item: _Item[T] = _Item(sender, index, need, None, self._ready.stamp(), make=make)
        for i in range(index, index + count):
            stream[i] = item
        self.held += count
        if index == self.delivered[sender]:
            self._evaluate(sender)
        return True

    def has_ready(self) -> bool:
        """Whether a held message is deliverable now."""
        return len(self._ready) > 0

    def pop_ready(self) -> T | None:
        """Remove and return the deliverable message that arrived first, or None.

        The caller must deliver it and then call ``delivered_one(sender)``.
        """
        sender = self._ready.pop()
        if sender is None:
            return None
        index = self.delivered[sender]
        item = self._streams[sender].pop(index)
        self.held -= 1
        return item.value_of(index)

    def delivered_one(self, sender: int) -> None:
        """``delivered[sender]`` just went up by one: wake whatever that enables."""
        count = self.delivered[sender]
        parked = self._parked[sender]
        while parked and parked[0][0] <= count:
            _, waiting = heapq.heappop(parked)
            self._evaluate(waiting)
        if count in self._streams[sender]:
            self._evaluate(sender)

    def _evaluate(self, sender: int) -> None:
        item = self._streams[sender][self.delivered[sender]]
        delivered, need = self.delivered, item.need
        for k in range(item.scan, len(need)):
            if k != sender and delivered[k] < need[k]:
                item.scan = k
                heapq.heappush(self._parked[k], (need[k], sender))
                return
        item.scan = len(need)
        self._ready.push(item.arrival, sender)

    def items(self) -> Iterator[tuple[int, int, T]]:
        """Every held message as (sender, index, value), by sender then index."""
        for sender, stream in enumerate(self._streams):
            for index in sorted(stream):
                yield sender, index, stream[index].value_of(index)

    def by_arrival(self) -> list[T]:
        """Every held message in the order it arrived (a run's in index order): what a
        snapshot must keep so that a restored endpoint releases cascades in the same
        order."""
        held = [
            (item.arrival, index, item)
            for stream in self._streams
            for index, item in stream.items()
        ]
        return [item.value_of(index) for _, index, item in sorted(held, key=itemgetter(0, 1))]

    def waits(self, sender: int, index: int, unit: str) -> tuple[Wait, ...]:
        """What the held message (sender, index) is waiting for."""
        item = self._streams[sender][index]
        delivered = self.delivered
        waits = [
            Wait(k, delivered[k], item.need[k], unit)
            for k in range(len(item.need))
            if k != sender and delivered[k] < item.need[k]
        ]
        if index > delivered[sender]:
            waits.append(Wait(sender, delivered[sender], index, unit))
        return tuple(sorted(waits, key=lambda w: w.sender))


def rescan(
    held: list[T], deliverable: Callable[[T], bool], deliver: Callable[[T], Action]
) -> list[Action]:
    """The textbook mail room, a plain list rescanned after every delivery: deliver
    (``deliver(message)``) every held message that is deliverable, in list order,
    until a whole pass delivers nothing. For the lab and the naive variants, where
    clarity beats the cost of rescanning."""
    actions: list[Action] = []
    progress = True
    while progress:
        progress = False
        for message in list(held):
            if deliverable(message):
                held.remove(message)
                actions.append(deliver(message))
                progress = True
    return actions
