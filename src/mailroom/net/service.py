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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mailroom.core.errors import LocalError
from mailroom.net.discovery import Directory, Discovery
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

    def __init__(
        self,
        node: Node,
        directory: Directory,
        join: Callable[[list[int]], None] | None = None,
    ) -> None:
        """``join``: how a joiner asks members in (default: ``node.join_through``)."""
        self.node = node
        self.directory = directory
        group = group_of(node.endpoint)
        self.discovery: Discovery | None = None
        if directory.growable:
            if group is None:
                raise LocalError("a growable group's members host group endpoints")
            transport = node.transport
            self.discovery = Discovery(
                directory,
                node.pid,
                lambda pid, data: transport.send([Send.control(pid, data)]),
                transport.to_seed,
                self._view,
                join if join is not None else node.join_through,
                interval=group.retry,
            )
            transport.discovery = self.discovery
        #: when quorum loss was last logged (loop time), None while there is quorum
        self.quorum_said: float | None = None
        self.quorum_lines = 0
        self._held_since: float | None = None
        self._delivered = -1
        self._task: asyncio.Task[None] | None = None

    def _view(self) -> tuple[int, tuple[int, ...]] | None:
        view = self.node.view
        return None if view is None or not self.node.joined else (view.id, view.members)

    # -- life cycle ----------------------------------------------------------------------
    def start(self) -> None:
        if self.discovery is not None:
            self.discovery.start()
        self._task = asyncio.create_task(self._watch())

    async def close(self) -> None:
        if self.discovery is not None:
            await self.discovery.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

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
