"""What a node writes to its trace, and who each message is for.

Rules, in words:

- A trace the runtime starts begins with a header (``TraceHeader``): the
  producer, the hosted protocol (found in the protocol registry), the properties
  it promises and ``n``, so that ``mailroom check`` checks exactly those.
- A message's destinations are fixed by the call that sent it: ``broadcast``,
  every process; ``send(to=q)``, q alone. The origin writes them in its send
  event. Every frame that carries a packet of the message says which of the two
  it is (``frames``: BROADCAST or UNICAST), and a receiver writes them in its
  receive and deliver events: every process, or itself. An endpoint that only
  broadcasts (or only sends) fixes this for every message; for one that does both
  (``Fifo``, ``Unordered``) the node records the kind of each of its own messages
  (a byte each, kept in the checkpoint) and, while tracing, of each message
  received and not yet delivered (kept with the received packet in the log).
  A packet relaying another process's message there counts as a broadcast.
- A send is written when the endpoint sends it, in the view it is sent in: at
  once, or, for a group endpoint whose view is changing (or that is joining),
  at the first action that carries the message, after the installation row of
  the view it goes out in. A message the group drops unsent is never written.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Callable, Iterable
from typing import Any

from mailroom import __version__
from mailroom.core.actions import Action, Deliver, Excluded, Transmit
from mailroom.core.endpoint import capabilities
from mailroom.core.errors import RemoteError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.registry import PROTOCOLS
from mailroom.core.stack import Stack
from mailroom.core.wire import carried_message_ids, plain, unplain
from mailroom.net.frames import BROADCAST, CONTROL, UNICAST, Batch
from mailroom.net.membership import group_of
from mailroom.net.store import TraceFile
from mailroom.trace import VIEW_PROPERTIES, Event, TraceHeader


def stack_names(endpoint: Any) -> list[str]:
    """The protocol stack of ``endpoint``, bottom first: ``["Reliable", "CBCAST"]``."""
    if isinstance(endpoint, Stack):
        return [str(type(x).protocol) for x in endpoint.layers]
    return [str(type(endpoint).protocol)]


def registered_name(endpoint: Any) -> tuple[str | None, bool]:
    """The registry's name of the protocol ``endpoint`` runs (None if it is not one of
    them), and whether it runs over the reliable layer."""
    group = group_of(endpoint)
    if group is not None:
        return group.inner_protocol, bool(group.reliable)
    names = stack_names(endpoint)
    for name, (factory, _, _) in sorted(PROTOCOLS.items()):
        own = stack_names(factory(0, max(endpoint.n, 2)))
        below = names[: len(names) - len(own)]
        if names[len(below) :] == own and below in ([], ["Reliable"]):
            return name, bool(below)
    return None, False


def default_header(endpoint: Any, n: int) -> TraceHeader:
    """The header of a trace of ``endpoint``: the registry's promises of its protocol,
    with the view properties for a group, and without liveness where nothing
    retransmits (a broken connection loses what was in flight) or where a group's
    unicast in flight at a view change is delivered nowhere."""
    name, reliable = registered_name(endpoint)
    settings: dict[str, Any] = {"runtime": "mailroom.net", "reliable": reliable}
    promises: tuple[str, ...] = ()
    if name is not None:
        _, mode, promised = PROTOCOLS[name]
        promises = tuple(promised)
        group = group_of(endpoint) is not None
        settings["group"] = group
        if not reliable or (group and mode == "unicast"):
            promises = tuple(p for p in promises if p != "liveness")
        if group:
            promises = (*promises, *VIEW_PROPERTIES)
    return TraceHeader(f"mailroom.net {__version__}", name, promises, n, settings)


class Destinations:
    """Who each message is for: the kind frames carry (BROADCAST or UNICAST) and the
    ``dest`` trace rows say."""

    def __init__(self, pid: int, n: int, endpoint: Any) -> None:
        caps = capabilities(endpoint)
        self.pid = pid
        self.everyone = tuple(range(n))
        self.alone = (pid,)
        #: The kind of every message, or None: recorded per message.
        self.fixed: int | None = None
        if "unicast" not in caps or "broadcast" not in caps:
            self.fixed = UNICAST if "unicast" in caps else BROADCAST
        #: Kinds of this process's messages: seq ``first + k`` at ``own[k]``.
        self.first = int(endpoint.sent_count) + 1
        self.own = bytearray()
        #: Kinds of messages received and not yet delivered (while tracing).
        self.held: dict[MessageId, int] = {}

    def issued(self, kind: int, count: int = 1) -> None:
        """This process sent ``count`` more messages of ``kind``."""
        if self.fixed is None:
            self.own += bytes((kind,)) * count

    def kind(self, mid: MessageId | None) -> int:
        """What a frame carrying a packet of ``mid`` says it carries."""
        if mid is None:
            return CONTROL
        if self.fixed is not None:
            return self.fixed
        if mid.origin == self.pid:
            k = mid.seq - self.first
            return self.own[k] if 0 <= k < len(self.own) else BROADCAST
        return self.held.get(mid, BROADCAST)

    def dest(self, kind: int) -> tuple[int, ...]:
        return self.everyone if kind == BROADCAST else self.alone

    def delivered(self, mid: MessageId) -> tuple[int, ...]:
        """The destinations of ``mid``, delivered here now."""
        if self.fixed is not None:
            return self.everyone if self.fixed == BROADCAST else self.alone
        if mid.origin == self.pid:
            return self.dest(self.kind(mid))
        return self.dest(self.held.pop(mid, BROADCAST))

    def prune(self, endpoint: Any) -> None:
        """Forget the kinds of received messages the endpoint no longer holds (copies of
        delivered ones); a cost only when the table outgrows what the endpoint holds."""
        if len(self.held) > 2 * int(endpoint.buffered()) + 64:
            keep = {p.message.id for p in endpoint.pending()}
            self.held = {m: k for m, k in self.held.items() if m in keep}

    def saved(self) -> dict[str, Any] | None:
        """The kinds to keep in a checkpoint's base (None when the endpoint fixes them)."""
        if self.fixed is not None:
            return None
        return {
            "first": self.first,
            "own": base64.b64encode(zlib.compress(bytes(self.own))).decode(),
            "held": [[m.origin, m.seq, k] for m, k in self.held.items()],
        }

    def load(self, data: Any) -> None:
        """Restore what ``saved`` returned (ValueError, TypeError or zlib.error if bad)."""
        if self.fixed is not None or data is None:
            return
        self.first = int(data["first"])
        self.own = bytearray(zlib.decompress(base64.b64decode(data["own"], validate=True)))
        self.held = {MessageId(int(o), int(s)): int(k) for o, s, k in data["held"]}


class Unsent:
    """A group's sends queued while its view changes: written when they go out."""

    def __init__(self) -> None:
        self.waiting: dict[MessageId, tuple[tuple[int, ...], Payload]] = {}

    def add(self, mid: MessageId, dest: tuple[int, ...], payload: Payload) -> None:
        self.waiting[mid] = (dest, payload)

    def replayed(self, actions: Iterable[Action]) -> None:
        """Forget what ``actions`` (of a replayed step) sent or dropped."""
        if not self.waiting:
            return
        for a in actions:
            if isinstance(a, Transmit) and a.message_id is not None:
                self.waiting.pop(a.message_id, None)
            elif isinstance(a, Deliver):
                self.waiting.pop(a.message.id, None)
            elif isinstance(a, Excluded):
                self.dropped(a.dropped)

    def dropped(self, mids: Iterable[MessageId]) -> None:
        for mid in mids:
            self.waiting.pop(mid, None)

    def saved(self) -> list[Any]:
        return [[m.origin, m.seq, list(d), plain(p)] for m, (d, p) in self.waiting.items()]

    def load(self, data: Any) -> None:
        for origin, seq, dest, payload in data or []:
            self.waiting[MessageId(int(origin), int(seq))] = (tuple(dest), unplain(payload))


class Tracer:
    """Makes the trace lines of one process (``seq`` counts its events)."""

    def __init__(
        self,
        run: str,
        pid: int,
        dests: Destinations,
        clock: Callable[[], float],
        file: TraceFile,
        unsent: Unsent,
    ) -> None:
        self.run, self.pid, self.dests, self.clock = run, pid, dests, clock
        self.events = file.count
        #: A group's sends queued while its view changes (restored with the checkpoint).
        self.unsent = unsent

    def line(
        self,
        kind: str,
        mid: MessageId,
        sender: int,
        dest: tuple[int, ...],
        payload: Payload,
        view: int | None,
    ) -> bytes:
        """One trace event as a JSON Lines line."""
        self.events += 1
        event = Event(
            run=self.run,
            process=self.pid,
            seq=self.events,
            kind=kind,
            message=mid,
            sender=sender,
            dest=dest,
            time=self.clock(),
            payload=payload,
            view=view,
        )
        return (json.dumps(event.to_dict(), separators=(",", ":")) + "\n").encode()

    def view(self, view: int, members: tuple[int, ...]) -> bytes:
        """The event of installing view ``view`` (``message`` is [0, view id])."""
        return self.line("view", MessageId(0, view), self.pid, members, None, view)

    def deliver(self, m: Message, view: int | None) -> bytes:
        return self.line("deliver", m.id, m.sender, self.dests.delivered(m.id), m.payload, view)

    def sends(
        self,
        mids: list[MessageId],
        dest: tuple[int, ...],
        payloads: list[Payload],
        queued: bool,
        view: int | None,
    ) -> list[bytes]:
        """The send events of messages the application sends now in ``view``; a group
        that queues them (``queued``) has them written when they go out."""
        if queued:
            for mid, payload in zip(mids, payloads, strict=True):
                self.unsent.add(mid, dest, payload)
            return []
        return [
            self.line("send", mid, self.pid, dest, payload, view)
            for mid, payload in zip(mids, payloads, strict=True)
        ]

    def sent_now(self, mid: MessageId, view: int | None) -> bytes:
        """The send event of a queued message, now that an action carries it."""
        dest, payload = self.unsent.waiting.pop(mid)
        return self.line("send", mid, self.pid, dest, payload, view)

    def received(self, batch: Batch, view: int | None) -> list[bytes]:
        """The receive events of a frame's packets (a batch packet: one per message)."""
        dests = self.dests
        mixed = dests.fixed is None
        lines = []
        for packet, item in batch:
            if item.message_id is None:
                continue
            dest = dests.dest(item.carries)
            try:
                mids = carried_message_ids(packet) or (item.message_id,)
            except RemoteError:
                mids = (item.message_id,)
            for mid in mids:
                if mixed:
                    dests.held[mid] = item.carries
                lines.append(self.line("receive", mid, mid.origin, dest, None, view))
        return lines


__all__ = ["Destinations", "Tracer", "Unsent", "default_header", "registered_name", "stack_names"]
