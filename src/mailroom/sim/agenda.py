"""Timed mode's agenda: what happens next, in time order.

Four kinds of entries: "op" (a workload operation), "arrive" (a packet id),
"restart" (a crashed process's pid) and "timer" (a pid). Entries at the same time
come out in the order they were pushed, so a run depends only on its seed. Each
process has at most one live timer, at its endpoint's next deadline: arming it
again at another time supersedes the entry already queued.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

Entry = tuple[float, int, str, Any]


class Agenda:
    """A time-ordered queue of entries, with each process's armed timer."""

    def __init__(self) -> None:
        self._queue: list[Entry] = []
        self._order = 0
        #: pid -> the time its live timer fires
        self.timers: dict[int, float] = {}

    def push(self, time: float, kind: str, data: Any) -> None:
        self._order += 1
        heapq.heappush(self._queue, (time, self._order, kind, data))

    def arm(self, pid: int, at: float) -> None:
        """``pid``'s timer fires at ``at`` (instead of when it was armed for before)."""
        if self.timers.get(pid) != at:
            self.timers[pid] = at
            self.push(at, "timer", pid)

    def disarm(self, pid: int) -> None:
        self.timers.pop(pid, None)

    def next_time(self) -> float | None:
        """When the earliest entry is due (superseded timers included), or None."""
        return self._queue[0][0] if self._queue else None

    def pop(self) -> Entry | None:
        """The earliest entry, None when none is left; superseded timers are passed
        over, and a timer that comes out is no longer armed."""
        while self._queue:
            entry = heapq.heappop(self._queue)
            if entry[2] == "timer":
                if self.timers.get(entry[3]) != entry[0]:
                    continue
                del self.timers[entry[3]]
            return entry
        return None


class Steps:
    """Calls a hook makes while a step's actions are being applied wait for the step's
    end, as on a real host (where the application runs after the step), so that the
    actions of one step are applied in the order the endpoint returned them."""

    def __init__(self) -> None:
        self.depth = 0
        self.waiting: list[Callable[[], object]] = []

    def later(self, call: Callable[[], object]) -> None:
        if self.depth:
            self.waiting.append(call)
        else:
            call()

    @contextmanager
    def step(self) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        while not self.depth and self.waiting:
            self.waiting.pop(0)()
