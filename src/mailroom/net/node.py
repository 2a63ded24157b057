"""The asyncio runtime: one endpoint (or Stack) per process, its peers over TCP.

Why TCP and not UDP: TCP already gives what the layers above cannot do without
(congestion and flow control, framing of large packets, no IP fragmentation),
and the kernel batches small writes, which matters more to a Python process
than the cost of a connection. TCP does not make the group reliable, though:
a connection that breaks loses what was in flight, and a process that crashes
loses what it had not written down. That is the ``Reliable`` layer's job (it
retransmits until acknowledged) together with checkpoints, so run
``Stack(Reliable(...), ...)`` when nothing may be lost.

A ``Node`` puts five parts together: the ``Transport`` (connections, handshake,
frames: ``transport``), the step ``Engine`` (``steps``), ``Outgoing`` (the
application's sends of one turn: ``outgoing``), the ``Journal`` (trace and
checkpoint: ``journal``, ``store``) and the ``Tracer`` (``tracing``).
Rules, in words:

- Every step of the endpoint (the sends of one turn of the event loop, a batch of
  frames that arrived together, a timer) is handled the same way: persist, then
  act. The step's trace events and its inputs (in the checkpoint's log) are
  written first; only then do the ``Transmit`` packets go on the wire (or, to itself,
  back into the endpoint) and the ``Deliver`` messages reach the application
  (a callback, or ``deliveries()``, an async iterator). Timers: ``tick(now)``
  runs at ``next_deadline()`` on the event loop's clock.
- A write that fails (``OSError``: no space, too many open files...) acts on
  nothing: the step waits, written nowhere and seen by no one, and the node
  stalls: it stops reading its connections and running its timer,
  ``can_send()`` is False (a send raises ``Busy``), and it retries the write
  with a growing pause (``IO_RETRY`` doubling to 1 s), then acts. A process
  that dies meanwhile restarts from its checkpoint, where the step is not:
  its packets were never acknowledged, so their senders send them again.
- The reliable layer keeps what it sends until acknowledged; a send while it
  keeps ``max_retained`` packets (a peer down for long) raises ``Busy``.
- ``can_send()`` is False once ``max_in_flight`` of the node's broadcasts are not
  delivered back to it, until half of them are, so that a relay (a sequencer)
  queues at most that many for each sender (``flow``); a send made anyway still goes.
- Frames that are garbage, forged (bad MAC), replayed, from an unknown pid or
  from a process whose peer-table entry does not match, and connections that
  do not authenticate within ``HANDSHAKE_TIMEOUT``, are dropped and counted
  in ``stats``; the connection they came on is closed with a logged reason. The
  endpoint and the other connections are untouched. Every packet of a BATCH is
  decoded, and its header's message id checked, before any reaches the endpoint;
  a frame with an undecodable packet is garbage; an authentic packet that carries
  another message than its header names is refused alone and counted
  (``mislabeled``): the frame's other packets go on, and the connection stays up.
  A packet that decodes but that the endpoint refuses (``RemoteError``) is dropped
  and counted; the connection stays up.
- A group endpoint repairs losses itself (its views run over ``Reliable``, its
  control packets are resent), and heartbeats to a dead member are worthless
  once late, so its default outbox is a small ``GROUP_OUTBOX``.
- A group endpoint's view changes are steps like the others: the "view" trace
  event is written with the step, then the ``ViewChange`` reaches the
  application at its place among the deliveries; a ``StateRequest`` is answered
  right after (the application's state is then exactly what was delivered
  before the view) by a step of its own, whose input (the state) is logged.
  Suspicions, leaves and joins from the host are logged inputs too, so a
  restart replays them; a restart that finds a state requested but not
  provided provides it at start. Frames for a member that left are dropped.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Action, Excluded, StateRequest, View, ViewChange
from mailroom.core.endpoint import Endpoint, receive_batch
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.net.commit import Commit
from mailroom.net.config import PeerTable
from mailroom.net.connections import Batch
from mailroom.net.discovery import directory_of
from mailroom.net.entries import Entry, Joined, Left, Provided, Received, Suspected, Tick
from mailroom.net.flow import Busy as Busy
from mailroom.net.flow import Flow, check_writable
from mailroom.net.journal import Journal, Restored, open_files, resume
from mailroom.net.membership import group_of, is_member
from mailroom.net.outgoing import Outgoing
from mailroom.net.restart import Restart
from mailroom.net.service import Service
from mailroom.net.settings import GROUP_OUTBOX as GROUP_OUTBOX
from mailroom.net.settings import HANDSHAKE_TIMEOUT as HANDSHAKE_TIMEOUT
from mailroom.net.settings import MAX_IN_FLIGHT as MAX_IN_FLIGHT
from mailroom.net.settings import MAX_RETAINED as MAX_RETAINED
from mailroom.net.settings import MAX_UNAUTHENTICATED as MAX_UNAUTHENTICATED
from mailroom.net.settings import OUTBOX_LIMIT as OUTBOX_LIMIT
from mailroom.net.settings import NodeConfig as NodeConfig
from mailroom.net.stats import LOG_BURST as LOG_BURST
from mailroom.net.stats import LOG_WINDOW as LOG_WINDOW
from mailroom.net.stats import NetStats as NetStats
from mailroom.net.stats import QuietLog as QuietLog
from mailroom.net.steps import FRAME_PART as FRAME_PART
from mailroom.net.steps import Engine, Handed, Step
from mailroom.net.steps import frame_parts as frame_parts
from mailroom.net.tracing import Tracer, stack_names
from mailroom.net.transport import Transport

log = logging.getLogger("mailroom.net")

#: Seconds ``Node.depart`` waits, by default, for the view that lets this process go.
LEAVE_TIMEOUT = 2.0


class Node:
    """Hosts ``endpoint`` for process ``endpoint.pid`` and connects it to ``peers``.

    The keyword arguments are the fields of ``NodeConfig`` (or pass ``config``), e.g.
    ``checkpoint``, ``trace``, ``on_deliver`` (else read ``deliveries()``) and
    ``app_state`` (after a restart, ``resumed_state`` holds what it returned last, and
    ``resumed_changes`` what ``app_changes`` returned since).
    An endpoint with explicit consumption is told the application takes each
    delivery in the step that delivers it (the consumption is logged with the step).

    A group endpoint (``Group``, or ``HeartbeatDetector`` around one; see
    ``mailroom.net.membership``) is a member of a process group: each view it installs
    is a trace event of kind "view" and the view each event happens in is traced; its
    hooks (``on_view``, ``get_state``, ``on_excluded``, ``rejoin``) are ``NodeConfig``'s.
    A joiner asks its contacts at ``start()``, in a growable group those that discovery
    finds; ``service`` holds discovery and the quorum and lag watches (``net.service``).
    """

    def __init__(
        self,
        endpoint: Any,
        peers: PeerTable,
        key: bytes,
        config: NodeConfig | None = None,
        **options: Any,
    ) -> None:
        config = attrs.evolve(config, **options) if config is not None else NodeConfig(**options)
        if not isinstance(endpoint, Endpoint):
            raise LocalError(f"{endpoint!r} is not an endpoint (see mailroom.core.Endpoint)")
        self.config = config
        self.checkpoint_path = Path(config.checkpoint) if config.checkpoint is not None else None
        done = resume(self.checkpoint_path, endpoint, peers.n, config.rejoin)
        saved, endpoint = done.saved, done.endpoint
        if endpoint.n != peers.n:
            raise LocalError(f"the endpoint has n={endpoint.n}, the peer table {peers.n} peers")
        self.pid: int = endpoint.pid
        self.peers = peers
        self.key = key
        self.on_deliver = config.on_deliver
        self.on_stable = config.on_stable
        self.on_view = config.on_view
        self.get_state = config.get_state
        self.on_excluded = config.on_excluded
        self.resumed_state, self.resumed_changes = done.resumed_state, done.resumed_changes
        self._fresh = saved is None
        self.stats = NetStats()
        self._quiet = QuietLog()
        self.directory = directory_of(peers, self.pid, config.address, config.listen)
        sent = lambda: int(self.endpoint.sent_count)  # noqa: E731
        others = set(self.directory.addresses) - {self.pid}
        self._restart = Restart(self.pid, others, saved is not None, sent, self.stats, self._quiet)
        self.transport = Transport(
            self.pid,
            self.directory,
            key,
            config,
            self._received,
            self.stats,
            self._quiet,
            member=is_member(endpoint),
            seen=done.seen,
            on_seen=self._restart.heard,
        )
        self.trace, ckpt = open_files(saved, self.checkpoint_path, config, endpoint, peers.n)
        self._journal = Journal(
            self.trace,
            ckpt,
            config.app_state,
            done.resumed_state,
            saved is not None,
            done.seen,
            config.app_changes,
        )
        self._adopt(done)
        self._commit = Commit(
            self.pid,
            self._journal,
            self._marks,
            self._act,
            self._acted,
            self.transport.pause,
            self.stats,
            self._quiet,
        )
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._can_send = asyncio.Event()
        #: set when the group lets this process go, or it is left alone (``depart``)
        self._excluded = asyncio.Event()
        #: ``depart`` asked the group to let this process go
        self.departing = False
        self._closed = False
        self.service = Service(self, self.directory, self.join_through)

    def _adopt(self, done: Restored) -> None:
        """Host ``done``'s endpoint and what the node keeps beside it (again if it rejoins)."""
        self._endpoint = ep = done.endpoint
        self.member, self._group, self._dests = is_member(ep), group_of(ep), done.dests
        #: Deliveries of the last logged step, handed again at start when ``app_state``
        #: is kept: the state saved with that step predates them.
        self.redelivered: list[Message] = done.redelivered
        self._owed, self._rebase, self._done = done.owed, done.rebase, done
        self.stats.sent, self.stats.delivered = done.counters()
        self._tracer = (
            Tracer(self.config.run, self.pid, done.dests, self.now, self.trace, done.unsent)
            if self.trace is not None
            else None
        )
        self._engine = Engine(ep, done.dests, self._tracer, logged=self._journal.ckpt is not None)
        self._engine.view = ep.view.id if self.member and ep.joined else None
        self._flow = Flow(ep, self.config.max_retained, self.peers.n, self.config.max_in_flight)
        self._out = Outgoing(
            ep,
            self._engine,
            self._flow,
            self.stats,
            self._quiet,
            self._step,
            logged=self._journal.ckpt is not None,
            member=self.member,
            coalesce=self.config.coalesce,
            linger=self.config.linger,
            busy_gap=self.config.busy_gap,
        )
        self._out.after_turn = self.transport.flush_all
        if self.config.coalesce:  # lazy packets wait a moment for the next one that matters
            self.transport.lazy_wait = self.config.lazy_wait

    @property
    def endpoint(self) -> Any:
        """The hosted endpoint, as of every send made so far (the sends of this turn are
        taken as a step first: see ``flush``)."""
        self._out.flush()
        return self._endpoint

    def upcoming_id(self) -> MessageId:
        """The id the next message this node sends will get (the sends this turn holds
        back counted): what a host names a message by before it sends it."""
        return self._out.upcoming_id()

    @property
    def outbox_limit(self) -> int:
        """Frames kept per unconnected peer."""
        return self.transport.outbox_limit

    @property
    def app_state(self) -> Any:
        return self._journal.app_state

    # -- life cycle ------------------------------------------------------------------
    async def start(self) -> None:
        """Listen, connect to every peer, and arm the endpoint's timer (a node restored
        from a checkpoint first hears its peers: ``restart``)."""
        await self.transport.start()
        if self._restart.checking and await self._restart.confirm(
            self.transport, self.trace, self._done, self.config.handshake_seconds(), self.close
        ):
            self._adopt(self._done)
        self.service.start()
        ckpt = self._journal.ckpt
        if ckpt is not None and (self._rebase or ckpt.wants_compaction()):
            self._compact(strict=True)  # a base to log against
        if self.app_state is not None and self.redelivered:
            self._hand(list(self.redelivered))
        if self.member:
            self._start_member()
        if self._owed is not None:
            self._provide(self._owed)
            self._owed = None
        self._rearm()

    def _start_member(self) -> None:
        """A fresh member traces its initial view; a joiner asks its contacts in."""
        self._out.flush()
        ep = self._endpoint
        if self._fresh and ep.joined and self._tracer is not None:
            self._step([], [], [self._tracer.view(ep.view.id, ep.view.members)])
        if ep.view is None and self._group is not None and self._group.contacts:
            self._host_input("join", Joined())

    async def close(self) -> None:
        """Stop listening, close every connection, write the last checkpoint."""
        if self._closed:
            return
        self._out.close()  # the sends of this turn are a step like the others
        self._closed = True
        await self.service.close()
        if self._timer is not None:
            self._timer.cancel()
        await self.transport.close()
        written, steps = self._commit.close()
        for step in steps:  # written: the deliveries are the application's now
            self._hand(step.handed)
        if self._journal.ckpt is not None and written:  # else unwritten steps would count
            self._compact(strict=False)
        self._journal.close()
        self._queue.put_nowait(None)

    async def __aenter__(self) -> Node:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- the application's side ----------------------------------------------------------
    def broadcast(self, payload: Payload) -> MessageId:
        """Broadcast ``payload`` to the group; returns its message id."""
        self._check_can_issue()
        mid = self._out.broadcast(payload)
        self._flow.broadcast(1)
        return mid

    def send(self, payload: Payload, to: int) -> MessageId:
        """Send ``payload`` to process ``to``; returns its message id."""
        self._check_can_issue()
        return self._out.send(payload, to)

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[MessageId]:
        """Broadcast ``payloads`` in order; returns their message ids (consecutive).

        The deliveries are those of one ``broadcast`` per payload; an endpoint with
        ``broadcast_many`` (``Sequencer``) carries them in few packets. A batch whose
        payloads would not fit one frame is handed to the endpoint in parts that do.
        Every payload is checked first: a bad one is a LocalError and nothing is sent.
        """
        self._check_can_issue()
        ids = self._out.broadcast_many(payloads)
        self._flow.broadcast(len(ids))
        return ids

    def flush(self) -> None:
        """Take the sends made so far in this turn of the event loop as one step now
        (written down, then handed to the connections) instead of when the turn ends."""
        self._out.flush()

    def _check_can_issue(self) -> None:
        """LocalError if closed; Busy while stalled or while too much is unacknowledged."""
        if self._closed:
            raise LocalError("the node is closed")
        self._flow.admit(self._commit.stalled)

    def can_send(self) -> bool:
        """True when the node can take a send now (``Flow.can_send`` says when)."""
        return self._flow.can_send(self._commit.stalled)

    @property
    def in_flight(self) -> int:
        """This node's broadcasts not delivered back to it yet (``max_in_flight``)."""
        return self._flow.in_flight

    async def wait_can_send(self) -> None:
        """Return when the node can take a send (``can_send()``)."""
        while not self.can_send():
            self._can_send.clear()
            await self._can_send.wait()

    async def deliveries(self) -> AsyncIterator[Message]:
        """Delivered messages, in delivery order, until the node closes."""
        while (msg := await self._queue.get()) is not None:
            yield msg

    def now(self) -> float:
        return asyncio.get_running_loop().time()

    # -- group membership: the host's inputs -------------------------------------------
    @property
    def view(self) -> View | None:
        """The view a group endpoint has installed (None while joining, or not a group)."""
        view = self._endpoint.view if self.member else None
        return view if isinstance(view, View) else None

    @property
    def joined(self) -> bool:
        """True once a group endpoint has installed a view and has the application state."""
        return bool(self.member and self._endpoint.joined)

    def suspect(self, pid: int) -> None:
        """An outside failure detector suspects member ``pid`` (logged, so a restart
        replays it)."""
        self._host_input("suspect", Suspected(pid), pid)

    def leave(self) -> None:
        """Leave the group: the next view excludes this process (then ``on_excluded``)."""
        self._host_input("leave", Left())

    async def depart(self, timeout: float = LEAVE_TIMEOUT) -> bool:
        """Leave the group and wait, at most ``timeout`` seconds, until the view that lets
        this process go is installed (then ``on_excluded``); True if it was. A clean exit
        calls this before ``close()``, so that the others install a view without this
        process at once instead of suspecting it as crashed (a leaver takes part in the
        flush that lets it go, so even one of two can leave: docs/membership.md).
        Returns False at once when there is nothing to leave (not a member of a view
        with others, or closed), as soon as the others have left first, or after
        ``timeout`` (the others are gone). The quorum watch says nothing meanwhile."""
        view = self.view
        if self._closed or not self.joined or view is None or len(view.members) < 2:
            return False
        self._excluded.clear()
        self.departing = True
        self.leave()
        try:
            await asyncio.wait_for(self._excluded.wait(), timeout)
        except TimeoutError:
            return False
        return self.view is None

    def join_through(self, contacts: list[int]) -> None:
        """A joiner asks ``contacts`` (members found by discovery) to let it in (logged)."""
        self._host_input("join", Joined(contacts), contacts)

    def _host_input(self, name: str, entry: Entry, *args: Any) -> None:
        if not self.member:
            raise LocalError(f"{name}: the node does not host a group endpoint")
        if self._closed:
            raise LocalError("the node is closed")
        check_writable(self._commit.stalled)
        self._out.flush()
        actions = getattr(self._endpoint, name)(*args)
        self._step(actions, [entry.row()] if self._journal.ckpt is not None else [], [])

    def _provide(self, view: int) -> None:
        """Answer a StateRequest with the application's state, as a step of its own."""
        self._out.flush()
        state = self.get_state(view) if self.get_state is not None else None
        try:
            actions = self._endpoint.provide_state(view, state)
        except LocalError as exc:  # the view changed again meanwhile: no joiner waits
            self._quiet(logging.WARNING, "P%d: state for view %d not sent: %s", self.pid, view, exc)
            return
        ops = [Provided.of(view, state).row()] if self._journal.ckpt is not None else []
        self._step(actions, ops, [])

    # -- the network's and the clock's side ------------------------------------------------
    def _received(self, peer: int, batch: Batch) -> None:
        if self._closed:
            return
        # The sends made before it come first, in the same step (one journal write; one
        # write per peer carries both the lot and the answer to the frame).
        lot = self._out.first_part()
        tracer = self._tracer
        lines = tracer.received(batch, self._engine.view) if tracer is not None else []
        ops: list[Any] = []
        if self._journal.ckpt is not None:  # a refused packet is refused again on replay
            mixed = self._dests.fixed is None  # then the log keeps what the frame said
            ops = [
                Received.of(item.packet, item.carries if mixed else None).row() for _, item in batch
            ]
        # One step for the batch: the reliable layer answers it with one ack per peer.
        actions, errors = receive_batch(self._endpoint, [packet for packet, _ in batch])
        for exc in errors:
            self.stats.remote_errors += 1
            self._quiet(logging.WARNING, "P%d: dropped a packet from P%d: %s", self.pid, peer, exc)
        self._step(actions, ops, lines, lot)
        if tracer is not None and self._dests.fixed is None:
            self._dests.prune(self._endpoint)

    def _loopback(self, packet: object) -> None:
        if not self._closed:
            self._out.flush()
            ckpt = self._journal.ckpt
            ops = [Received.of(packet).row()] if ckpt else []
            self._step(self._endpoint.receive(packet), ops, [])

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if not self._closed and self._commit.stalled is None:
            lot = self._out.first_part()  # the sends made before it come first, in the same step
            now = self.now()
            ops = [Tick(now).row()] if self._journal.ckpt is not None else []
            self._step(self._endpoint.tick(now), ops, [], lot)

    def _rearm(self) -> None:
        deadline = self._endpoint.next_deadline()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    # -- one step: record, persist, then act --------------------------------------------
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
            step = self._engine.run(actions, ops, lines, stats.sent, stats.delivered)
        else:
            step = first.then(self._engine.run(actions, ops, lines, stats.sent, first.delivered))
        stats.delivered = step.delivered
        stats.steps += 1
        self._flow.changed()  # the endpoint took a step: flow control asks it again
        self._commit.add(step)

    def _marks(self) -> tuple[int, int]:
        """The endpoint's message count and group incarnation (for the log's head)."""
        group = self._group
        return int(self._endpoint.sent_count), int(group.incarnation) if group else 0

    def _acted(self) -> None:
        """After acting on the steps written: compact if due, wake senders, rearm."""
        ckpt = self._journal.ckpt
        if ckpt is not None and ckpt.wants_compaction():
            self._compact(strict=False)
        if self.can_send():
            self._can_send.set()
        self._rearm()

    def _act(self, step: Step) -> None:
        if step.loopback:
            loop = asyncio.get_running_loop()
            for packet in step.loopback:
                loop.call_soon(self._loopback, packet)
        if self.member:
            for item in step.handed:
                if isinstance(item, ViewChange):
                    for gone in item.left:  # frames of the old view are of no use to it
                        self.transport.drop_outbox(gone)
        if step.sends:
            self.transport.send(step.sends)
        self._flow.came_back(step.back)
        self._hand(step.handed)
        if self.on_stable is not None:
            for messages in step.stable:
                self.on_stable(messages)

    def _hand(self, handed: list[Handed]) -> None:
        """Hand a step's deliveries, views and requests to the application, in order.
        What an application callback raises is logged and counted (``app_errors``) and
        the rest of the step is still handed: the step is written already, so stopping
        would skip deliveries for good, and members whose steps are grouped otherwise
        would not skip the same ones."""
        for m in handed:
            try:
                self._hand_one(m)
            except Exception as exc:
                self.stats.app_errors += 1
                what = f"{type(m).__name__}: {type(exc).__name__}: {exc}"
                self._quiet(
                    logging.ERROR, "P%d: the application's callback raised on a %s", self.pid, what
                )

    def _hand_one(self, m: Handed) -> None:
        if type(m) is Message:
            if self.on_deliver is not None:
                self.on_deliver(m)
            else:
                self._queue.put_nowait(m)
        elif isinstance(m, ViewChange):
            if self.departing and len(m.view.members) < 2:
                self._excluded.set()  # the others left first: nobody to leave
            if self.on_view is not None:
                self.on_view(m)
        elif isinstance(m, StateRequest):
            if not self._closed:
                self._provide(m.view)
        elif isinstance(m, Excluded):
            self._excluded.set()
            if self.on_excluded is not None:
                self.on_excluded(m)
        elif self.on_deliver is not None:
            self.on_deliver(m)
        else:
            self._queue.put_nowait(m)

    def _compact(self, *, strict: bool) -> None:
        """Write a new base checkpoint; a failure only delays it (unless ``strict``)."""
        counters = (self.stats.sent, self.stats.delivered)
        unsent = self._tracer.unsent if self._tracer is not None else None
        try:
            self._journal.compact(self._endpoint, counters, self._dests, unsent, self._marks())
        except OSError as exc:
            if strict:
                raise LocalError(f"cannot write checkpoint {self.checkpoint_path}: {exc}") from None
            self.stats.io_errors += 1
            self._quiet(
                logging.WARNING,
                "P%d: checkpoint compaction failed (%s); the log keeps growing until it succeeds",
                self.pid,
                exc,
            )


# Names defined elsewhere stay importable from here (``Busy``, ``NetStats``,
# ``QuietLog``, ``NodeConfig``, the bounds, ``frame_parts``); ``__all__`` lists what is
# defined here, so each is documented once.
__all__ = ["LEAVE_TIMEOUT", "Node", "stack_names"]
