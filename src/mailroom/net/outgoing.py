"""What the application sends, gathered into one step per turn of the event loop.

Rules, in words:

- Every send is checked and numbered at the call: a bad payload, a missing
  capability or a destination the endpoint refuses is a ``LocalError`` there and
  nothing is sent; the message id returned is the one the message travels with.
- The sends of one turn of the event loop (everything the application sends before
  it yields) form a *lot*, taken as one step once the turn is over: one trace
  write, one checkpoint log record, one write per peer. When its first
  message arrives the lot says how long it may wait (``wake()``: 0 for the end of
  this turn) and the node's shell calls ``end_turn()`` then, so an idle loop runs
  no timer and a lone send goes out in the next iteration of the loop. With
  ``linger`` (seconds, off by default) the lot waits that long instead, gathering
  the sends of several turns.
- Sends that come fast are gathered without being asked: a lot whose first
  message comes within ``busy_gap`` seconds of the last lot taken waits for the
  rest of that gap (an application sending one message per turn, paced by a
  timer or by its input, then pays one step per gap, not one per message);
  after a quiet spell the first send waits for nothing but the end of its turn.
- Broadcasts made while the endpoint's windows are open are given to it when the
  lot is taken, through its batch form (``broadcast_many``, in parts of at most
  half a frame): the ids of the lot are the endpoint's next ones, since no other
  step happens meanwhile (any other step takes the lot first). An endpoint
  without a batch form, and every ``send``, is called at once (its own errors
  are the call's) and only the step is gathered; an endpoint with explicit
  consumption, or a group member, takes every send as a step of its own at once
  (a delivery must be consumed, or a view change seen, before the next send).
- Flow control: a lot is taken at once when it reaches ``LOT_LIMIT`` messages,
  so the endpoint's windows are at most that far behind the application. While a
  window is full (a peer slow or down) broadcasts are given to the endpoint one
  by one, as before: the reliable layer then keeps one packet per message, so
  ``max_retained`` bounds messages there, and batch packets (of at most
  ``LOT_LIMIT`` messages each) only fill the windows.
- A lot is also taken whenever anything else happens (a frame, a timer, a host
  input, ``flush()``, ``close()``); a frame received or the timer joins the lot's
  step (``first_part()``), the lot's sends first.
- Sans-IO: a lot taken is not acted on here. It waits in ``ready`` until the owner
  (``nodecore.NodeCore``) makes a step of it; nothing here calls back.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from typing import Any

from mailroom.core.actions import Action
from mailroom.core.endpoint import broadcast_batch, capabilities, require, upcoming_id, upcoming_ids
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId, Payload, check_payload
from mailroom.core.stack import Stack
from mailroom.net import frames as fr
from mailroom.net.entries import Broadcast, BroadcastMany, Sent
from mailroom.net.flow import Flow
from mailroom.net.membership import queues_sends
from mailroom.net.stats import NetStats, QuietLog
from mailroom.net.steps import Engine, Step, frame_parts

#: Messages in one lot at most: the send that fills it takes the lot as a step at once.
LOT_LIMIT = 64

#: A lot taken out for a step: its actions, logged inputs and trace lines.
Lot = tuple[list[Action], list[Any], list[bytes]]


def has_batch_form(endpoint: Any) -> bool:
    """True when ``endpoint`` (the top layer of a Stack) broadcasts a batch as one call."""
    top = endpoint.top if isinstance(endpoint, Stack) else endpoint
    return callable(getattr(top, "broadcast_many", None))


class Outgoing:
    """The application's sends since the last step (the lot), and how they are taken."""

    def __init__(
        self,
        endpoint: Any,
        engine: Engine,
        flow: Flow,
        stats: NetStats,
        quiet: QuietLog,
        *,
        logged: bool,
        member: bool,
        coalesce: bool,
        linger: float,
        busy_gap: float,
    ) -> None:
        self.endpoint = endpoint
        self.pid: int = endpoint.pid
        self.engine, self.flow, self.stats, self.quiet = engine, flow, stats, quiet
        self.logged, self.member, self.linger = logged, member, linger
        self.busy_gap = busy_gap
        #: When the last lot was taken (``time.monotonic``), for ``busy_gap``.
        self.taken_at = -math.inf
        self.offers = capabilities(endpoint)
        #: Gather the steps of one turn's sends into one (else each send is a step).
        self.gather = coalesce and engine.consumer is None and not member
        #: Give broadcasts to the endpoint when the lot is taken, as one batch.
        self.defer = self.gather and has_batch_form(endpoint)
        #: Messages in the lot.
        self.count = 0
        #: Broadcasts not given to the endpoint yet (``defer``), and the endpoint's
        #: message count when the first of them came (the ids count on from it).
        self.payloads: list[Payload] = []
        self.base = 0
        #: The lot's steps, gathered: actions, logged inputs, trace lines.
        self.actions: list[Action] = []
        self.ops: list[Any] = []
        self.lines: list[bytes] = []
        #: Lots taken and not yet made steps of, in order (the owner takes them).
        self.ready: list[Lot] = []
        #: The lot waits for ``end_turn()`` (the owner was told when: ``wake``).
        self._due = False
        #: Seconds the lot's first message lets it wait, until the owner asks.
        self._wake: float | None = None

    def upcoming_id(self) -> MessageId:
        """The id the next send will get: the endpoint's numbering, after the payloads
        this lot holds back (deferred, not yet given to the endpoint)."""
        if self.payloads:
            return MessageId(self.pid, self.base + len(self.payloads) + 1)
        return upcoming_id(self.endpoint)

    # -- the application's calls -------------------------------------------------------
    def broadcast(self, payload: Payload) -> MessageId:
        if not self.defer or not self.flow.windows_open():
            return self._issue(payload, None)
        if "broadcast" not in self.offers:
            require(self.endpoint, "broadcast")
        check_payload(payload)
        payloads = self.payloads
        if not payloads:
            self.base = self.endpoint.sent_count
        payloads.append(payload)
        mid = MessageId(self.pid, self.base + len(payloads))
        self.stats.sent += 1
        self._added(1)
        return mid

    def send(self, payload: Payload, to: int) -> MessageId:
        return self._issue(payload, to)

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[MessageId]:
        ep = self.endpoint
        require(ep, "broadcast")
        batch = list(payloads)
        for payload in batch:
            check_payload(payload)
        if not batch:
            return []
        if self.defer:
            if not self.payloads:
                self.base = ep.sent_count
            first = self.base + len(self.payloads) + 1
            self.payloads += batch
            self.stats.sent += len(batch)
            self._added(len(batch))
            return [MessageId(self.pid, first + k) for k in range(len(batch))]
        mids = upcoming_ids(ep, len(batch))
        queued = self.member and queues_sends(ep)
        parts = frame_parts(batch)
        actions: list[Action] = []
        for part in parts:
            actions += broadcast_batch(ep, part)
        self.stats.sent += len(batch)
        engine = self.engine
        engine.dests.issued(fr.BROADCAST, len(batch))
        tracer = engine.tracer
        lines = (
            []
            if tracer is None
            else tracer.sends(mids, engine.dests.everyone, batch, queued, engine.view)
        )
        ops = [BroadcastMany.of(part).row() for part in parts] if self.logged else []
        self._add(actions, ops, lines, len(batch))
        return mids

    def _issue(self, payload: Payload, to: int | None) -> MessageId:
        """One send given to the endpoint now (after the lot's broadcasts): its errors
        are the call's."""
        ep = self.endpoint
        require(ep, "broadcast" if to is None else "unicast")
        self._materialize()
        mid = upcoming_id(ep)
        queued = self.member and queues_sends(ep)
        actions = ep.broadcast(payload) if to is None else ep.send(payload, to=to)
        self.stats.sent += 1
        engine = self.engine
        dests = engine.dests
        if dests.fixed is None:
            dests.issued(fr.BROADCAST if to is None else fr.UNICAST)
        tracer = engine.tracer
        lines = (
            []
            if tracer is None
            else tracer.sends(
                [mid], dests.everyone if to is None else (to,), [payload], queued, engine.view
            )
        )
        entry = Broadcast.of(payload) if to is None else Sent.of(payload, to)
        self._add(actions, [entry.row()] if self.logged else [], lines, 1)
        return mid

    # -- the lot -----------------------------------------------------------------------
    def _add(self, actions: list[Action], ops: list[Any], lines: list[bytes], count: int) -> None:
        """A send the endpoint has taken: a step of its own now, or into the lot."""
        if not self.gather:
            self.ready.append((actions, ops, lines))
            return
        self.actions += actions
        self.ops += ops
        self.lines += lines
        self.flow.changed()
        self._added(count)

    def _added(self, count: int) -> None:
        self.count += count
        if self.count >= LOT_LIMIT:
            self.flush()
        elif not self._due:
            self._schedule()

    def _schedule(self) -> None:
        """The lot's first message: it is taken once this turn is over (or lingered)."""
        self._due = True
        if self.linger > 0:
            self._wake = self.linger
            return
        # the last lot was taken a moment ago: gather until the gap is over
        self._wake = max(0.0, self.taken_at + self.busy_gap - time.monotonic())

    def wake(self) -> float | None:
        """Seconds from now after which ``end_turn()`` takes the lot (0: once this turn
        of the event loop is over), said once per lot; None: nothing new to schedule."""
        wake, self._wake = self._wake, None
        return wake

    def end_turn(self) -> bool:
        """The wait ``wake()`` said is over: take the lot; True if there was one."""
        self._due = False
        if self.count:
            self.flush()
            return True
        return False

    def flush(self) -> None:
        """Take the lot now, into ``ready`` (nothing to do if it is empty)."""
        if self.count:
            self.ready.append(self.lot())

    def take_ready(self) -> list[Lot]:
        """The lots taken since the last call, in order (``ready`` is emptied)."""
        ready, self.ready = self.ready, []
        return ready

    def lot(self) -> Lot:
        """Empty the lot: its actions, logged inputs and trace lines, for a step."""
        if not self.count:
            return [], [], []
        self._materialize()
        actions, ops, lines = self.actions, self.ops, self.lines
        self.actions, self.ops, self.lines, self.count = [], [], [], 0
        self.taken_at = time.monotonic()
        return actions, ops, lines

    def first_part(self) -> Step | None:
        """The lot as the first part of a step that something else (a frame, the timer)
        takes now, sorted first so its trace events come first; None if no sends wait."""
        if not self.count:
            return None
        return self.engine.run(*self.lot(), self.stats.sent, self.stats.delivered)

    def close(self) -> None:
        """Take the lot; nothing waits for ``end_turn()`` any more."""
        self.flush()
        self._due = False
        self._wake = None

    def _materialize(self) -> None:
        """Give the lot's broadcasts to the endpoint: a part of one payload as a
        ``broadcast``, a longer one through ``broadcast_many`` (parts of at most half a
        frame), with their trace lines and logged inputs."""
        payloads = self.payloads
        if not payloads:
            return
        self.payloads = []
        self.flow.changed()
        ep = self.endpoint
        first = self.base + 1
        parts = frame_parts(payloads) if len(payloads) > 1 else [payloads]
        actions = self.actions
        done = 0
        for part in parts:
            try:
                actions += ep.broadcast(part[0]) if len(part) == 1 else ep.broadcast_many(part)
            except LocalError as exc:  # an endpoint that breaks broadcast_many's contract
                self._refused(len(payloads) - done, exc)
                break
            done += len(part)
            if self.logged:
                one = len(part) == 1
                entry = Broadcast.of(part[0]) if one else BroadcastMany.of(part)
                self.ops.append(entry.row())
        engine = self.engine
        engine.dests.issued(fr.BROADCAST, done)
        tracer = engine.tracer
        if tracer is not None and done:
            mids = [MessageId(self.pid, first + k) for k in range(done)]
            sent = payloads[:done]
            self.lines += tracer.sends(mids, engine.dests.everyone, sent, False, engine.view)

    def _refused(self, count: int, exc: LocalError) -> None:
        """The endpoint refused broadcasts that its ``broadcast`` accepted at the call
        (``broadcast_many`` must accept what ``broadcast`` does): they are not sent."""
        self.stats.sent -= count
        self.stats.unsent += count
        self.quiet(
            logging.ERROR,
            "P%d: the endpoint refused %d broadcasts as a batch, after "
            "the calls returned (%s); they are not sent",
            self.pid,
            count,
            exc,
        )


__all__ = ["LOT_LIMIT", "Lot", "Outgoing", "has_batch_form"]
