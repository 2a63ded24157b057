"""The lazy packets waiting on a link: control packets nothing waits on soon
(``Transmit.lazy``: a reliable layer's acknowledgements, a member's reports that no
delivery waits on).

They go to a peer at most once per ``lazy_wait``: a lazy packet waits until the oldest
one held is ``lazy_wait`` old, then rides the next write to that peer (a frame that
goes anyway); only if none goes by the time the oldest is ``lazy_alone`` old does it
go alone. A link that carries data writes its lazy packets with it, and a link that
carries none (under a sequencer, between two members that are not the sequencer)
writes one frame per ``lazy_alone``, not one per ``lazy_wait``. Each later packet
with the same ``latest_key`` (a later cumulative acknowledgement, a later report)
replaces the one held, so a busy link carries one acknowledgement and one report per
``lazy_wait``, not one per step. Sending one late
is always correct: nothing waits on it, and a host may send it at once (the simulator
does). A packet that is not lazy with the same key replaces the held one too (it says
the same, later).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable

from mailroom.core.messages import MessageId

#: One held packet: (the packet, encoded when it goes; the message id it carries; what
#: it carries).
Item = tuple[object, MessageId | None, int]


class LazyHold:
    """The lazy packets waiting for one peer, the latest of each ``latest_key``, and
    when they are due."""

    def __init__(self) -> None:
        self.items: dict[Hashable, Item] = {}
        #: when the held packets go with a write (``time.monotonic``; -inf: with the next)
        self.due = math.inf
        #: when they go alone if no write took them (``time.monotonic``)
        self.alone = math.inf
        self._unkeyed = itertools.count()

    def __bool__(self) -> bool:
        return bool(self.items)

    def __len__(self) -> int:
        return len(self.items)

    def add(
        self, item: Item, latest: Hashable | None, now: float, wait: float, alone: float
    ) -> bool:
        """Hold ``item`` (if nothing was held: due with a write ``wait`` from ``now``, alone
        ``alone`` from ``now``, at least ``wait``); True if it replaced an earlier
        packet of its key."""
        items = self.items
        if not items:
            self.due = now + wait
            self.alone = now + max(wait, alone)
        key = ("unkeyed", next(self._unkeyed)) if latest is None else latest
        replaced = items.pop(key, None) is not None
        items[key] = item
        return replaced

    def drop(self, latest: Hashable) -> bool:
        """Forget the held packet of key ``latest`` (a later packet that is not lazy
        says the same); True if there was one."""
        if self.items.pop(latest, None) is None:
            return False
        if not self.items:
            self.due = self.alone = math.inf
        return True

    def drop_oldest(self) -> None:
        """Forget the oldest held packet (the outbox's bound)."""
        del self.items[next(iter(self.items))]

    def take(self, now: float) -> list[Item]:
        """The held packets, oldest first, if they are due at ``now``; else none."""
        if not self.items or now < self.due:
            return []
        out = list(self.items.values())
        self.clear()
        return out

    def clear(self) -> None:
        self.items.clear()
        self.due = self.alone = math.inf
