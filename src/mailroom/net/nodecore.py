"""A node's core, sans-IO: the hosted endpoint and everything that decides what it does.

``NodeCore`` is to ``Node`` what aioquic's ``QuicConnection`` is to its asyncio
protocol (or h11's ``Connection`` to a server): it imports no asyncio and no socket,
reads no clock but the ones it is given, and calls nobody back. In go the inputs:

- the application's ``broadcast``, ``send``, ``broadcast_many``, ``flush``;
- the host's ``suspect``, ``leave``, ``join`` and ``provide`` (a group endpoint);
- ``receive(peer, batch)`` (the decoded packets of the frames one read brought),
  ``loopback(packet)`` (a packet the endpoint sent itself) and ``handle_timer(now)``.

Out come, pulled by the shell:

- ``to_persist()``: the steps taken since, whose records (``Step.ops``, the
  checkpoint log's entries, and ``Step.lines``, the trace events) must be written
  down first; ``written()`` then releases those steps, and only then their packets
  (``Step.sends``: typed ``Send`` values; ``Step.loopback``) may go out and their
  deliveries (``Step.handed``) reach the application. Persist, then act: a step's
  packets and deliveries are never released before the records that cover them
  (a step not yet written stays out of reach: ``written()`` returns only what
  ``to_persist()`` handed out).
- ``get_timer()``: the endpoint's next deadline (call ``handle_timer`` then), and
  ``wake()``: when the application's gathered sends (the lot, ``outgoing``) are due
  (call ``end_turn()`` then).

Everything a step is made of comes from ``steps.Engine``; the lot from
``outgoing.Outgoing``; flow control from ``flow.Flow``. The shell (``node.Node``)
owns the connections, the files and the event loop's timers, and pumps between them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from mailroom.core.actions import Action, View
from mailroom.core.endpoint import receive_batch
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, Payload
from mailroom.net.entries import Entry, Joined, Left, Provided, Received, Suspected, Tick
from mailroom.net.flow import Flow
from mailroom.net.frames import Batch
from mailroom.net.membership import group_of, is_member
from mailroom.net.outgoing import Outgoing
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Engine, Step
from mailroom.net.tracing import Destinations, Tracer


class NodeCore:
    """The endpoint of one node with its steps, sans-IO (see the module's docstring).

    ``dests`` and ``tracer`` are the node's (``tracing``); ``logged``: the node keeps a
    checkpoint log, so every step carries its inputs as log entries (``entries``).
    The keyword bounds are ``NodeConfig``'s of the same names."""

    def __init__(
        self,
        endpoint: Any,
        dests: Destinations,
        tracer: Tracer | None,
        stats: NetStats,
        quiet: QuietLog,
        *,
        logged: bool,
        n: int,
        max_retained: int | None = None,
        max_in_flight: int | None = None,
        coalesce: bool = False,
        linger: float = 0.0,
        busy_gap: float = 0.0,
    ) -> None:
        self.endpoint = ep = endpoint
        self.pid: int = ep.pid
        self.member, self.group = is_member(ep), group_of(ep)
        self.dests, self.tracer, self.stats, self.quiet = dests, tracer, stats, quiet
        self.logged = logged
        self.engine = Engine(ep, dests, tracer, logged=logged)
        self.engine.view = ep.view.id if self.member and ep.joined else None
        self.flow = Flow(ep, max_retained, n, max_in_flight)
        self.out = Outgoing(
            ep,
            self.engine,
            self.flow,
            stats,
            quiet,
            logged=logged,
            member=self.member,
            coalesce=coalesce,
            linger=linger,
            busy_gap=busy_gap,
        )
        #: Steps taken and not handed out by ``to_persist()`` yet (read: is there work?).
        self.taken: list[Step] = []
        #: Steps handed out to persist, not confirmed written (``written()``) yet.
        self._persisting: list[Step] = []
        self.closed = False

    # -- the application's side ----------------------------------------------------------
    def broadcast(self, payload: Payload) -> MessageId:
        """Broadcast ``payload``; its id (the send waits in the lot, or is a step)."""
        mid = self.out.broadcast(payload)
        self.flow.broadcast(1)
        if self.out.ready:
            self._take_ready()
        return mid

    def send(self, payload: Payload, to: int) -> MessageId:
        """Send ``payload`` to process ``to``; its id."""
        mid = self.out.send(payload, to)
        if self.out.ready:
            self._take_ready()
        return mid

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[MessageId]:
        """Broadcast ``payloads`` in order; their (consecutive) ids."""
        ids = self.out.broadcast_many(payloads)
        self.flow.broadcast(len(ids))
        if self.out.ready:
            self._take_ready()
        return ids

    def upcoming_id(self) -> MessageId:
        """The id the next message sent will get (the lot's held-back sends counted)."""
        return self.out.upcoming_id()

    def flush(self) -> None:
        """Take the lot (the sends gathered so far) as a step now."""
        self.out.flush()
        self._take_ready()

    def wake(self) -> float | None:
        """Seconds after which ``end_turn()`` is due (0: at the end of this turn of the
        event loop), said once per lot; None: nothing new to schedule."""
        return self.out.wake()

    def end_turn(self) -> bool:
        """The lot's wait is over: take it as a step; True if there was one."""
        taken = self.out.end_turn()
        self._take_ready()
        return taken

    # -- the network's and the clock's side ------------------------------------------------
    def receive(self, peer: int, batch: Batch) -> list[RemoteError]:
        """The packets of the frames one read brought from ``peer``: one step (after the
        lot's sends). Returns the packets the endpoint refused (``RemoteError``: each is
        counted, logged and dropped; the endpoint is as before it for each of them)."""
        lot = self.out.first_part()
        tracer = self.tracer
        lines = tracer.received(batch, self.engine.view) if tracer is not None else []
        ops: list[Any] = []
        if self.logged:  # a refused packet is refused again on replay
            mixed = self.dests.fixed is None  # then the log keeps what the frame said
            ops = [
                Received.of(item.packet, item.carries if mixed else None).row() for _, item in batch
            ]
        # One step for the batch: the reliable layer answers it with one ack per peer.
        actions, errors = receive_batch(self.endpoint, [packet for packet, _ in batch])
        for exc in errors:
            self.stats.remote_errors += 1
            self.quiet(logging.WARNING, "P%d: dropped a packet from P%d: %s", self.pid, peer, exc)
        self._step(actions, ops, lines, lot)
        if tracer is not None and self.dests.fixed is None:
            self.dests.prune(self.endpoint)
        return errors

    def loopback(self, packet: object) -> None:
        """A packet the endpoint sent to itself, received as a step of its own."""
        self.flush()
        ops = [Received.of(packet).row()] if self.logged else []
        self._step(self.endpoint.receive(packet), ops, [])

    def handle_timer(self, now: float) -> None:
        """The endpoint's timer at ``now`` (after the lot's sends, in the same step)."""
        lot = self.out.first_part()
        ops = [Tick(now).row()] if self.logged else []
        self._step(self.endpoint.tick(now), ops, [], lot)

    def get_timer(self) -> float | None:
        """When ``handle_timer`` is due next (None: no timer)."""
        deadline: float | None = self.endpoint.next_deadline()
        return deadline

    # -- group membership: the host's inputs -------------------------------------------
    @property
    def view(self) -> View | None:
        """The view a group endpoint has installed (None while joining, or not a group)."""
        view = self.endpoint.view if self.member else None
        return view if isinstance(view, View) else None

    @property
    def joined(self) -> bool:
        """True once a group endpoint has installed a view and has the application state."""
        return bool(self.member and self.endpoint.joined)

    def suspect(self, pid: int) -> None:
        """An outside failure detector suspects member ``pid`` (a logged input)."""
        self._host_input("suspect", Suspected(pid), pid)

    def leave(self) -> None:
        """Leave the group (a logged input)."""
        self._host_input("leave", Left())

    def join(self, contacts: list[int] | None = None) -> None:
        """Ask ``contacts`` (None: the endpoint's own) to let this process in (logged)."""
        if contacts is None:
            self._host_input("join", Joined())
        else:
            self._host_input("join", Joined(contacts), contacts)

    def provide(self, view: int, state: Any) -> bool:
        """Answer view ``view``'s StateRequest with the application's ``state``, as a
        step of its own; False (logged) if the view changed again meanwhile."""
        self.flush()
        try:
            actions = self.endpoint.provide_state(view, state)
        except LocalError as exc:  # the view changed again meanwhile: no joiner waits
            self.quiet(logging.WARNING, "P%d: state for view %d not sent: %s", self.pid, view, exc)
            return False
        ops = [Provided.of(view, state).row()] if self.logged else []
        self._step(actions, ops, [])
        return True

    def trace_view(self) -> None:
        """A fresh member's initial view, as a trace event of a step of its own."""
        self.flush()
        ep = self.endpoint
        if ep.joined and self.tracer is not None:
            self._step([], [], [self.tracer.view(ep.view.id, ep.view.members)])

    def check_member(self, name: str) -> None:
        """LocalError unless the endpoint is a group's (for host input ``name``)."""
        if not self.member:
            raise LocalError(f"{name}: the node does not host a group endpoint")

    def _host_input(self, name: str, entry: Entry, *args: Any) -> None:
        self.check_member(name)
        self.flush()
        actions = getattr(self.endpoint, name)(*args)
        self._step(actions, [entry.row()] if self.logged else [], [])

    # -- out: steps to persist, then act on ----------------------------------------------
    def to_persist(self) -> list[Step]:
        """Every step taken and not confirmed written, in order: write their records
        (``ops``: checkpoint log entries; ``lines``: trace events) down, then call
        ``written()``. Called again before ``written()`` (a write failed), it returns
        them again, with the steps taken since."""
        if self.taken:
            self._persisting += self.taken
            self.taken = []
        return list(self._persisting)

    def written(self) -> list[Step]:
        """The steps ``to_persist()`` handed out are written down: they are released to
        act on, in order (their ``sends``, ``loopback``, ``handed``, ``stable``)."""
        steps, self._persisting = self._persisting, []
        flow = self.flow
        for step in steps:
            flow.came_back(step.back)
        return steps

    def marks(self) -> tuple[int, int]:
        """The endpoint's message count and group incarnation (for the log's head)."""
        group = self.group
        return int(self.endpoint.sent_count), int(group.incarnation) if group else 0

    def close(self) -> None:
        """Take the lot; take no input after."""
        self.out.close()
        self._take_ready()
        self.closed = True

    # -- one step ----------------------------------------------------------------------
    def _take_ready(self) -> None:
        """The lots ``Outgoing`` took, each as a step."""
        for actions, ops, lines in self.out.take_ready():
            self._step(actions, ops, lines)

    def _step(
        self,
        actions: Sequence[Action],
        ops: list[Any],
        lines: list[bytes],
        first: Step | None = None,
    ) -> None:
        """One step of ``actions`` (after inputs ``ops`` and trace ``lines``), after
        ``first`` (the lot's part, ``Outgoing.first_part``) if given."""
        stats = self.stats
        if first is None:
            step = self.engine.run(actions, ops, lines, stats.sent, stats.delivered)
        else:
            step = first.then(self.engine.run(actions, ops, lines, stats.sent, first.delivered))
        stats.delivered = step.delivered
        stats.steps += 1
        self.flow.changed()  # the endpoint took a step: flow control asks it again
        self.taken.append(step)


__all__ = ["NodeCore"]
