"""A deterministic network for N endpoints, and the trace and metrics of a run.

Two ways to drive it:

- timed (the default): every packet gets an arrival time drawn from a seeded
  ``random.Random`` and the network model (per-link delay ranges, which reorder
  packets; duplication; loss); ``run()`` processes arrivals, workload operations
  and endpoint timers in time order until nothing is left;
- adversarial (``adversarial=True``): nothing arrives by itself; the caller looks
  at ``in_flight`` and chooses with ``arrive(id)``, ``duplicate(id)`` or
  ``drop(id)``. ``mailroom.testing`` lets Hypothesis make those choices.

Every application send and delivery, and every arrival of a packet carrying an
application message, is recorded as a trace ``Event``; ``vc`` is the vector
time of application events (sends and deliveries). The simulator drives every
capability an endpoint has: an endpoint that needs explicit consumption
(``ConsumingEndpoint`` with ``needs_consume``) is told when the application
takes each delivery (just before ``on_deliver`` runs), with or without
recording; ``on_stable`` sees Stable reports; a send the endpoint does not
offer (``broadcast`` on a unicast-only endpoint) is a LocalError.

Group membership (endpoints with a ``view``, as ``mailroom.protocols.membership``'s
Group and HeartbeatDetector): each installation of a view (the initial one, then
each ``ViewChange``) is a trace event of kind "view", and send, receive and
deliver events carry the view they happened in; ``on_view`` sees each
ViewChange; a ``StateRequest`` is answered at once with ``on_state(sim, pid,
view)`` (by default the process's ``app_state``: the ids of the messages it
delivered, or was handed by a state transfer, as [origin, seq] lists); an
``Excluded`` process drops that state (``excluded`` records it). The host's
inputs are ``suspect``, ``leave`` and ``join``; ``crash(pid)`` without
``down_for`` stops the process for good (crash-stop).

The simulator's parts, each in its own module: ``network`` (the model and the
packets in flight), ``agenda`` (timed mode's queue and timers), ``recorder`` (the
trace and vector times), ``hosts`` (each slot's endpoint, crashes, checkpoints),
``views`` (group membership's views and application state) and ``faults``
(partitions). ``Simulation`` is the façade: it drives each capability the
endpoints have and applies the actions of every step to the parts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from mailroom.core.actions import (
    Action,
    Deliver,
    Excluded,
    Stable,
    StateRequest,
    Transmit,
    ViewChange,
)
from mailroom.core.endpoint import Endpoint, broadcast_batch, require, send_batch
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.sim.agenda import Agenda, Steps
from mailroom.sim.faults import Partition
from mailroom.sim.hosts import Hosts
from mailroom.sim.metrics import Metrics
from mailroom.sim.network import InFlight, Link, NetworkModel, Wire
from mailroom.sim.recorder import Recorder
from mailroom.sim.views import Views, is_member_endpoint, view_of
from mailroom.trace.events import Event
from mailroom.trace.header import TraceHeader

if TYPE_CHECKING:
    from mailroom.core.actions import View

DeliverHook = Callable[["Simulation", int, Message], None]
StableHook = Callable[["Simulation", int, tuple[MessageId, ...]], None]
TransmitHook = Callable[["Simulation", int, Transmit], None]
ViewHook = Callable[["Simulation", int, ViewChange], None]
StateHook = Callable[["Simulation", int, int], Payload]

T = TypeVar("T")


class Kept(property, Generic[T]):
    """A ``Simulation`` attribute that one of its parts keeps: reading or assigning it
    reads or assigns ``sim.<part>.<attribute>`` (a property whose getter is C code:
    the harness reads ``sim.endpoints`` and ``sim.in_flight`` at every step)."""

    def __init__(self, part: str, attribute: str) -> None:
        def assign(sim: object, value: T) -> None:
            setattr(getattr(sim, part), attribute, value)

        super().__init__(attrgetter(f"{part}.{attribute}"), assign)
        self.__doc__ = f"Kept as ``sim.{part}.{attribute}``."  # (3.11 drops a subclass's doc=)

    if TYPE_CHECKING:  # what the property gives, for the type checker

        @overload
        def __get__(self, sim: None, owner: type, /) -> Kept[T]: ...
        @overload
        def __get__(self, sim: object, owner: type | None = None, /) -> T: ...
        def __get__(self, sim: object, owner: type | None = None, /) -> T | Kept[T]: ...
        def __set__(self, sim: object, value: T, /) -> None: ...


class Simulation:
    """N endpoints wired through a simulated network."""

    #: The network model; assigning another changes the delays from then on.
    network: Kept[NetworkModel] = Kept("wire", "network")
    in_flight: Kept[dict[int, InFlight]] = Kept("wire", "in_flight")
    partitions: Kept[list[Partition]] = Kept("wire", "partitions")
    run_name: Kept[str] = Kept("recorder", "run")
    trace: Kept[list[Event]] = Kept("recorder", "trace")
    delivered: Kept[list[list[Message]]] = Kept("recorder", "delivered")
    stable: Kept[list[list[MessageId]]] = Kept("recorder", "stable")
    #: (pid, message, len(trace) when the Stable action was applied)
    stable_log: Kept[list[tuple[int, MessageId, int]]] = Kept("recorder", "stable_log")
    #: The processes: each one's endpoint; the crashed (until when) and stopped ones,
    #: how many crashes; each one's last checkpoint when ``checkpoints`` is on.
    endpoints: Kept[list[Endpoint]] = Kept("hosts", "endpoints")
    down: Kept[dict[int, float]] = Kept("hosts", "down")
    stopped: Kept[set[int]] = Kept("hosts", "stopped")
    crashes: Kept[int] = Kept("hosts", "crashes")
    checkpoints: Kept[list[Any] | None] = Kept("hosts", "checkpoints")
    #: Group membership: True once a group endpoint runs; each process's view id
    #: (None while it is out), application state, views installed; the exclusions.
    membership: Kept[bool] = Kept("group", "membership")
    current_view: Kept[list[int | None]] = Kept("group", "current_view")
    app_state: Kept[list[list[list[int]]]] = Kept("group", "app_state")
    views: Kept[list[list[View]]] = Kept("group", "views")
    excluded: Kept[list[tuple[int, Excluded]]] = Kept("group", "excluded")

    def __init__(
        self,
        endpoints: Sequence[Endpoint],
        network: NetworkModel | None = None,
        *,
        seed: int = 0,
        adversarial: bool = False,
        run: str = "run",
        on_deliver: DeliverHook | None = None,
        on_stable: StableHook | None = None,
        on_transmit: TransmitHook | None = None,
        on_view: ViewHook | None = None,
        on_state: StateHook | None = None,
        checkpoints: bool = False,
        record: bool = True,
    ) -> None:
        self.hosts = Hosts(endpoints, checkpoints)
        self.n = self.hosts.n
        self.seed = seed
        self.random = random.Random(seed)
        self.adversarial = adversarial
        #: False keeps no per-message history (trace, delivered lists, delays): for soaks.
        self.record = record
        self.now = 0.0
        #: The application's hooks; ``on_transmit`` sees every packet an endpoint
        #: transmits (before loss): to measure the wire.
        self.on_deliver = on_deliver
        self.on_stable = on_stable
        self.on_transmit = on_transmit
        self.on_view = on_view
        self.on_state = on_state
        self._steps = Steps()
        self.metrics = Metrics()
        self.agenda = Agenda()
        timed = None if adversarial else self.agenda
        self.wire = Wire(network or NetworkModel(), self.random, self.metrics, timed)
        self.recorder = Recorder(run, self.n, self.metrics)
        self.group = Views(self.n, any(is_member_endpoint(ep) for ep in self.endpoints))
        for pid, ep in enumerate(self.endpoints):
            view = view_of(ep)
            if view is not None:
                self._install(pid, view)
            self._arm(pid)  # endpoints with timers from the start (failure detectors)

    def trace_header(
        self,
        protocol: str | None = None,
        promises: Sequence[str] = (),
        producer: str = "mailroom.sim",
    ) -> TraceHeader:
        """What produced this run's trace: protocol, its promises, n and the settings."""
        settings: dict[str, Any] = {
            "seed": self.seed,
            "run": self.run_name,
            "adversarial": self.adversarial,
            **self.network.settings(),
        }
        return TraceHeader(producer, protocol, tuple(promises), self.n, settings)

    # -- the application's side -----------------------------------------------------
    def send(self, pid: int, payload: Payload, to: int) -> MessageId:
        """Process ``pid`` sends ``payload`` to ``to`` now; returns the message id."""
        return self._issue(pid, [payload], (to,), "unicast", lambda ep: ep.send(payload, to=to))[0]

    def broadcast(self, pid: int, payload: Payload) -> MessageId:
        """Process ``pid`` broadcasts ``payload`` now; returns the message id."""
        dest = tuple(range(self.n))
        return self._issue(pid, [payload], dest, "broadcast", lambda ep: ep.broadcast(payload))[0]

    def broadcast_many(self, pid: int, payloads: Sequence[Payload]) -> list[MessageId]:
        """Process ``pid`` broadcasts ``payloads`` now as one step (``broadcast_batch``:
        one packet for the lot where the endpoint can); returns their message ids."""
        batch = list(payloads)
        dest = tuple(range(self.n))
        return self._issue(pid, batch, dest, "broadcast", lambda ep: broadcast_batch(ep, batch))

    def send_many(self, pid: int, payloads: Sequence[Payload], to: int) -> list[MessageId]:
        """Process ``pid`` sends ``payloads`` to ``to`` now as one step (``send_batch``)."""
        batch = list(payloads)
        return self._issue(pid, batch, (to,), "unicast", lambda ep: send_batch(ep, batch, to))

    def multicast(self, pid: int, payload: Payload, to: Sequence[int]) -> MessageId:
        """Process ``pid`` multicasts ``payload`` to the set ``to`` now."""
        dest = tuple(sorted(set(to)))
        mids = self._issue(
            pid, [payload], dest, "multicast", lambda ep: ep.multicast(payload, to=dest)
        )
        return mids[0]

    def schedule(self, time: float, op: Callable[[Simulation], object]) -> None:
        """Run ``op(sim)`` at simulated ``time`` (timed mode)."""
        self.agenda.push(time, "op", op)

    def _issue(
        self,
        pid: int,
        payloads: list[Payload],
        dest: tuple[int, ...],
        capability: str,
        call: Callable[[Any], list[Action]],
    ) -> list[MessageId]:
        """Run ``call`` (one step sending ``payloads``) at ``pid``: record a send event
        per message, then apply the step's actions."""
        ep = self.hosts.sender(pid)
        require(ep, capability)
        before = ep.sent_count
        view = getattr(ep, "sending_view", None)
        actions = call(ep)
        mids = [MessageId(pid, before + 1 + k) for k in range(len(payloads))]
        if mids:
            self.hosts.last_sent[pid] = mids[-1].seq
        self.metrics.app_messages += len(mids)
        if self.record:
            if is_member_endpoint(ep) and not (ep.joined and not ep.flushing):  # type: ignore[attr-defined]
                self.recorder.queue(pid, mids, payloads, dest, self.now)
            else:
                self.recorder.sends(pid, mids, payloads, dest, view, self.now)
        self._apply(pid, actions)
        return mids

    # -- the network's side ----------------------------------------------------------
    def arrive(self, packet_id: int) -> list[Action]:
        """The in-flight packet ``packet_id`` reaches its destination now."""
        p = self.wire.in_flight.pop(packet_id)
        if self.adversarial:
            self.now += 1.0  # each chosen arrival is one unit of time
        if p.dst in self.hosts.down or self.wire.cut(p.src, p.dst, self.now):
            self.metrics.dropped += 1  # the process is down, or the link is cut
            return []
        if p.message_id is not None and self.record:
            view = self.group.current_view[p.dst]
            self.recorder.receive(p.dst, p.message_id, view, self.now)
        actions = self.hosts.endpoints[p.dst].receive(p.packet)
        self._apply(p.dst, actions)
        return actions

    def duplicate(self, packet_id: int) -> int:
        """Put a copy of an in-flight packet on the wire; returns the copy's id."""
        return self.wire.duplicate(packet_id, self.now)

    def drop(self, packet_id: int) -> None:
        """Lose an in-flight packet."""
        self.wire.drop(packet_id)

    def packets(self, message: MessageId | None = None, to: int | None = None) -> list[InFlight]:
        """In-flight packets, oldest first, optionally only those carrying ``message`` to ``to``."""
        return self.wire.packets(message, to)

    def arrive_message(self, message: MessageId, to: int) -> list[Action]:
        """The oldest in-flight packet carrying ``message`` to ``to`` arrives now."""
        found = self.wire.packets(message, to)
        if not found:
            raise LocalError(f"no packet carrying {message} to P{to} is in flight")
        return self.arrive(found[0].id)

    # -- running ---------------------------------------------------------------------------
    def step(self) -> bool:
        """Timed mode: process the next event in time order; False when none is left."""
        while (entry := self.agenda.pop()) is not None:
            time, _, kind, data = entry
            if kind == "arrive" and data not in self.wire.in_flight:
                continue  # dropped meanwhile
            if kind == "timer" and data in self.hosts.down:
                continue  # a crashed process has no timers
            self.now = max(self.now, time)
            if kind == "arrive":
                self.arrive(data)
            elif kind == "op":
                data(self)
            elif kind == "restart":
                self.restart(data)
            else:
                self._apply(data, self.hosts.endpoints[data].tick(self.now))
            return True
        return False

    def run(self, until: float | None = None, max_steps: int = 10_000_000) -> None:
        """Timed mode: run to quiescence (or to time ``until``)."""
        for _ in range(max_steps):
            if until is not None and (due := self.agenda.next_time()) is not None and due > until:
                return
            if not self.step():
                return
        raise RuntimeError(f"simulation did not quiesce within {max_steps} steps")

    def quiescent(self) -> bool:
        return not self.wire.in_flight and all(
            ep.buffered() == 0 for q, ep in enumerate(self.endpoints) if q not in self.stopped
        )

    def fire(self, pid: int) -> list[Action]:
        """Adversarial mode: time jumps to ``pid``'s next deadline and its timer fires."""
        if pid in self.hosts.stopped:
            return []
        ep = self.hosts.endpoints[pid]
        deadline = ep.next_deadline()
        if deadline is None:
            return []
        self.now = max(self.now, deadline)
        actions = ep.tick(self.now)
        self._apply(pid, actions)
        return actions

    # -- faults (sim/faults.py) -------------------------------------------------------------
    def partition(self, groups: Sequence[Sequence[int]], until: float) -> Partition:
        """Cut the links between ``groups`` until time ``until``, when the partition heals."""
        return self.wire.partition(groups, until, self.now)

    def crash(self, pid: int, down_for: float | None = None) -> None:
        """Process ``pid`` loses its memory; it restarts from its last checkpoint after
        ``down_for`` (timed mode) or at once. Packets on their way to it are lost.

        In a membership run, ``down_for`` None is crash-stop: the process never comes
        back (``join`` may put a new incarnation in its place); its packets already on
        the wire still arrive. Elsewhere None means 0 (restart at once).
        """
        self.hosts.check_pid(pid)
        if down_for is None and self.group.membership:
            self.hosts.stop(pid)
            self.group.leave(pid)
            self.wire.drop_to(pid)
            self.agenda.disarm(pid)
            return
        delay = 0.0 if down_for is None else down_for
        later = delay > 0 and not self.adversarial
        self.hosts.crash(pid, until=self.now + delay if later else None)
        self.wire.drop_to(pid)
        self.agenda.disarm(pid)
        if later:
            self.agenda.push(self.now + delay, "restart", pid)
        else:
            self.restart(pid)

    def restart(self, pid: int) -> None:
        """Rebuild process ``pid`` from its last checkpoint (JSON data) and carry on."""
        self.hosts.restart(pid)
        self._apply(pid, [])

    def replace(self, pid: int, endpoint: Endpoint) -> None:
        """Process ``pid`` continues as ``endpoint`` (say, restored from its snapshot on
        another machine); its timer is re-armed from the new endpoint's deadline."""
        self.hosts.replace(pid, endpoint)
        self.agenda.disarm(pid)
        self._apply(pid, [])

    def is_up(self, pid: int) -> bool:
        return pid not in self.hosts.down

    # -- group membership: the host's inputs -------------------------------------------------
    def suspect(self, pid: int, who: int) -> list[Action]:
        """Process ``pid``'s failure detector (the host) suspects member ``who``."""
        actions: list[Action] = self.hosts.member(pid, "suspect").suspect(who)
        self._apply(pid, actions)
        return actions

    def leave(self, pid: int) -> list[Action]:
        """Process ``pid`` leaves the group."""
        actions: list[Action] = self.hosts.member(pid, "leave").leave()
        self._apply(pid, actions)
        return actions

    def join(self, pid: int, endpoint: Endpoint) -> list[Action]:
        """A new process (or a new incarnation of a stopped one) joins at slot ``pid``:
        ``endpoint``, a joiner, takes the slot, which must be stopped or never used,
        and asks its contacts to let it in."""
        self.hosts.check_pid(pid)
        used = self.recorder.events(pid) > 0 or view_of(self.hosts.endpoints[pid]) is not None
        self.hosts.take(pid, endpoint, used)
        self.agenda.disarm(pid)
        self.group.fresh(pid)
        actions: list[Action] = endpoint.join()  # type: ignore[attr-defined]
        self._apply(pid, actions)
        return actions

    # -- applying a step's actions -----------------------------------------------------------
    def later(self, call: Callable[[], object]) -> None:
        """Run ``call`` once the step being applied now is (a hook's send goes after it)."""
        self._steps.later(call)

    def _apply(self, pid: int, actions: list[Action]) -> None:
        with self._steps.step():
            queued = self.recorder.queued[pid]
            for action in actions:
                if isinstance(action, Transmit):
                    if queued and action.message_id in queued:
                        self._sent_now(pid, action.message_id)
                    self._transmit(pid, action)
                elif isinstance(action, Deliver):
                    if queued and action.message.id in queued:
                        self._sent_now(pid, action.message.id)
                    self._deliver(pid, action.message)
                elif isinstance(action, Stable):
                    self.recorder.report_stable(pid, action.messages)
                    if self.on_stable is not None:
                        self.on_stable(self, pid, action.messages)
                elif isinstance(action, ViewChange):
                    self._view_change(pid, action)
                elif isinstance(action, StateRequest):
                    self._state_request(pid, action)
                elif isinstance(action, Excluded):
                    self.group.exclude(pid, action)
                    for mid in action.dropped:
                        queued.pop(mid, None)  # never sent: no send event
            hosts = self.hosts
            if pid in hosts.stopped:
                return
            ep = hosts.endpoints[pid]
            if hosts.checkpoints is not None:
                hosts.checkpoints[pid] = ep.snapshot()
            self.metrics.record_buffer(ep.buffered())
            self._arm(pid)

    def _arm(self, pid: int) -> None:
        """Timed mode: (re)schedule ``pid``'s timer at its endpoint's next deadline."""
        deadline = self.hosts.endpoints[pid].next_deadline()
        if deadline is not None and not self.adversarial:
            self.agenda.arm(pid, max(deadline, self.now))  # a deadline already past fires now

    def _sent_now(self, pid: int, mid: MessageId | None) -> None:
        """A message ``pid``'s group held goes out now: its send event, in this view."""
        assert mid is not None
        self.recorder.sent_now(pid, mid, self.group.current_view[pid], self.now)

    def _transmit(self, pid: int, t: Transmit) -> None:
        self.metrics.record_transmit(t.packet, t.message_id)
        if self.on_transmit is not None:
            self.on_transmit(self, pid, t)
        self.wire.send(pid, t.to, t.packet, t.message_id, self.now)

    def _deliver(self, pid: int, message: Message) -> None:
        self.group.deliver(pid, message.id)
        if self.record:
            self.recorder.deliver(pid, message, self.group.current_view[pid], self.now)
        else:
            self.metrics.deliveries += 1
        self._hand_over(pid, message)

    def _hand_over(self, pid: int, message: Message) -> None:
        """The application takes ``message``: an endpoint with an explicit consume step
        (tagged causal broadcast) learns it first; what that triggers (acknowledgements,
        Stable reports) follows the application's handling."""
        ep = self.hosts.consumer(pid)
        follow: list[Action] = ep.consume(message.id) if ep is not None else []
        if self.on_deliver is not None:
            self.on_deliver(self, pid, message)
        if follow:
            self._apply(pid, follow)

    # -- group membership: views and state transfer ------------------------------------------
    def _install(self, pid: int, view: View) -> None:
        """Process ``pid`` installs ``view``: a trace event of kind "view"."""
        self.group.install(pid, view)
        if self.record:
            self.recorder.install(pid, view, self.now)

    def _view_change(self, pid: int, change: ViewChange) -> None:
        self._install(pid, change.view)
        if self.on_state is None:
            self.group.take_state(pid, change)
        if self.on_view is not None:
            self.on_view(self, pid, change)

    def _state_request(self, pid: int, request: StateRequest) -> None:
        if self.on_state is not None:
            state = self.on_state(self, pid, request.view)
        else:
            state = self.group.state(pid)
        ep: Any = self.hosts.endpoints[pid]
        self._apply(pid, ep.provide_state(request.view, state))


__all__ = [
    "DeliverHook",
    "InFlight",
    "Link",
    "NetworkModel",
    "Simulation",
    "StableHook",
    "StateHook",
    "TransmitHook",
    "ViewHook",
    "is_member_endpoint",
    "view_of",
]
