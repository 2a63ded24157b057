"""The asyncio runtime: one endpoint (or Stack) per process, its peers over TCP.

Why TCP and not UDP: TCP already gives what the layers above cannot do without
(congestion and flow control, framing of large packets, no IP fragmentation),
and the kernel batches small writes, which matters more to a Python process
than the cost of a connection. TCP does not make the group reliable, though:
a connection that breaks loses what was in flight, and a process that crashes
loses what it had not written down. That is the ``Reliable`` layer's job (it
retransmits until acknowledged) together with checkpoints, so run
``Stack(Reliable(...), ...)`` when nothing may be lost.

A ``Node`` is a thin asyncio shell around a sans-IO ``NodeCore`` (``nodecore``: the
endpoint, the step ``Engine`` of ``steps``, the application's sends of one turn of
``outgoing``, flow control), as aioquic's asyncio protocol is around its
``QuicConnection``. The shell owns the ``Transport`` (connections, handshake,
frames: ``transport``), the ``Journal`` (trace and checkpoint: ``journal``,
``store``) with ``Commit``, and the event loop's timers, and pumps between them
(``_pump``); nothing it owns calls back into it but the transport, which reports
to it as to its protocol (``frames_arrived``).
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

from mailroom.core.actions import Excluded, StateRequest, View, ViewChange
from mailroom.core.endpoint import Endpoint
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.net.commit import Commit
from mailroom.net.config import PeerTable
from mailroom.net.discovery import directory_of
from mailroom.net.flow import Busy as Busy
from mailroom.net.flow import check_writable
from mailroom.net.frames import Batch
from mailroom.net.journal import Journal, Restored, open_files, resume
from mailroom.net.membership import is_member
from mailroom.net.nodecore import NodeCore
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
from mailroom.net.steps import Handed, Step
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
        others = set(self.directory.addresses) - {self.pid}
        self._restart = Restart(self.pid, others, saved is not None, self.stats, self._quiet)
        #: The connections; what they bring is reported to this node (``frames_arrived``,
        #: ``peer_has_seen``), as an asyncio transport reports to its protocol.
        self.transport = Transport(
            self.pid,
            self.directory,
            key,
            config,
            self,
            self.stats,
            self._quiet,
            member=is_member(endpoint),
            seen=done.seen,
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
        self._commit = Commit(self.pid, self._journal, self.stats, self._quiet)
        self._adopt(done)
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        #: the end of the lot's wait (``NodeCore.wake``), and a write's retry, when due
        self._turn: asyncio.Handle | None = None
        self._retry: asyncio.TimerHandle | None = None
        self._queue: asyncio.Queue[Message | None] = asyncio.Queue()
        self._can_send = asyncio.Event()
        #: set when the group lets this process go, or it is left alone (``depart``)
        self._excluded = asyncio.Event()
        #: ``depart`` asked the group to let this process go
        self.departing = False
        self._closed = False
        self.service = Service(self, self.directory)

    def _adopt(self, done: Restored) -> None:
        """Host ``done``'s endpoint and what the node keeps beside it (again if it rejoins)."""
        ep = done.endpoint
        self.member = is_member(ep)
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
        config = self.config
        #: The sans-IO core: the endpoint and its steps (``nodecore``).
        self.core = NodeCore(
            ep,
            done.dests,
            self._tracer,
            self.stats,
            self._quiet,
            logged=self._journal.ckpt is not None,
            n=self.peers.n,
            max_retained=config.max_retained,
            max_in_flight=config.max_in_flight,
            coalesce=config.coalesce,
            linger=config.linger,
            busy_gap=config.busy_gap,
        )
        if config.coalesce:  # lazy packets wait a moment for the next one that matters
            self.transport.lazy_wait = config.lazy_wait
            self.transport.lazy_alone = config.lazy_alone

    @property
    def endpoint(self) -> Any:
        """The hosted endpoint. Reading it does nothing: the sends this turn holds back
        (gathered into one step, ``outgoing``) reach it when taken; ``flush()`` takes
        them now."""
        return self.core.endpoint

    def upcoming_id(self) -> MessageId:
        """The id the next message this node sends will get (the sends this turn holds
        back counted): what a host names a message by before it sends it."""
        return self.core.upcoming_id()

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
        if self._restart.checking:
            try:
                rejoined = await self._restart.confirm(
                    self.transport, self.trace, self._done, self.config.handshake_seconds()
                )
            except LocalError:  # behind its peers and cannot rejoin
                await self.close()
                raise
            if rejoined:
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
        core = self.core
        core.flush()
        if self._fresh:
            core.trace_view()
        group = core.group
        if core.endpoint.view is None and group is not None and group.contacts:
            core.join()
        self._pump()

    async def close(self) -> None:
        """Stop listening, close every connection, write the last checkpoint."""
        if self._closed:
            return
        core = self.core
        core.close()  # the sends of this turn are a step like the others
        self._pump()
        self._closed = True
        for handle in (self._turn, self._retry, self._timer):
            if handle is not None:
                handle.cancel()
        await self.service.close()
        await self.transport.close()
        written = self._commit.close(core.to_persist(), core.marks())
        if written:  # the deliveries are the application's now
            for step in core.written():
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
        mid = self.core.broadcast(payload)
        self._sent()
        return mid

    def send(self, payload: Payload, to: int) -> MessageId:
        """Send ``payload`` to process ``to``; returns its message id."""
        self._check_can_issue()
        mid = self.core.send(payload, to)
        self._sent()
        return mid

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[MessageId]:
        """Broadcast ``payloads`` in order; returns their message ids (consecutive).

        The deliveries are those of one ``broadcast`` per payload; an endpoint with
        ``broadcast_many`` (``Sequencer``) carries them in few packets. A batch whose
        payloads would not fit one frame is handed to the endpoint in parts that do.
        Every payload is checked first: a bad one is a LocalError and nothing is sent.
        """
        self._check_can_issue()
        ids = self.core.broadcast_many(payloads)
        self._sent()
        return ids

    def flush(self) -> None:
        """Take the sends made so far in this turn of the event loop as one step now
        (written down, then handed to the connections) instead of when the turn ends."""
        self.core.flush()
        self._pump()

    def _sent(self) -> None:
        """After a send: act on the steps it took; schedule the end of its lot's wait."""
        core = self.core
        if core.taken:
            self._pump()
        wake = core.wake()
        if wake is not None:
            loop = asyncio.get_running_loop()
            if wake > 0:
                self._turn = loop.call_later(wake, self._end_of_turn)
            else:
                self._turn = loop.call_soon(self._end_of_turn)

    def _end_of_turn(self) -> None:
        """The lot's wait is over: take it, then write to the peers now."""
        self._turn = None
        if self.core.end_turn():
            self._pump()
            self.transport.flush_all()

    def _check_can_issue(self) -> None:
        """LocalError if closed; Busy while stalled or while too much is unacknowledged."""
        if self._closed:
            raise LocalError("the node is closed")
        self.core.flow.admit(self._commit.stalled)

    def can_send(self) -> bool:
        """True when the node can take a send now (``Flow.can_send`` says when)."""
        return self.core.flow.can_send(self._commit.stalled)

    @property
    def in_flight(self) -> int:
        """This node's broadcasts not delivered back to it yet (``max_in_flight``)."""
        return self.core.flow.in_flight

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
        return self.core.view

    @property
    def joined(self) -> bool:
        """True once a group endpoint has installed a view and has the application state."""
        return self.core.joined

    def suspect(self, pid: int) -> None:
        """An outside failure detector suspects member ``pid`` (logged, so a restart
        replays it)."""
        self._host("suspect").suspect(pid)
        self._pump()

    def leave(self) -> None:
        """Leave the group: the next view excludes this process (then ``on_excluded``)."""
        self._host("leave").leave()
        self._pump()

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
        self._host("join").join(contacts)
        self._pump()

    def _host(self, name: str) -> NodeCore:
        """The core, for a host input ``name``: LocalError unless a group endpoint is
        hosted and the node open; Busy while stalled."""
        self.core.check_member(name)
        if self._closed:
            raise LocalError("the node is closed")
        check_writable(self._commit.stalled)
        return self.core

    def _provide(self, view: int) -> None:
        """Answer a StateRequest with the application's state, as a step of its own."""
        self.core.flush()
        state = self.get_state(view) if self.get_state is not None else None
        self.core.provide(view, state)
        self._pump()

    # -- the network's and the clock's side ------------------------------------------------
    def frames_arrived(self, peer: int, batch: Batch) -> None:
        """The transport's report: the packets of the frames one read brought from
        ``peer`` (checked, decoded). Discovery's (a growable group's Probes and
        Rosters) go to the service; the rest are one step of the core, then acted on."""
        batch = self.service.discovered(peer, batch)
        if batch and not self._closed:
            self.core.receive(peer, batch)
            self._pump()

    def peer_has_seen(self, peer: int, seen: int | None) -> None:
        """The transport's report: ``peer`` confirmed a connection, having seen this
        node's message ids up to ``seen`` (None: it refused the connection)."""
        self._restart.heard(peer, seen, int(self.core.endpoint.sent_count))

    def _loopback(self, packet: object) -> None:
        if not self._closed:
            self.core.loopback(packet)
            self._pump()

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        if not self._closed and self._commit.stalled is None:
            self.core.handle_timer(self.now())
            self._pump()

    def _rearm(self) -> None:
        deadline = self.core.get_timer()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            self._timer = asyncio.get_running_loop().call_at(deadline, self._on_timer)

    # -- persist, then act --------------------------------------------------------------
    def _pump(self) -> None:
        """Persist, then act: write the steps the core took (their records: trace events,
        checkpoint log entries), and only once they are written act on them (packets to
        the connections, deliveries to the application). A write that fails acts on
        nothing: the node stalls and writes them again later (``commit``)."""
        if self._retry is not None or self._commit.closed:
            return  # a retry is due: the steps wait for it
        core = self.core
        steps = core.to_persist()
        if not steps:
            return
        commit = self._commit
        was_stalled = commit.stalled is not None
        if not commit.write(steps, core.marks()):
            self.transport.pause(True)
            self._retry = asyncio.get_running_loop().call_later(commit.retry_in, self._retried)
            return
        if was_stalled:
            self.transport.pause(False)
        for step in core.written():
            self._act(step)
        self._acted()

    def _retried(self) -> None:
        self._retry = None
        self._pump()

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
        core = self.core
        counters = (self.stats.sent, self.stats.delivered)
        unsent = self._tracer.unsent if self._tracer is not None else None
        try:
            self._journal.compact(core.endpoint, counters, core.dests, unsent, core.marks())
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
