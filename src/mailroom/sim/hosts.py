"""The processes of a simulation: which endpoint runs in each slot, and whether it is up.

A slot's endpoint may be replaced (another endpoint continues in its place),
rebuilt from its last checkpoint after a crash, or, once its process stopped for
good (crash-stop), taken by a joiner: a new incarnation that must not reuse the
message ids its slot already sent.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from mailroom.core.endpoint import ConsumingEndpoint, Endpoint, consumer
from mailroom.core.errors import LocalError
from mailroom.sim.faults import restore_endpoint


class Hosts:
    """The ``n`` slots: their endpoints; the crashed ones (``down``: until when; forever
    for the ``stopped``) and how many crashes there were; each slot's last checkpoint
    when ``checkpoints`` is on; the last message each slot sent."""

    def __init__(self, endpoints: Sequence[Endpoint], checkpoints: bool) -> None:
        self.endpoints = list(endpoints)
        self.n = len(self.endpoints)
        for pid, ep in enumerate(self.endpoints):
            if not isinstance(ep, Endpoint):
                raise LocalError(f"{ep!r} is not an endpoint (see mailroom.core.Endpoint)")
            if ep.pid != pid or ep.n != self.n:
                raise LocalError(
                    f"endpoint {pid} has pid={ep.pid}, n={ep.n}; expected {pid}, {self.n}"
                )
        self.down: dict[int, float] = {}
        self.stopped: set[int] = set()
        self.crashes = 0
        self.checkpoints: list[Any] | None = (
            [ep.snapshot() for ep in self.endpoints] if checkpoints else None
        )
        self.last_sent: dict[int, int] = {}
        #: per pid: (endpoint, the endpoint if the host must call its consume)
        self._consumers: dict[int, tuple[Endpoint, ConsumingEndpoint | None]] = {}

    def check_pid(self, pid: object) -> None:
        if type(pid) is not int or not 0 <= pid < self.n:
            raise LocalError(f"P{pid!r} is not a process of this simulation")

    def check_stand_in(self, pid: int, endpoint: object) -> None:
        if not isinstance(endpoint, Endpoint) or (endpoint.pid, endpoint.n) != (pid, self.n):
            raise LocalError(f"{endpoint!r} cannot stand in for P{pid} of {self.n}")

    def sender(self, pid: int) -> Endpoint:
        """The endpoint of ``pid``, which must be up to send."""
        self.check_pid(pid)
        if pid in self.stopped:
            raise LocalError(f"P{pid} has crashed and stopped")
        if pid in self.down:
            raise LocalError(f"P{pid} has crashed and is down until {self.down[pid]}")
        return self.endpoints[pid]

    def member(self, pid: int, what: str) -> Any:
        """The endpoint of ``pid``, up, which must offer the group input ``what``."""
        self.check_pid(pid)
        if pid in self.down:
            raise LocalError(f"P{pid} is down")
        ep = self.endpoints[pid]
        if not callable(getattr(ep, what, None)):
            raise LocalError(f"{ep!r} has no {what}(): it is not a group endpoint")
        return ep

    def consumer(self, pid: int) -> ConsumingEndpoint | None:
        """``pid``'s endpoint if the host must call its consume (asked once per endpoint)."""
        ep = self.endpoints[pid]
        cached = self._consumers.get(pid)
        if cached is None or cached[0] is not ep:
            cached = (ep, consumer(ep))
            self._consumers[pid] = cached
        return cached[1]

    def stop(self, pid: int) -> None:
        """``pid`` crashes and stops for good."""
        if pid in self.stopped:
            raise LocalError(f"P{pid} has already stopped")
        self.crashes += 1
        self.stopped.add(pid)
        self.down[pid] = math.inf

    def crash(self, pid: int, until: float | None) -> None:
        """``pid`` crashes, to restart from its checkpoint at ``until`` (None: at once)."""
        if self.checkpoints is None:
            raise LocalError("crash() needs Simulation(..., checkpoints=True)")
        if pid in self.stopped:
            raise LocalError(f"P{pid} has stopped for good; it cannot restart")
        self.crashes += 1
        if until is not None:
            self.down[pid] = until

    def restart(self, pid: int) -> None:
        """``pid`` comes back as its last checkpoint."""
        assert self.checkpoints is not None and pid not in self.stopped
        self.down.pop(pid, None)
        self.endpoints[pid] = restore_endpoint(self.checkpoints[pid])

    def replace(self, pid: int, endpoint: Endpoint) -> None:
        self.check_stand_in(pid, endpoint)
        self.endpoints[pid] = endpoint

    def take(self, pid: int, joiner: Endpoint, used: bool) -> None:
        """``joiner`` takes slot ``pid``, which must be stopped or never ``used``."""
        self.check_stand_in(pid, joiner)
        if not callable(getattr(joiner, "join", None)):
            raise LocalError(f"{joiner!r} has no join(): it is not a group endpoint")
        if used and pid not in self.stopped:
            raise LocalError(f"P{pid} is running; only a stopped or unused slot takes a joiner")
        if joiner.sent_count < self.last_sent.get(pid, 0):
            raise LocalError(
                f"the joiner at P{pid} would reuse message ids: it has sent "
                f"{joiner.sent_count}, P{pid} had sent {self.last_sent[pid]}"
            )
        self.stopped.discard(pid)
        self.down.pop(pid, None)
        self.endpoints[pid] = joiner
        if self.checkpoints is not None:
            self.checkpoints[pid] = joiner.snapshot()
