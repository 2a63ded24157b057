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
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from mailroom.core.actions import (
    Action,
    Deliver,
    Excluded,
    Stable,
    StateRequest,
    Transmit,
    View,
    ViewChange,
)
from mailroom.core.endpoint import (
    ConsumingEndpoint,
    Endpoint,
    broadcast_batch,
    consumer,
    require,
)
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.sim.faults import Partition, restore_endpoint
from mailroom.sim.metrics import Metrics, metadata_size
from mailroom.trace.events import Event
from mailroom.trace.header import TraceHeader

Link = tuple[int, int]


@attrs.frozen
class NetworkModel:
    """Delays are uniform in ``delay`` (or ``links[(src, dst)]``); self-sends take ``local``."""

    delay: tuple[float, float] = (1.0, 1.0)
    links: dict[Link, tuple[float, float]] = attrs.field(factory=dict)
    duplicate: float = 0.0
    loss: float = 0.0
    local: float = 0.0

    def delay_range(self, src: int, dst: int) -> tuple[float, float]:
        if (src, dst) in self.links:
            return self.links[(src, dst)]
        if src == dst:
            return (self.local, self.local)
        return self.delay


@attrs.frozen
class InFlight:
    """A packet on the wire."""

    id: int
    src: int
    dst: int
    packet: object
    message_id: MessageId | None
    sent_at: float
    arrive_at: float


DeliverHook = Callable[["Simulation", int, Message], None]
StableHook = Callable[["Simulation", int, tuple[MessageId, ...]], None]
TransmitHook = Callable[["Simulation", int, Transmit], None]
ViewHook = Callable[["Simulation", int, ViewChange], None]
StateHook = Callable[["Simulation", int, int], Payload]


def view_of(endpoint: object) -> View | None:
    """The view a membership endpoint has installed (None for other endpoints)."""
    view = getattr(endpoint, "view", None)
    return view if isinstance(view, View) else None


def is_member_endpoint(endpoint: object) -> bool:
    """True for endpoints of group membership (they say which view a send goes in)."""
    return hasattr(endpoint, "sending_view")


class Simulation:
    """N endpoints wired through a simulated network."""

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
        self.endpoints = list(endpoints)
        self.n = len(self.endpoints)
        for pid, ep in enumerate(self.endpoints):
            if not isinstance(ep, Endpoint):
                raise LocalError(f"{ep!r} is not an endpoint (see mailroom.core.Endpoint)")
            if ep.pid != pid or ep.n != self.n:
                raise LocalError(
                    f"endpoint {pid} has pid={ep.pid}, n={ep.n}; expected {pid}, {self.n}"
                )
        self.network = network or NetworkModel()
        self.random = random.Random(seed)
        self.seed = seed
        self.adversarial = adversarial
        self.run_name = run
        self.on_deliver = on_deliver
        self.on_stable = on_stable
        #: Sees every packet an endpoint transmits (before loss): to measure the wire.
        self.on_transmit = on_transmit
        self.now = 0.0
        self.in_flight: dict[int, InFlight] = {}
        self.trace: list[Event] = []
        self.metrics = Metrics()
        self.delivered: list[list[Message]] = [[] for _ in range(self.n)]
        self.stable: list[list[MessageId]] = [[] for _ in range(self.n)]
        #: (pid, message, len(trace) when the Stable action was applied)
        self.stable_log: list[tuple[int, MessageId, int]] = []
        self._next_packet = 0
        self._queue: list[tuple[float, int, str, Any]] = []
        self._order = 0
        self._event_seq = [0] * self.n
        self._vc: list[dict[int, int]] = [{} for _ in range(self.n)]
        self._send_vc: dict[MessageId, dict[int, int]] = {}
        self._sent_at: dict[MessageId, float] = {}
        self._dest: dict[MessageId, tuple[int, ...]] = {}
        self._timers: dict[int, float] = {}
        self._last_sent: dict[int, int] = {}
        #: Faults (sim/faults.py): active partitions, crashed processes and when they
        #: restart, and each process's last checkpoint when ``checkpoints`` is on.
        self.partitions: list[Partition] = []
        self.down: dict[int, float] = {}
        self.crashes = 0
        self.checkpoints: list[Any] | None = (
            [ep.snapshot() for ep in self.endpoints] if checkpoints else None
        )
        #: False keeps no per-message history (trace, delivered lists, delays): for soaks.
        self.record = record
        #: per pid: (endpoint, the endpoint if the host must call its consume)
        self._consumers: dict[int, tuple[Endpoint, ConsumingEndpoint | None]] = {}
        #: Group membership: hooks, each process's installed view id (None while it
        #: is out), the application state the default ``on_state`` transfers, the
        #: views installed and the exclusions, per process; crash-stopped processes.
        self.on_view = on_view
        self.on_state = on_state
        self.membership = any(is_member_endpoint(ep) for ep in self.endpoints)
        self.current_view: list[int | None] = [None] * self.n
        self.app_state: list[list[list[int]]] = [[] for _ in range(self.n)]
        self.views: list[list[View]] = [[] for _ in range(self.n)]
        self.excluded: list[tuple[int, Excluded]] = []
        self.stopped: set[int] = set()
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
        net = self.network
        settings: dict[str, Any] = {
            "seed": self.seed,
            "run": self.run_name,
            "adversarial": self.adversarial,
            "delay": list(net.delay),
            "duplicate": net.duplicate,
            "loss": net.loss,
        }
        if net.links:
            settings["links"] = {f"{s}->{d}": list(r) for (s, d), r in sorted(net.links.items())}
        return TraceHeader(producer, protocol, tuple(promises), self.n, settings)

    # -- the application's side -----------------------------------------------------
    def send(self, pid: int, payload: Payload, to: int) -> MessageId:
        """Process ``pid`` sends ``payload`` to ``to`` now; returns the message id."""
        return self._issue(pid, payload, (to,), "unicast", lambda ep: ep.send(payload, to=to))

    def broadcast(self, pid: int, payload: Payload) -> MessageId:
        """Process ``pid`` broadcasts ``payload`` now; returns the message id."""
        dest = tuple(range(self.n))
        return self._issue(pid, payload, dest, "broadcast", lambda ep: ep.broadcast(payload))

    def broadcast_many(self, pid: int, payloads: Sequence[Payload]) -> list[MessageId]:
        """Process ``pid`` broadcasts ``payloads`` now as one step (``broadcast_batch``:
        one packet for the lot where the endpoint can); returns their message ids."""
        batch = list(payloads)
        dest = tuple(range(self.n))
        return self._issue_many(
            pid, batch, dest, "broadcast", lambda ep: broadcast_batch(ep, batch)
        )

    def multicast(self, pid: int, payload: Payload, to: Sequence[int]) -> MessageId:
        """Process ``pid`` multicasts ``payload`` to the set ``to`` now."""
        dest = tuple(sorted(set(to)))
        return self._issue(
            pid, payload, dest, "multicast", lambda ep: ep.multicast(payload, to=dest)
        )

    def schedule(self, time: float, op: Callable[[Simulation], object]) -> None:
        """Run ``op(sim)`` at simulated ``time`` (timed mode)."""
        self._push(time, "op", op)

    def _issue(
        self,
        pid: int,
        payload: Payload,
        dest: tuple[int, ...],
        capability: str,
        call: Callable[[Any], list[Action]],
    ) -> MessageId:
        return self._issue_many(pid, [payload], dest, capability, call)[0]

    def _issue_many(
        self,
        pid: int,
        payloads: list[Payload],
        dest: tuple[int, ...],
        capability: str,
        call: Callable[[Any], list[Action]],
    ) -> list[MessageId]:
        """Run ``call`` (one step sending ``payloads``) at ``pid``: record a send event
        per message, then apply the step's actions."""
        if type(pid) is not int or not 0 <= pid < self.n:
            raise LocalError(f"P{pid!r} is not a process of this simulation")
        if pid in self.stopped:
            raise LocalError(f"P{pid} has crashed and stopped")
        if pid in self.down:
            raise LocalError(f"P{pid} has crashed and is down until {self.down[pid]}")
        ep = self.endpoints[pid]
        require(ep, capability)
        before = ep.sent_count
        view = getattr(ep, "sending_view", None)
        actions = call(ep)
        mids = [MessageId(pid, before + 1 + k) for k in range(len(payloads))]
        if mids:
            self._last_sent[pid] = mids[-1].seq
        self.metrics.app_messages += len(mids)
        if not self.record:
            self._apply(pid, actions)
            return mids
        vc = self._vc[pid]
        for mid, payload in zip(mids, payloads, strict=True):
            self._sent_at[mid] = self.now
            self._dest[mid] = dest
            vc[pid] = vc.get(pid, 0) + 1
            self._send_vc[mid] = dict(vc)
            self._record(pid, "send", mid, pid, dest, payload, dict(vc), view)
        self._apply(pid, actions)
        return mids

    # -- the network's side ----------------------------------------------------------
    def arrive(self, packet_id: int) -> list[Action]:
        """The in-flight packet ``packet_id`` reaches its destination now."""
        p = self.in_flight.pop(packet_id)
        if self.adversarial:
            self.now += 1.0  # each chosen arrival is one unit of time
        if p.dst in self.down or any(c.cuts(p.src, p.dst, self.now) for c in self.partitions):
            self.metrics.dropped += 1  # the process is down, or the link is cut
            return []
        if p.message_id is not None and self.record:
            dest = self._dest.get(p.message_id, (p.dst,))
            origin = p.message_id.origin
            view = self.current_view[p.dst]
            self._record(p.dst, "receive", p.message_id, origin, dest, None, None, view)
        actions = self.endpoints[p.dst].receive(p.packet)
        self._apply(p.dst, actions)
        return actions

    def duplicate(self, packet_id: int) -> int:
        """Put a copy of an in-flight packet on the wire; returns the copy's id."""
        p = self.in_flight[packet_id]
        self.metrics.duplicated += 1
        return self._put(p.src, p.dst, p.packet, p.message_id)

    def drop(self, packet_id: int) -> None:
        """Lose an in-flight packet."""
        del self.in_flight[packet_id]
        self.metrics.dropped += 1

    def packets(self, message: MessageId | None = None, to: int | None = None) -> list[InFlight]:
        """In-flight packets, oldest first, optionally only those carrying ``message`` to ``to``."""
        return [
            p
            for p in sorted(self.in_flight.values(), key=lambda p: p.id)
            if (message is None or p.message_id == message) and (to is None or p.dst == to)
        ]

    def arrive_message(self, message: MessageId, to: int) -> list[Action]:
        """The oldest in-flight packet carrying ``message`` to ``to`` arrives now."""
        found = self.packets(message, to)
        if not found:
            raise LocalError(f"no packet carrying {message} to P{to} is in flight")
        return self.arrive(found[0].id)

    # -- running ---------------------------------------------------------------------------
    def step(self) -> bool:
        """Timed mode: process the next event in time order; False when none is left."""
        while self._queue:
            time, _, kind, data = heapq.heappop(self._queue)
            if kind == "arrive" and data not in self.in_flight:
                continue  # dropped meanwhile
            if kind == "timer" and self._timers.get(data) != time:
                continue  # superseded deadline
            if kind == "timer" and data in self.down:
                del self._timers[data]
                continue  # a crashed process has no timers
            self.now = max(self.now, time)
            if kind == "arrive":
                self.arrive(data)
            elif kind == "op":
                data(self)
            elif kind == "restart":
                self.restart(data)
            else:
                del self._timers[data]
                self._apply(data, self.endpoints[data].tick(self.now))
            return True
        return False

    def run(self, until: float | None = None, max_steps: int = 10_000_000) -> None:
        """Timed mode: run to quiescence (or to time ``until``)."""
        for _ in range(max_steps):
            if until is not None and self._queue and self._queue[0][0] > until:
                return
            if not self.step():
                return
        raise RuntimeError(f"simulation did not quiesce within {max_steps} steps")

    def quiescent(self) -> bool:
        return not self.in_flight and all(
            ep.buffered() == 0 for q, ep in enumerate(self.endpoints) if q not in self.stopped
        )

    # -- faults (sim/faults.py) -------------------------------------------------------------
    def partition(self, groups: Sequence[Sequence[int]], until: float) -> Partition:
        """Cut the links between ``groups`` until time ``until``, when the partition heals."""
        cut = Partition.of(groups, until)
        self.partitions = [c for c in self.partitions if c.until > self.now] + [cut]
        return cut

    def crash(self, pid: int, down_for: float | None = None) -> None:
        """Process ``pid`` loses its memory; it restarts from its last checkpoint after
        ``down_for`` (timed mode) or at once. Packets on their way to it are lost.

        In a membership run, ``down_for`` None is crash-stop: the process never comes
        back (``join`` may put a new incarnation in its place); its packets already on
        the wire still arrive. Elsewhere None means 0 (restart at once).
        """
        self._check_pid(pid)
        if down_for is None and self.membership:
            if pid in self.stopped:
                raise LocalError(f"P{pid} has already stopped")
            self.crashes += 1
            self.stopped.add(pid)
            self.down[pid] = math.inf
            self.current_view[pid] = None
            for p in [p for p in self.in_flight.values() if p.dst == pid]:
                self.drop(p.id)
            self._timers.pop(pid, None)
            return
        down_for = 0.0 if down_for is None else down_for
        if self.checkpoints is None:
            raise LocalError("crash() needs Simulation(..., checkpoints=True)")
        if pid in self.stopped:
            raise LocalError(f"P{pid} has stopped for good; it cannot restart")
        self.crashes += 1
        for p in [p for p in self.in_flight.values() if p.dst == pid]:
            self.drop(p.id)
        self._timers.pop(pid, None)
        if down_for > 0 and not self.adversarial:
            self.down[pid] = self.now + down_for
            self._push(self.now + down_for, "restart", pid)
        else:
            self.restart(pid)

    def restart(self, pid: int) -> None:
        """Rebuild process ``pid`` from its last checkpoint (JSON data) and carry on."""
        assert self.checkpoints is not None and pid not in self.stopped
        self.down.pop(pid, None)
        self.endpoints[pid] = restore_endpoint(self.checkpoints[pid])
        self._apply(pid, [])

    def replace(self, pid: int, endpoint: Endpoint) -> None:
        """Process ``pid`` continues as ``endpoint`` (say, restored from its snapshot on
        another machine); its timer is re-armed from the new endpoint's deadline."""
        if not isinstance(endpoint, Endpoint) or (endpoint.pid, endpoint.n) != (pid, self.n):
            raise LocalError(f"{endpoint!r} cannot stand in for P{pid} of {self.n}")
        self.endpoints[pid] = endpoint
        self._timers.pop(pid, None)
        self._apply(pid, [])

    def is_up(self, pid: int) -> bool:
        return pid not in self.down

    # -- group membership: the host's inputs -------------------------------------------------
    def suspect(self, pid: int, who: int) -> list[Action]:
        """Process ``pid``'s failure detector (the host) suspects member ``who``."""
        ep = self._member(pid, "suspect")
        actions: list[Action] = ep.suspect(who)
        self._apply(pid, actions)
        return actions

    def leave(self, pid: int) -> list[Action]:
        """Process ``pid`` leaves the group."""
        ep = self._member(pid, "leave")
        actions: list[Action] = ep.leave()
        self._apply(pid, actions)
        return actions

    def join(self, pid: int, endpoint: Endpoint) -> list[Action]:
        """A new process (or a new incarnation of a stopped one) joins at slot ``pid``:
        ``endpoint``, a joiner, takes the slot, which must be stopped or never used,
        and asks its contacts to let it in."""
        self._check_pid(pid)
        if not isinstance(endpoint, Endpoint) or (endpoint.pid, endpoint.n) != (pid, self.n):
            raise LocalError(f"{endpoint!r} cannot stand in for P{pid} of {self.n}")
        if not callable(getattr(endpoint, "join", None)):
            raise LocalError(f"{endpoint!r} has no join(): it is not a group endpoint")
        used = self._event_seq[pid] > 0 or view_of(self.endpoints[pid]) is not None
        if used and pid not in self.stopped:
            raise LocalError(f"P{pid} is running; only a stopped or unused slot takes a joiner")
        if endpoint.sent_count < self._last_sent.get(pid, 0):
            raise LocalError(
                f"the joiner at P{pid} would reuse message ids: it has sent "
                f"{endpoint.sent_count}, P{pid} had sent {self._last_sent[pid]}"
            )
        self.stopped.discard(pid)
        self.down.pop(pid, None)
        self._timers.pop(pid, None)
        self.endpoints[pid] = endpoint
        self.membership = True
        self.current_view[pid] = None
        self.app_state[pid] = []
        if self.checkpoints is not None:
            self.checkpoints[pid] = endpoint.snapshot()
        actions: list[Action] = endpoint.join()  # type: ignore[attr-defined]
        self._apply(pid, actions)
        return actions

    def _member(self, pid: int, what: str) -> Any:
        self._check_pid(pid)
        if pid in self.down:
            raise LocalError(f"P{pid} is down")
        ep = self.endpoints[pid]
        if not callable(getattr(ep, what, None)):
            raise LocalError(f"{ep!r} has no {what}(): it is not a group endpoint")
        return ep

    def _check_pid(self, pid: object) -> None:
        if type(pid) is not int or not 0 <= pid < self.n:
            raise LocalError(f"P{pid!r} is not a process of this simulation")

    def _install(self, pid: int, view: View) -> None:
        """Process ``pid`` installs ``view``: a trace event of kind "view"."""
        self.current_view[pid] = view.id
        self.views[pid].append(view)
        if self.record:
            mid = MessageId(0, view.id)
            self._record(pid, "view", mid, pid, view.members, None, None, view.id)

    def _view_change(self, pid: int, change: ViewChange) -> None:
        self._install(pid, change.view)
        if change.state is not None and self.on_state is None:
            self.app_state[pid] = [list(m) for m in change.state]
        if self.on_view is not None:
            self.on_view(self, pid, change)

    def _state_request(self, pid: int, request: StateRequest) -> None:
        if self.on_state is not None:
            state = self.on_state(self, pid, request.view)
        else:
            state = [list(m) for m in self.app_state[pid]]
        self._apply(pid, self.endpoints[pid].provide_state(request.view, state))  # type: ignore[attr-defined]

    def fire(self, pid: int) -> list[Action]:
        """Adversarial mode: time jumps to ``pid``'s next deadline and its timer fires."""
        if pid in self.stopped:
            return []
        deadline = self.endpoints[pid].next_deadline()
        if deadline is None:
            return []
        self.now = max(self.now, deadline)
        actions = self.endpoints[pid].tick(self.now)
        self._apply(pid, actions)
        return actions

    # -- internals -------------------------------------------------------------------------
    def _push(self, time: float, kind: str, data: Any) -> None:
        self._order += 1
        heapq.heappush(self._queue, (time, self._order, kind, data))

    def _put(self, src: int, dst: int, packet: object, message_id: MessageId | None) -> int:
        self._next_packet += 1
        pid = self._next_packet
        lo, hi = self.network.delay_range(src, dst)
        arrive_at = self.now + (lo if lo == hi else self.random.uniform(lo, hi))
        self.in_flight[pid] = InFlight(pid, src, dst, packet, message_id, self.now, arrive_at)
        if not self.adversarial:
            self._push(arrive_at, "arrive", pid)
        return pid

    def _apply(self, pid: int, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Transmit):
                self._transmit(pid, action)
            elif isinstance(action, Deliver):
                self._deliver(pid, action.message)
            elif isinstance(action, Stable):
                self.stable[pid].extend(action.messages)
                mark = len(self.trace)
                self.stable_log.extend((pid, m, mark) for m in action.messages)
                if self.on_stable is not None:
                    self.on_stable(self, pid, action.messages)
            elif isinstance(action, ViewChange):
                self._view_change(pid, action)
            elif isinstance(action, StateRequest):
                self._state_request(pid, action)
            elif isinstance(action, Excluded):
                self.current_view[pid] = None
                self.app_state[pid] = []
                self.excluded.append((pid, action))
        if pid in self.stopped:
            return
        ep = self.endpoints[pid]
        if self.checkpoints is not None:
            self.checkpoints[pid] = ep.snapshot()
        size = ep.buffered()
        self.metrics.record_buffer(size)
        self._arm(pid)

    def _arm(self, pid: int) -> None:
        """Timed mode: (re)schedule ``pid``'s timer at its endpoint's next deadline."""
        deadline = self.endpoints[pid].next_deadline()
        if deadline is not None and not self.adversarial:
            at = max(deadline, self.now)  # a deadline already past fires now
            if self._timers.get(pid) != at:
                self._timers[pid] = at
                self._push(at, "timer", pid)

    def _transmit(self, pid: int, t: Transmit) -> None:
        m = self.metrics
        m.packets += 1
        size = metadata_size(t.packet)
        if t.message_id is None:
            m.control_packets += 1
        else:
            m.data_packets += 1
            m.data_metadata_bytes += size
        m.metadata_bytes += size
        if self.on_transmit is not None:
            self.on_transmit(self, pid, t)
        if any(c.cuts(pid, t.to, self.now) for c in self.partitions):
            m.dropped += 1
            return
        if not self.adversarial:
            if self.network.loss and self.random.random() < self.network.loss:
                m.dropped += 1
                return
            if self.network.duplicate and self.random.random() < self.network.duplicate:
                m.duplicated += 1
                self._put(pid, t.to, t.packet, t.message_id)
        self._put(pid, t.to, t.packet, t.message_id)

    def _consumer(self, pid: int) -> ConsumingEndpoint | None:
        ep = self.endpoints[pid]
        cached = self._consumers.get(pid)
        if cached is None or cached[0] is not ep:
            cached = (ep, consumer(ep))
            self._consumers[pid] = cached
        return cached[1]

    def _deliver(self, pid: int, message: Message) -> None:
        if self.membership:
            self.app_state[pid].append([message.id.origin, message.id.seq])
        if not self.record:
            self.metrics.deliveries += 1
            self._hand_over(pid, message)
            return
        mid = message.id
        vc = self._vc[pid]
        for k, v in self._send_vc.get(mid, {}).items():
            if v > vc.get(k, 0):
                vc[k] = v
        vc[pid] = vc.get(pid, 0) + 1
        dest = self._dest.get(mid, (pid,))
        view = self.current_view[pid]
        self._record(pid, "deliver", mid, message.sender, dest, message.payload, dict(vc), view)
        self.delivered[pid].append(message)
        if mid in self._sent_at:
            self.metrics.record_delay(self.now - self._sent_at[mid])
        self._hand_over(pid, message)

    def _hand_over(self, pid: int, message: Message) -> None:
        """The application takes ``message``: an endpoint with an explicit consume step
        (tagged causal broadcast) learns it first; what that triggers (acknowledgements,
        Stable reports) follows the application's handling."""
        ep = self._consumer(pid)
        follow: list[Action] = ep.consume(message.id) if ep is not None else []
        if self.on_deliver is not None:
            self.on_deliver(self, pid, message)
        if follow:
            self._apply(pid, follow)

    def _record(
        self,
        pid: int,
        kind: str,
        mid: MessageId,
        sender: int,
        dest: tuple[int, ...],
        payload: Payload,
        vc: dict[int, int] | None,
        view: int | None = None,
    ) -> None:
        self._event_seq[pid] += 1
        self.trace.append(
            Event(
                run=self.run_name,
                process=pid,
                seq=self._event_seq[pid],
                kind=kind,
                message=mid,
                sender=sender,
                dest=dest,
                vc=vc,
                time=self.now,
                payload=payload,
                view=view,
            )
        )
