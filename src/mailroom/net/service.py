"""What a node runs beside its endpoint: discovery in a growable group, the quorum watch
and the delivery-lag watch (``Node.service``).

Rules, in words:

- Quorum loss is stated: a group member that cannot install a view for lack of a
  majority (``GroupStatus.waiting_for_majority``: a change is wanted, but those that
  would stay are no majority of the view) logs a warning with its status line when it
  first finds so, then every ``QUORUM_LOG_EVERY`` seconds while it lasts, and once
  when it is over. The watch looks every ``LOOK_EVERY`` seconds.
- Delivery lag: how long the endpoint has held messages without delivering one (0
  while it holds none or delivers), as of the last look.
- In a growable group (``mailroom.net.discovery``) the node probes for what it lacks
  and answers others' probes; a joiner without contacts joins through the members
  of the first view it hears of.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

from mailroom.core.errors import LocalError
from mailroom.net.discovery import Directory, Discovery, ViewOf
from mailroom.net.membership import group_of
from mailroom.net.steps import Send

if TYPE_CHECKING:
    from mailroom.net.node import Node

log = logging.getLogger("mailroom.net")

#: Seconds between two "waiting for a majority" lines while quorum stays lost.
QUORUM_LOG_EVERY = 10.0
#: Seconds between two looks of the watch.
LOOK_EVERY = 1.0


class Service:
    """Discovery and the watches of one node (started and closed with it)."""

    def __init__(self, node: Node, directory: Directory) -> None:
        self.node = node
        self.directory = directory
        group = group_of(node.endpoint)
        #: a growable group's discovery (sans-IO: this service sends what it returns)
        self.discovery: Discovery | None = None
        if directory.growable:
            if group is None:
                raise LocalError("a growable group's members host group endpoints")
            self.discovery = Discovery(directory, node.pid, interval=group.retry)
        #: when quorum loss was last logged (loop time), None while there is quorum
        self.quorum_said: float | None = None
        self.quorum_lines = 0
        self._held_since: float | None = None
        self._delivered = -1
        self._task: asyncio.Task[None] | None = None
        self._probing: asyncio.Task[None] | None = None
        #: set when discovery learned an address: look again soon
        self._learned = asyncio.Event()

    def _view(self) -> ViewOf:
        view = self.node.view
        return None if view is None or not self.node.joined else (view.id, view.members)

    # -- discovery ---------------------------------------------------------------------
    def discovered(self, peer: int, batch: list[tuple[object, Any]]) -> list[tuple[object, Any]]:
        """Take the discovery packets of ``batch`` (from ``peer``), send the Rosters they
        ask for and ask to join if one names a view to join; the rest, in order."""
        discovery = self.discovery
        if discovery is None:
            return batch
        rest, answer = discovery.take(peer, batch, self._view())
        if answer.replies:
            self.node.transport.send([Send.control(pid, data) for pid, data in answer.replies])
        if answer.join is not None:
            try:
                self.node.join_through(list(answer.join))
            except LocalError as exc:  # closed, or its files cannot be written now
                log.warning("P%d: cannot ask to join now: %s", self.node.pid, exc)
                discovery.join_refused()
        if answer.learned:
            self._learned.set()
        return rest

    async def _probe(self, discovery: Discovery) -> None:
        """Probe while something is wanting, at discovery's pace."""
        transport = self.node.transport
        pause = discovery.interval
        while True:
            view = self._view()
            if discovery.wanting(view):
                probes = discovery.probes(view)
                for address, data in probes.seeds:
                    transport.to_seed(address, data)
                transport.send([Send.control(pid, data) for pid, data in probes.members])
            self._learned.clear()
            try:
                await asyncio.wait_for(self._learned.wait(), pause)
                learned = True
            except TimeoutError:
                learned = False
            pause = discovery.next_pause(pause, learned)

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        if self.discovery is not None:
            self._probing = asyncio.create_task(self._probe(self.discovery))
        self._task = asyncio.create_task(self._watch())

    async def close(self) -> None:
        for task in (self._probing, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _watch(self) -> None:
        while True:
            self.look(self.node.now())
            await asyncio.sleep(LOOK_EVERY)

    # -- the watches -----------------------------------------------------------------------
    def look(self, now: float) -> None:
        """Note delivery progress; state quorum loss (at a bounded rate)."""
        node = self.node
        delivered = node.stats.delivered
        held = int(node.endpoint.buffered())
        if not held or delivered != self._delivered:
            self._held_since = now if held else None
        self._delivered = delivered
        status = self.group_status()
        if status is None:
            return
        if status.waiting_for_majority and not node.departing:  # leaving: no one waits
            said = self.quorum_said
            if said is None or now - said >= QUORUM_LOG_EVERY:
                self.quorum_said = now
                self.quorum_lines += 1
                log.warning(
                    "P%d: waiting for a majority, no view can be installed: %s",
                    node.pid,
                    status.summary(now),
                )
        elif self.quorum_said is not None:
            self.quorum_said = None
            log.warning("P%d: a majority again: %s", node.pid, status.summary(now))

    def lag(self, now: float) -> float:
        """Seconds the endpoint has held messages without delivering one (as of the last
        look; 0 while it holds none or delivers)."""
        return 0.0 if self._held_since is None else max(0.0, now - self._held_since)

    def group_status(self) -> Any:
        """The hosted group's ``GroupStatus``, or None for another endpoint."""
        group = group_of(self.node.endpoint)
        return None if group is None else group.status()


__all__ = ["LOOK_EVERY", "QUORUM_LOG_EVERY", "Service"]
