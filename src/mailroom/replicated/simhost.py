"""Replicas over the simulator: one ``Group`` endpoint and one ``Replica`` per process.

``SimGroup(factory, n)`` builds a ``Simulation`` of ``n`` Group endpoints over a
total-order protocol and wires its hooks: each delivery is applied by the process's
replica, each ``ViewChange`` installed (a joiner's carries the state), each
``StateRequest`` answered with the replica's state, each exclusion fails the
replica's pending calls. ``call``/``ordered`` return a ``SimCall`` that is done once
the operation is applied at the caller's replica (``call_many``: several calls as
one batch, one group message, as ``AsyncReplica`` sends a turn's calls); ``read``
is a local read. Faults go
through the same object (``crash``, ``suspect``, ``partition``, ``join``), or through
``sim`` directly; ``history`` keeps every replica's rows for the history checker.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any

import attrs

from mailroom.core.actions import View, ViewChange
from mailroom.core.endpoint import upcoming_id
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.registry import entry
from mailroom.net.membership import group_of
from mailroom.protocols.membership import Group
from mailroom.replicated.history import History
from mailroom.replicated.operations import cut_batches
from mailroom.replicated.replica import OpKey, Outcome, Replica, op_key
from mailroom.replicated.state import take_state
from mailroom.sim import Simulation, view_of

#: Makes the endpoint of process ``pid`` of ``n``: a member of ``members``, or a joiner
#: asking ``contacts`` (``members`` None), or an idle slot (both empty).
EndpointFactory = Callable[[int, int, "Collection[int] | None", "Collection[int]"], Any]


def group_factory(protocol: str = "sequencer", **options: Any) -> EndpointFactory:
    """Plain ``Group`` endpoints over ``protocol`` (``options`` go to Group: with
    ``safe=True``, safe delivery)."""

    def make(pid: int, n: int, members: Collection[int] | None, contacts: Collection[int]) -> Any:
        return Group(pid, n, protocol, members=members, contacts=contacts, **options)

    return make


@attrs.define
class SimCall:
    """A call made at replica ``pid`` as operation ``id``; ``done`` once it was applied
    there (``lost`` if that process crashed first: nobody will be told)."""

    pid: int
    id: MessageId
    method: str
    done: bool = False
    lost: bool = False
    outcome: Outcome | None = None
    #: its place in its batch (None: its message carries it alone)
    part: int | None = None

    @property
    def key(self) -> OpKey:
        return op_key(self.id, self.part)

    def result(self) -> Any:
        """The method's value, or raise its error; LocalError while not done."""
        if self.outcome is None:
            raise LocalError(f"{self.method} ({self.id}) has not been applied at P{self.pid} yet")
        return self.outcome.result()


class SimGroup:
    """``n`` processes, the first ones members of view 1 (``members``), each with a replica
    of the object ``factory()`` builds; the other slots are idle until ``join``. With
    ``safe`` the Group endpoints deliver safely (uniformly), counting every member or
    (``safe_quorum="majority"``) a majority of the view as holders; ``endpoint`` and
    ``replica`` make them otherwise (the known-buggy variants do); the rest goes to
    ``Simulation`` (``adversarial``, ``seed``, ``network``...)."""

    def __init__(
        self,
        factory: Callable[[], object],
        n: int,
        protocol: str = "sequencer",
        *,
        members: Collection[int] | None = None,
        endpoint: EndpointFactory | None = None,
        replica: Callable[..., Replica] = Replica,
        history: History | None = None,
        safe: bool = False,
        safe_quorum: str = "all",
        **simulation: Any,
    ) -> None:
        if endpoint is None and "total" not in entry(protocol).promises:
            raise LocalError(
                f"{protocol} does not deliver in total order: replicas would diverge",
                hint="use sequencer, skeen or lamport",
            )
        self.factory = factory
        self.make_endpoint = endpoint or group_factory(protocol, safe=safe, safe_quorum=safe_quorum)
        self.make_replica = replica
        self.history = history if history is not None else History()
        first = tuple(sorted(set(range(n) if members is None else members)))
        endpoints = [self.make_endpoint(p, n, first if p in first else None, ()) for p in range(n)]
        self.replicas: list[Replica | None] = [
            self._replica(p, View(1, first)) if p in first else None for p in range(n)
        ]
        self.calls: dict[OpKey, SimCall] = {}
        #: called with (pid, ViewChange) after the replica at pid installed it
        self.on_view: Callable[[int, ViewChange], None] | None = None
        self._excluded = 0
        self.sim = Simulation(
            endpoints,
            on_deliver=self._on_deliver,
            on_view=self._on_view,
            on_state=self._on_state,
            **simulation,
        )

    def _replica(self, pid: int, view: View | None, incarnation: int = 0) -> Replica:
        return self.make_replica(
            self.factory(), pid, view=view, incarnation=incarnation, history=self.history
        )

    # -- the callers' side --------------------------------------------------------------
    def call(self, pid: int, method: str, *args: Any, **kwargs: Any) -> SimCall:
        """Replica ``pid`` calls replicated ``method``; the call is done once applied there."""
        return self._issue(pid, method, lambda r, mid: r.submit(mid, method, *args, **kwargs))

    def ordered(self, pid: int, method: str, *args: Any, **kwargs: Any) -> SimCall:
        """An ordered (linearizable) read at replica ``pid``."""
        return self._issue(pid, method, lambda r, mid: r.submit_read(mid, method, *args, **kwargs))

    def call_many(self, pid: int, calls: Sequence[Sequence[Any]]) -> list[SimCall]:
        """Replica ``pid`` makes ``calls`` (each ``(method, *args)``) as one batch (cut
        at ``MAX_BATCH_BYTES`` into several when long): LocalError, and nothing sent,
        if any of them is refused."""
        replica = self._live(pid)
        prepared = [replica.prepare(c[0], *c[1:]) for c in calls]
        out: list[SimCall] = []
        for run in cut_batches([p.text for p in prepared]):
            part = prepared[run]
            mid = upcoming_id(self.sim.endpoints[pid])
            payload = replica.batch(mid, part)
            made = [SimCall(pid, mid, p.method, part=k) for k, p in enumerate(part)]
            self.calls.update((c.key, c) for c in made)
            self._send(pid, replica, mid, payload, made)
            out += made
        return out

    def read(self, pid: int, method: str, *args: Any, **kwargs: Any) -> Any:
        """A local read at replica ``pid``."""
        return self._live(pid).read(method, *args, **kwargs)

    def _issue(
        self, pid: int, method: str, submit: Callable[[Replica, MessageId], Payload]
    ) -> SimCall:
        self._sync()
        replica = self._live(pid)
        mid = upcoming_id(self.sim.endpoints[pid])
        payload = submit(replica, mid)
        call = SimCall(pid, mid, method)
        self.calls[call.key] = call
        self._send(pid, replica, mid, payload, [call])
        return call

    def _send(
        self, pid: int, replica: Replica, mid: MessageId, payload: Payload, calls: list[SimCall]
    ) -> None:
        try:
            sent = self.sim.broadcast(pid, payload)
        except LocalError:
            replica.withdraw(mid)
            for call in calls:
                del self.calls[call.key]
            raise
        if sent != mid:  # pragma: no cover - the endpoint broke the message-id rule
            raise LocalError(f"P{pid}'s endpoint numbered the call {sent}, not {mid}")

    def _live(self, pid: int) -> Replica:
        self._sync()
        replica = self.replicas[pid] if 0 <= pid < len(self.replicas) else None
        if replica is None:
            raise LocalError(f"P{pid} has no replica (crashed, or an idle slot)")
        return replica

    # -- the simulation's hooks ----------------------------------------------------------
    def _on_deliver(self, sim: Simulation, pid: int, message: Message) -> None:
        self._sync()
        replica = self.replicas[pid]
        if replica is not None:
            self._resolve(replica.deliver(message))

    def _on_view(self, sim: Simulation, pid: int, change: ViewChange) -> None:
        self._sync()
        replica = self.replicas[pid]
        if replica is None:
            return
        group = group_of(sim.endpoints[pid])
        incarnation = group.incarnation if group is not None else None
        self._resolve(replica.view_changed(change, incarnation=incarnation))
        sim.later(lambda: self._hello(sim, pid))
        if self.on_view is not None:
            self.on_view(pid, change)

    def _hello(self, sim: Simulation, pid: int) -> None:
        """The replica's first message in a view, after the step that installed it (its
        queued calls go first: ids go out in order)."""
        replica = self.replicas[pid]
        if replica is None or pid in sim.hosts.stopped:
            return
        mid = upcoming_id(sim.endpoints[pid])
        hello = replica.hello(mid)
        if hello is not None:
            sim.broadcast(pid, hello)

    def _on_state(self, sim: Simulation, pid: int, view: int) -> Payload:
        replica = self.replicas[pid]
        if replica is None:  # pragma: no cover - a stopped process answers nothing
            raise LocalError(f"P{pid} has no replica to take the state from")
        return replica.state()

    def _sync(self) -> None:
        """Apply the exclusions the simulation recorded since the last look (it has no
        hook for them): the replica's pending calls fail with OutcomeUnknown."""
        excluded = self.sim.excluded
        for pid, _ in excluded[self._excluded :]:
            replica = self.replicas[pid]
            if replica is not None:
                self._resolve(replica.excluded())
        self._excluded = len(excluded)

    def _resolve(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            call = self.calls.pop(outcome.key, None)
            if call is not None:
                call.done, call.outcome = True, outcome

    # -- faults and membership -------------------------------------------------------------
    def crash(self, pid: int) -> None:
        """Process ``pid`` stops for good (its replica and its callers with it)."""
        self._sync()
        self.sim.crash(pid)
        replica, self.replicas[pid] = self.replicas[pid], None
        if replica is not None:
            self.history({"row": "crash", "replica": pid, "inc": replica.incarnation})
        for call in [c for c in self.calls.values() if c.pid == pid]:
            call.lost = True
            del self.calls[call.key]

    def suspect(self, pid: int, who: int) -> None:
        self._sync()
        self.sim.suspect(pid, who)

    def leave(self, pid: int) -> None:
        self._sync()
        self.sim.leave(pid)

    def partition(self, groups: Sequence[Sequence[int]], until: float = float("inf")) -> None:
        self.sim.partition(groups, until)

    def join(self, pid: int, contacts: Collection[int] | None = None) -> None:
        """A new process (a new incarnation in a crashed slot) joins at ``pid``, asking
        ``contacts`` (default: the members of the lowest live member's view)."""
        self._sync()
        contacts = self.members() if contacts is None else tuple(contacts)
        endpoint = self.make_endpoint(pid, self.sim.n, None, contacts)
        group, old = group_of(endpoint), group_of(self.sim.endpoints[pid])
        if pid in self.sim.stopped and group is not None and old is not None:
            group.incarnation = old.incarnation + 1  # its successor: ids count on
            group.sent_count = old.sent_count
        self.sim.join(pid, endpoint)  # LocalError unless the slot is crashed or idle
        incarnation = group.incarnation if group is not None else 0
        self.replicas[pid] = self._replica(pid, None, incarnation)

    # -- what tests read ---------------------------------------------------------------------
    def members(self) -> tuple[int, ...]:
        """The view of the lowest live process that has one (empty if none has)."""
        for pid, ep in enumerate(self.sim.endpoints):
            view = view_of(ep)
            if view is not None and pid not in self.sim.stopped:
                return view.members
        return ()

    def live(self) -> list[int]:
        """Processes whose replica is a member now."""
        self._sync()
        return [p for p, r in enumerate(self.replicas) if r is not None and r.view is not None]

    def states(self) -> dict[int, Payload]:
        """Each live member replica's state as data."""
        return {p: take_state(self._live(p).obj)[0] for p in self.live()}

    def settle(self, max_steps: int = 100_000, *, timers: bool = True) -> None:
        """Let everything in flight arrive (oldest first in adversarial mode), and timers
        run (not with ``timers=False``: a minority cut off retries for ever)."""
        if not self.sim.adversarial:
            self.sim.run(max_steps=max_steps)
            return
        for _ in range(max_steps):
            if self.sim.in_flight:
                self.sim.arrive(min(self.sim.in_flight))
                continue
            timed = [
                (d, q)
                for q, ep in enumerate(self.sim.endpoints)
                if q not in self.sim.stopped and (d := ep.next_deadline()) is not None
            ]
            if not timed or not timers:
                return
            self.sim.fire(min(timed)[1])
        raise LocalError(f"the group did not settle within {max_steps} steps")

    def end(self) -> list[dict[str, Any]]:
        """Note every live member's end (applied count and state) and return the rows."""
        for pid in self.live():
            replica = self._live(pid)
            row = {"row": "end", "replica": pid, "inc": replica.incarnation}
            state = take_state(replica.obj)[0]
            self.history({**row, "applied": replica.applied, "state": state})
        return self.history.rows


__all__ = ["EndpointFactory", "SimCall", "SimGroup", "group_factory"]
