"""A step of the hosted endpoint, and how a checkpoint's log replays one.

Every step (a send by the application, the packets of one read, a timer, a
host input) is handled the same way: persist, then act. ``Engine.run`` sorts the
endpoint's actions into what the step will do (``Step``: the trace lines and
logged inputs to write first, then the packets to send, the packets to loop back
and what to hand to the application) without doing any of it and without
touching its inputs; the node writes the step down, then acts on it.

An endpoint with explicit consumption is told the application takes each
delivery in the step that delivers it (the consumption is logged with the step);
what it answers belongs to the same step.
"""

from __future__ import annotations

import builtins
from collections.abc import Hashable, Sequence
from typing import Any

import attrs

from mailroom.core import Deliver, Excluded, StateRequest
from mailroom.core.actions import Action, Stable, Transmit, ViewChange
from mailroom.core.codec import encode_all, value_size
from mailroom.core.endpoint import consumer
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.wire import latest_key
from mailroom.net import frames as fr
from mailroom.net.entries import Consumed, entry_of
from mailroom.net.tracing import Destinations, Tracer


@attrs.define(slots=True)
class Send:
    """One packet for one peer, as a step sends it (built by ``Send.control`` or
    ``Engine.run``, read by ``Transport.send``; never changed once built).

    Not ``frozen``: a frozen attrs class sets each field through
    ``object.__setattr__``, 1.5 µs a packet here against 0.27 µs, on the path of every
    packet the runtime sends."""

    #: the peer it goes to
    to: int
    #: its codec bytes; a lazy packet comes as itself (most are superseded before they
    #: go, so its link encodes it only if it is written)
    packet: builtins.object  # spelled so: mypyc looks a bare ``object`` up as a global
    #: the message id it carries (None: a control packet)
    mid: MessageId | None
    #: what its frame says it carries (``frames.BROADCAST``, ``UNICAST``, ``CONTROL``)
    carries: int
    #: None, or a key shared with the later packets that supersede it (``latest_key``)
    latest: Hashable | None = None
    #: a control packet nothing waits on soon (``Transmit.lazy``)
    lazy: bool = False

    @classmethod
    def control(cls, to: int, data: bytes) -> Send:
        """A control packet's bytes for ``to`` (discovery's probes and rosters)."""
        return cls(to, data, None, fr.CONTROL)


#: What a step hands to the application, in stream order.
Handed = Message | ViewChange | StateRequest | Excluded


@attrs.define
class Step:
    """What one step did: written down first (``ops``, ``lines``), then acted on."""

    #: the step's inputs, as the checkpoint log keeps them
    ops: list[Any]
    #: its trace events
    lines: list[bytes]
    #: packets for the peers
    sends: list[Send]
    #: packets for this process itself
    loopback: list[object]
    #: what the application gets, in order: messages, view changes, state requests
    handed: list[Handed]
    #: Stable reports
    stable: list[tuple[MessageId, ...]]
    #: the counters after the step
    sent: int
    delivered: int
    #: how many of the messages handed are this process's own (``Flow.came_back``)
    back: int = 0

    def then(self, later: Step) -> Step:
        """This step and ``later`` as one: written in one go, acted on in order."""
        return Step(
            self.ops + later.ops,
            self.lines + later.lines,
            self.sends + later.sends,
            self.loopback + later.loopback,
            self.handed + later.handed,
            self.stable + later.stable,
            later.sent,
            later.delivered,
            self.back + later.back,
        )


class Engine:
    """Sorts an endpoint's actions into ``Step`` values; keeps the view events happen in."""

    def __init__(
        self, endpoint: Any, dests: Destinations, tracer: Tracer | None, *, logged: bool
    ) -> None:
        self.endpoint = endpoint
        self.pid: int = endpoint.pid
        self.dests = dests
        self.tracer = tracer
        self.logged = logged
        self.consumer = consumer(endpoint)
        #: The view this process's events happen in (None: no group, or not a member).
        self.view: int | None = None

    def run(
        self,
        actions: Sequence[Action],
        ops: Sequence[Any],
        lines: Sequence[bytes],
        sent: int,
        delivered: int,
    ) -> Step:
        """The step of ``actions``, after inputs ``ops`` and trace ``lines``; ``sent`` and
        ``delivered`` are the counters before it."""
        pid, dests, tracer, eater = self.pid, self.dests, self.tracer, self.consumer
        fixed = dests.fixed
        waiting = tracer.unsent.waiting if tracer is not None else None
        out_lines = list(lines)
        out_ops = list(ops)
        # a send's peer, message id, kind, latest_key, laziness and (lazy: it may never
        # go, most are superseded; encoded by its link if it does) its packet
        heads: list[tuple[int, MessageId | None, int, Hashable | None, bool, object]] = []
        packets: list[object] = []  # the others' packets, encoded together at the end
        loopback: list[object] = []
        handed: list[Handed] = []
        stable: list[tuple[MessageId, ...]] = []
        count = back = 0
        todo: Sequence[Action] = actions
        while todo:
            more: list[Action] = []  # what consumptions answer: the same step, after
            for a in todo:
                if isinstance(a, Transmit):
                    mid = a.message_id
                    if waiting and mid in waiting:  # a queued send goes out: write it now
                        out_lines.append(self._sent_now(mid))
                    if a.to == pid:
                        loopback.append(a.packet)
                    elif mid is None:
                        packet, lazy = a.packet, a.lazy
                        heads.append(
                            (
                                a.to,
                                None,
                                fr.CONTROL,
                                latest_key(packet),
                                lazy,
                                packet if lazy else None,
                            )
                        )
                        if not lazy:
                            packets.append(packet)
                    else:
                        heads.append((a.to, mid, fixed or dests.kind(mid), None, False, None))
                        packets.append(a.packet)
                elif isinstance(a, Deliver):
                    m = a.message
                    handed.append(m)
                    count += 1
                    if m.sender == pid:
                        back += 1
                    if tracer is not None:
                        if waiting and m.id in waiting:
                            out_lines.append(self._sent_now(m.id))
                        out_lines.append(tracer.deliver(m, self.view))
                    if eater is not None:  # the application takes m in this step
                        more += eater.consume(m.id)
                        if self.logged:
                            out_ops.append(Consumed(m.id).row())
                elif isinstance(a, Stable):
                    stable.append(a.messages)
                elif isinstance(a, ViewChange):
                    self.view = a.view.id  # later events happen in this view
                    handed.append(a)
                    if tracer is not None:
                        out_lines.append(tracer.view(a.view.id, a.view.members))
                elif isinstance(a, StateRequest | Excluded):
                    if isinstance(a, Excluded):
                        self.view = None
                        if tracer is not None:
                            tracer.unsent.dropped(a.dropped)
                    handed.append(a)  # a StateRequest is answered once the app is here
                # Backpressure: the layer keeps the packet; can_send() says when to resume
            todo = more
        # One call for the step's packets: a packet carried to several peers (a
        # broadcast over Reliable) is written once.
        datas = iter(encode_all(packets) if packets else ())
        sends = [
            Send(to, next(datas) if packet is None else packet, mid, kind, latest, lazy)
            for to, mid, kind, latest, lazy, packet in heads
        ]
        return Step(
            out_ops, out_lines, sends, loopback, handed, stable, sent, delivered + count, back
        )

    def _sent_now(self, mid: MessageId | None) -> bytes:
        assert self.tracer is not None and mid is not None
        return self.tracer.sent_now(mid, self.view)


#: Payload bytes (an upper estimate) that one part of a batch may carry: half a frame,
#: the rest is room for the layers' headers.
FRAME_PART = fr.MAX_FRAME // 2


def _size_estimate(payload: Payload) -> int:
    """An upper bound on ``payload``'s encoded bytes, cheap for strings and ints."""
    if type(payload) is str:
        return (len(payload) if payload.isascii() else 4 * len(payload)) + 10
    if type(payload) is int:
        return 11
    return value_size(payload)


def frame_parts(payloads: list[Payload], limit: int = FRAME_PART) -> list[list[Payload]]:
    """``payloads`` cut into consecutive parts of at most ``limit`` estimated bytes each
    (a payload larger than that alone is a part of its own)."""
    strings = set(map(type, payloads)) == {str}  # the common case: short strings
    if strings and 4 * sum(map(len, payloads)) + 10 * len(payloads) <= limit:
        return [list(payloads)]  # all of them fit (at most 4 bytes a character)
    parts: list[list[Payload]] = [[]]
    size = 0
    for payload in payloads:
        cost = _size_estimate(payload)
        if parts[-1] and size + cost > limit:
            parts.append([])
            size = 0
        parts[-1].append(payload)
        size += cost
    return parts


def replay_op(endpoint: Any, op: Any) -> list[Action]:
    """Run one logged input on ``endpoint`` (a checkpoint log's replay): ``op`` is a row
    of the log, whose kinds ``mailroom.net.entries`` states. ValueError if it holds no
    entry."""
    return entry_of(op).replay(endpoint)


__all__ = ["FRAME_PART", "Engine", "Handed", "Send", "Step", "frame_parts", "replay_op"]
