"""A replica over ``mailroom.net``: awaitable calls, a blocking form for threads, reads.

``AsyncReplica(obj, endpoint, peers, key, **node_options)`` builds the ``Node`` that
hosts ``endpoint`` (a ``Group`` over a total-order protocol, or a heartbeat detector
around one: ``mailroom.net.membership.group_endpoint``) and wires its callbacks to a
``Replica`` of ``obj``. Then, on the event loop::

    await r.call.add(5)          # or await r.call("add", 5): applied here, its result
    await r.ordered.get()        # an ordered (linearizable) read
    r.local.get()                # a local read, at once

and from any other thread ``r.sync.add(5)`` (blocks until applied; ``timeout``).
``safe=True`` refuses a Group that does not deliver safely (uniformly). A
call waits until the replica is a member and the node can send (``Busy``).
``status="127.0.0.1:PORT"`` serves the node's status with the replica's
(``status()``) for ``mailroom status 127.0.0.1:PORT``, on a loopback address only.

Calls are checked at once (a ``LocalError`` there means nothing is sent) and
gathered: the calls made in one turn of the event loop go out as one batch, one
group message (cut at ``MAX_BATCH_BYTES``), so that the group orders and confirms
one message for all of them. A lone call goes out in the next iteration of the loop,
as before: nothing waits for a timer.

``wait_for_peers=True``: a member that starts in a view (a founder) takes calls only
once a majority of that view is known to hold it too (their heartbeats name it), or a
later view is installed: a founder that starts late, after the others excluded it,
waits to be let in again instead of sending into a view they have left (its calls
would come back ``OutcomeUnknown``). ``close()`` leaves the view first (``Node.depart``,
a bounded wait) unless the replica keeps a checkpoint to resume from: the others then
install a view without it at once instead of suspecting a crash.

With ``checkpoint=`` the replica's base and log ride in the node's checkpoint
(``app_state``), and a restart resumes from them; a process that rejoins gets the
state by transfer instead. ``history=`` takes a ``History`` or ``HistoryFile``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from typing import Any

from mailroom.core.actions import Excluded, ViewChange
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, Payload
from mailroom.core.registry import entry
from mailroom.net import Node, PeerTable
from mailroom.net.membership import group_of
from mailroom.net.node import LEAVE_TIMEOUT, Busy
from mailroom.net.status import listen_address, serve, status_routes
from mailroom.protocols.membership.changes import has_majority
from mailroom.replicated.operations import cut_batches
from mailroom.replicated.replica import (
    OpKey,
    Outcome,
    OutcomeUnknown,
    Prepared,
    Replica,
    Row,
    op_key,
)


class _Calls:
    """``proxy("method", *args)``, or ``proxy.method(*args)`` (``proxy.kv.set(...)`` for
    ``"kv.set"``): one way of calling, ``run(method, *args, **kwargs)``."""

    def __init__(self, run: Callable[..., Any], path: str = "") -> None:
        self._run = run
        self._path = path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self._path:
            return self._run(self._path, *args, **kwargs)
        return self._run(*args, **kwargs)

    def __getattr__(self, name: str) -> _Calls:
        if name.startswith("_"):
            raise AttributeError(name)
        return _Calls(self._run, f"{self._path}.{name}" if self._path else name)


#: The call proxy, for hosts of their own (``serve``'s thread-backed replica).
Calls = _Calls


class AsyncReplica:
    """Replica ``endpoint.pid`` of ``obj``, hosted by a ``Node`` (``node``)."""

    def __init__(
        self,
        obj: object,
        endpoint: Any,
        peers: PeerTable,
        key: bytes,
        *,
        history: Callable[[Row], None] | None = None,
        timeout: float | None = None,
        safe: bool = False,
        status: str | None = None,
        wait_for_peers: bool = False,
        **node_options: Any,
    ) -> None:
        group = group_of(endpoint)
        if group is None:
            raise LocalError("a replica needs a Group endpoint (or a detector around one)")
        if safe and getattr(group, "safe", False) is not True:
            raise LocalError(
                "safe=True needs a Group that delivers safely (Group(..., safe=True))",
                hint="without it, only what a surviving replica acknowledged is sure to survive",
            )
        if "total" not in entry(group.inner_protocol).promises:
            raise LocalError(
                f"{group.inner_protocol} does not deliver in total order: replicas would diverge",
                hint="use sequencer, skeen or lamport",
            )
        for name in (
            "on_deliver",
            "on_view",
            "get_state",
            "on_excluded",
            "app_state",
            "app_changes",
        ):
            if name in node_options:
                raise LocalError(f"{name} is the replica's own: do not pass it")
        self.timeout = timeout
        self.wait_for_peers = wait_for_peers
        #: a replica that keeps a checkpoint resumes in place: its close is no leave
        self._keeps_checkpoint = node_options.get("checkpoint") is not None
        self._confirming: asyncio.Task[None] | None = None
        #: where the status endpoint listens once started (``status``: a loopback address)
        self._status_at = status
        if status is not None:
            listen_address(status, loopback=True)  # LocalError now, not at start()
        self._status_server: asyncio.Server | None = None
        #: the replica's incarnation when the node last kept its checkpoint whole
        self._saved_as: int | None = None
        self._obj = obj
        self._history = history
        self._futures: dict[OpKey, asyncio.Future[Any]] = {}
        #: calls checked and not sent yet (the lot); the lot's send at the end of this
        #: turn; and the task that sends the rest once a busy node can take sends again
        self._lot: list[tuple[Prepared, asyncio.Future[Any]]] = []
        self._send_due: asyncio.Handle | None = None
        self._sender: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._joined: asyncio.Event | None = None
        view, incarnation = (group.view if group.joined else None), group.incarnation
        self.replica = Replica(obj, group.pid, view=view, incarnation=incarnation)
        keep = node_options.get("checkpoint") is not None
        hooks: dict[str, Any] = {
            "on_deliver": self._on_deliver,
            "on_view": self._on_view,
            "get_state": self._get_state,
            "on_excluded": self._on_excluded,
            "app_state": self._saved if keep else None,
            "app_changes": self._saved_changes if keep else None,
        }
        self.node = Node(endpoint, peers, key, **hooks, **node_options)
        if self.node.resumed_state is not None:
            self._resume(self.node.resumed_state, self.node.resumed_changes)
        elif history is not None:  # not resumed: its history starts here (a restart's, there)
            self.replica = Replica(
                obj, group.pid, view=view, incarnation=incarnation, history=history
            )
        self.call = _Calls(self._call)
        self.ordered = _Calls(self._ordered)
        self.local = _Calls(self.replica_read)
        self.sync = _Calls(self._blocking)

    def _resume(self, data: Payload, changes: list[Any]) -> None:
        """Restarted from the node's checkpoint (the replica's, then the entries its log
        gained since): the replica as it was, unless the node rejoins (then it waits
        for the state by transfer)."""
        if changes and type(data) is dict and type(data.get("log")) is list:
            data = {**data, "log": data["log"] + changes}
        group = group_of(self.node.endpoint)
        assert group is not None
        if group.joined:
            self.replica = Replica.restart(self._obj, group.pid, data, history=self._history)
        else:  # it rejoins: its old life records no new start (it ended with the kill)
            self.replica = Replica.restart(self._obj, group.pid, data)
            self.replica.view = None
            self.replica.record_history(self._history)
        self.replica.incarnation = group.incarnation

    def _saved(self) -> dict[str, Any]:
        """The replica's checkpoint, for the node to keep whole (its ``app_state``)."""
        self.replica.journal.saved()
        self._saved_as = self.replica.incarnation
        return self.replica.checkpoint()

    def _saved_changes(self) -> list[Any] | None:
        """The entries the replica's log gained since (the node's ``app_changes``); None
        after a compaction, a new replica or incarnation: the checkpoint whole is due."""
        replica = self.replica
        return replica.journal.changes() if self._saved_as == replica.incarnation else None

    # -- life cycle ----------------------------------------------------------------------
    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._joined = asyncio.Event()
        await self.node.start()
        if self.replica.view is not None:
            if self.wait_for_peers and self._peers_unconfirmed():
                self._confirming = asyncio.create_task(self._confirm())
            else:
                self._joined.set()
        if self._status_at is not None:
            routes = status_routes(self.node, lambda: {"replica": self.status()})
            self._status_server = await serve(self._status_at, routes, loopback=True)

    def _peers_unconfirmed(self) -> bool:
        """The view this replica started in is not known to be a majority's yet (only a
        heartbeat detector tells: a bare Group is taken at its word)."""
        endpoint, view = self.node.endpoint, self.node.view
        heard_in = getattr(endpoint, "heard_in", None)
        if view is None or heard_in is None or not self.node.joined:
            return False
        return not has_majority(sorted(heard_in(view)), view)

    async def _confirm(self) -> None:
        """Take calls once the starting view is confirmed or another one is installed
        (``_on_view`` sets ``_joined``); until then calls wait in ``wait_joined``."""
        assert self._joined is not None
        look = min(0.05, self.node.endpoint.interval / 10)
        while not self._joined.is_set():
            if self.replica.view is not None and not self._peers_unconfirmed():
                self._joined.set()
                break
            await asyncio.sleep(look)

    async def close(self, *, leave: bool | None = None, timeout: float = LEAVE_TIMEOUT) -> None:
        """Leave the view (``leave``; by default unless a checkpoint is kept: a replica
        that resumes from it stays a member) waiting at most ``timeout`` seconds for the
        view without it, then close the node; calls still pending get OutcomeUnknown
        (calls not sent yet, a LocalError)."""
        if self._confirming is not None:
            self._confirming.cancel()
        if (not self._keeps_checkpoint if leave is None else leave) and self._loop is not None:
            await self.node.depart(timeout)
        if self._send_due is not None:
            self._send_due.cancel()
            self._send_due = None
        if self._sender is not None:
            self._sender.cancel()
        if self._status_server is not None:
            self._status_server.close()
            await self._status_server.wait_closed()
            self._status_server = None
        await self.node.close()
        lot, self._lot = self._lot, []
        for _, future in lot:
            if not future.done():
                future.set_exception(LocalError("the replica closed before the call was sent"))
        self._fail(OutcomeUnknown("the replica closed before the call was applied here"))

    @property
    def status_address(self) -> tuple[str, int] | None:
        """Where the status endpoint listens (the port taken, if ``status`` said 0), or
        None: not asked for, or not started."""
        server = self._status_server
        return None if server is None else tuple(server.sockets[0].getsockname()[:2])

    def status(self) -> dict[str, Any]:
        """This replica as data (what ``mailroom status`` shows of it): a member or not,
        its incarnation, operations applied, its log since the base, calls in flight."""
        replica, journal = self.replica, self.replica.journal
        return {
            "member": replica.view is not None,
            "incarnation": replica.incarnation,
            "applied": replica.applied,
            "log_entries": len(journal.log),
            "log_bytes": journal.log_bytes,
            "compactions": journal.compactions,
            "calls_waiting": len(self._futures) + len(self._lot),
        }

    async def __aenter__(self) -> AsyncReplica:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def wait_joined(self) -> None:
        """Return once the replica is a member holding the state."""
        if self._joined is None:
            raise LocalError("start() the replica first")
        await self._joined.wait()

    # -- calls ----------------------------------------------------------------------------
    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self._is_joined():
            await self.wait_joined()
        return await self._enqueue(self.replica.prepare(method, *args, **kwargs))

    async def _ordered(self, method: str, *args: Any, **kwargs: Any) -> Any:
        if not self._is_joined():
            await self.wait_joined()
        return await self._enqueue(self.replica.prepare_read(method, *args, **kwargs))

    def _is_joined(self) -> bool:
        """A member holding the state now (a call need not wait: no coroutine to await)."""
        return self._joined is not None and self._joined.is_set()

    def replica_read(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """A local read (sequentially consistent: this replica, now)."""
        return self.replica.read(method, *args, **kwargs)

    def _enqueue(self, call: Prepared) -> asyncio.Future[Any]:
        """``call`` into the lot, sent at the end of this turn: its outcome to come."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._lot.append((call, future))
        if self._send_due is None and self._sender is None:
            self._send_due = loop.call_soon(self._send_soon)
        return future

    def _send_soon(self) -> None:
        """The end of the turn in which the lot's first call came: send the lot now if
        the node can take sends (no task to run: most turns), else, or for what a node
        that turned busy left, start the task that waits until it can. (No task runs
        now: ``_enqueue`` schedules this only while none does.)"""
        self._send_due = None
        if self.node.can_send():
            self._send_lot()
        if self._lot:
            self._sender = asyncio.create_task(self._send_lots())

    async def _send_lots(self) -> None:
        """Send the lot as batches whenever the node can send, until it is empty."""
        try:
            while self._lot:
                await self.node.wait_can_send()
                self._send_lot()
        finally:
            self._sender = None

    def _send_lot(self) -> None:
        """Send the lot as batches, as far as the node takes them (a busy node leaves the
        rest in the lot, first)."""
        lot = [(c, f) for c, f in self._lot if not f.done()]  # cancelled: not sent
        self._lot = []
        runs = cut_batches([call.text for call, _ in lot])
        for k, run in enumerate(runs):
            if not self._send_batch(lot[run]):  # busy: the rest waits
                self._lot = [x for r in runs[k:] for x in lot[r]] + self._lot
                return

    def _send_batch(self, part: list[tuple[Prepared, asyncio.Future[Any]]]) -> bool:
        """One batch broadcast now; False if the node is busy (nothing sent)."""
        mid = self.node.upcoming_id()
        try:
            payload = self.replica.batch(mid, [call for call, _ in part])
        except LocalError as exc:  # left the group since the call: not sent
            for _, future in part:
                future.set_exception(exc)
            return True
        keys = [op_key(mid, k) for k in range(len(part))]
        for key, (_, future) in zip(keys, part, strict=True):
            self._futures[key] = future
        try:
            self.node.broadcast(payload)
        except (Busy, LocalError) as exc:
            self.replica.withdraw(mid)
            for key in keys:
                del self._futures[key]
            if isinstance(exc, Busy):
                return False
            for _, future in part:
                future.set_exception(exc)
        return True

    def _blocking(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``call`` from another thread: blocks until applied (or ``timeout``)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            raise LocalError("the replica is not running (start() it on its event loop)")
        try:
            if asyncio.get_running_loop() is loop:
                raise LocalError("sync calls block: from the event loop, await call instead")
        except RuntimeError:
            pass  # no loop in this thread: the expected case
        done = asyncio.run_coroutine_threadsafe(self._call(method, *args, **kwargs), loop)
        try:
            return done.result(self.timeout)
        except concurrent.futures.TimeoutError:
            done.cancel()
            raise

    # -- the node's callbacks -----------------------------------------------------------
    def _on_deliver(self, message: Message) -> None:
        if self.replica.view is not None:
            self._resolve(self.replica.deliver(message))

    def _on_view(self, change: ViewChange) -> None:
        group = group_of(self.node.endpoint)
        incarnation = group.incarnation if group is not None else None
        self._resolve(self.replica.view_changed(change, incarnation=incarnation))
        if self._joined is not None:
            self._joined.set()
        if self._loop is not None:
            self._loop.call_soon(self._hello)

    def _hello(self) -> None:
        """A rejoined replica's hello, in a step of its own."""
        mid = self.node.upcoming_id()
        payload = self.replica.hello(mid)
        if payload is not None:
            try:
                self.node.broadcast(payload)
            except LocalError:  # closed or busy: its next call says the same
                self.replica.withdraw(mid)

    def _get_state(self, view: int) -> Payload:
        return self.replica.state()

    def _on_excluded(self, excluded: Excluded) -> None:
        if self._joined is not None:
            self._joined.clear()
        self._resolve(self.replica.excluded())

    def _resolve(self, outcomes: list[Outcome]) -> None:
        for outcome in outcomes:
            future = self._futures.pop(outcome.key, None)
            if future is None or future.done():
                continue
            if outcome.error is not None:
                future.set_exception(outcome.error)
            else:
                future.set_result(outcome.value)

    def _fail(self, error: Exception) -> None:
        futures, self._futures = self._futures, {}
        for future in futures.values():
            if not future.done():
                future.set_exception(error)


__all__ = ["AsyncReplica", "Calls"]
