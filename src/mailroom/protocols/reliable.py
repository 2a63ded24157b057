"""The reliable layer: a network that loses, duplicates and reorders becomes one
where every packet is received exactly once, in order per channel.

Rules, in words:

- Sending: packets on the channel self -> q are numbered 1, 2, 3...; the sender
  keeps every packet until q acknowledges it. At most ``window`` unacknowledged
  packets are on the wire per channel; a send beyond that is kept, not sent, and
  answered with a ``Backpressure`` action (``can_send(q)`` says when to resume).
- Acknowledging: a receiver acknowledges cumulatively: ``ack = k`` says "I have
  every packet 1..k from you". Every data packet (duplicates too, since the ack
  for the first copy may have been lost) is answered with a ``ReliableAck``, and
  data packets carry the current ack for the reverse channel as well.
  An ack forgets the acknowledged packets: nothing grows without bound.
- Retransmitting: a packet first gets a deadline at the next ``tick(now)`` (the
  layer never reads a clock, so it arms new timers there), ``rto`` after it; at
  each deadline that passes unacknowledged it is sent again and its timeout is
  multiplied by ``backoff``, up to ``max_rto``. ``next_deadline`` asks for that
  arming tick at once, or with ``arm_within`` > 0 at most ``arm_within`` after the
  last tick: a packet acknowledged before then never gets a timer, so a host
  under steady traffic runs the layer's timer once per ``arm_within`` rather
  than once per send, and a lost packet is resent at most ``rto + arm_within``
  after it was sent.
- Receiving: packet ``received[p] + 1`` from p is delivered at once, followed
  by any consecutive ones held. Later packets up to ``received[p] + capacity``
  wait in the mail room; beyond that they are refused (counted in ``refused``,
  not acknowledged), and the sender's retransmission brings them again later.
  Packets at or below ``received[p]``, or already held, are duplicates.
- Refusing: a packet whose ack claims more than this process ever sent on that
  channel, a zero or absurd counter, an unknown sender or a wrong destination is
  a ``RemoteError``, and nothing changes.

Extension point (``mailroom.core.hooks``): ``on_copy``, what a copy of a delivered
packet does.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable
from typing import Any

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Backpressure, Deliver, Transmit
from mailroom.core.endpoint import EndpointBase
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.hooks import hook
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.core.pending import Pending, Wait
from mailroom.core.persist import (
    TIME,
    Field,
    arguments,
    counter,
    counts,
    snap_bool,
    snap_counter,
    snap_list,
    snap_positive,
    snap_time,
)
from mailroom.core.timers import NOW, HostTime
from mailroom.core.wire import packet, packet_from_data, packet_to_data, plain, unplain
from mailroom.protocols._packets import carries_message, carries_none


@packet
@attrs.frozen
class ReliablePacket:
    """The ``seq``-th packet on channel sender -> dest; ``msg`` is its message id's seq
    at the sender; ``ack`` acknowledges packets dest -> sender cumulatively."""

    sender: int
    dest: int
    seq: int
    msg: int
    ack: int
    payload: Any

    carries = carries_message("sender", "msg")


@packet
@attrs.frozen
class ReliableAck:
    """``sender`` has received every packet 1..ack that ``dest`` sent it."""

    sender: int
    dest: int
    ack: int

    carries = carries_none

    def latest_key(self) -> tuple[str, int, int]:
        """Acknowledgements are cumulative: a later one on the channel supersedes this."""
        return ("ReliableAck", self.sender, self.dest)


class _Out:
    """A packet kept until acknowledged; ``deadline`` is None until a tick arms it."""

    __slots__ = ("attempts", "deadline", "msg", "payload", "rto", "sent")

    def __init__(self, msg: int, payload: Payload, rto: float) -> None:
        self.msg = msg
        self.payload = payload
        self.sent = False
        self.deadline: float | None = None
        self.rto = rto
        self.attempts = 0


class Reliable(EndpointBase):
    """Exactly-once, per-channel FIFO delivery over a lossy, duplicating network."""

    protocol = "Reliable"

    def __init__(
        self,
        pid: int,
        n: int,
        *,
        rto: float = 3.0,
        backoff: float = 2.0,
        max_rto: float = 30.0,
        window: int = 64,
        capacity: int = 64,
        arm_within: float = 0.0,
    ) -> None:
        super().__init__(pid, n)
        for name, value in (
            ("rto", rto),
            ("backoff", backoff),
            ("max_rto", max_rto),
            ("arm_within", arm_within),
        ):
            if type(value) not in (int, float) or not math.isfinite(value):
                raise LocalError(f"{name} must be a finite number, got {value!r}")
        if not 0 < rto <= max_rto or backoff < 1:
            raise LocalError("need 0 < rto <= max_rto and backoff >= 1")
        if arm_within < 0:
            raise LocalError(f"arm_within must be at least 0, got {arm_within!r}")
        for name, size in (("window", window), ("capacity", capacity)):
            if type(size) is not int or not 1 <= size <= 2**32:
                raise LocalError(f"{name} must be an integer in 1..2**32, got {size!r}")
        #: how long after the last tick new packets' timers may wait to be armed
        self.arm_within = float(arm_within)
        self.rto = float(rto)
        self.backoff = float(backoff)
        self.max_rto = float(max_rto)
        self.window = window
        self.capacity = capacity
        #: the host's time at the last tick
        self.time = HostTime()
        self.next_seq = [0] * n
        self.acked = [0] * n
        self.received = [0] * n
        #: per peer, the ``received`` it was last told at once (a data packet's ack, an
        #: urgent ack): how much of its window a lazy ack would leave waiting
        self._told = [0] * n
        self._out: list[dict[int, _Out]] = [{} for _ in range(n)]
        self._held: list[dict[int, ReliablePacket]] = [{} for _ in range(n)]
        self._timers: list[tuple[float, int, int]] = []
        self._unarmed = 0
        self.refused = 0
        self.retransmissions = 0

    # -- sending -------------------------------------------------------------------
    def can_send(self, to: int | None = None) -> bool:
        """True when a send to ``to`` (or to anyone, for None) goes on the wire at once."""
        if to is None:
            return max(map(len, self._out)) < self.window
        return len(self._out[self.check_dest(to)]) < self.window

    def send(self, payload: Payload, to: int) -> list[Action]:
        self.check_dest(to)
        self.check_payload(payload)
        mid = self.next_id()
        self.next_seq[to] += 1
        seq = self.next_seq[to]
        entry = _Out(mid.seq, payload, self.rto)
        self._out[to][seq] = entry
        if seq > self.acked[to] + self.window:
            return [Backpressure(to, seq - self.acked[to] - self.window)]
        return [self._transmit(to, seq, entry)]

    def _transmit(self, to: int, seq: int, entry: _Out) -> Transmit:
        if not entry.sent:
            entry.sent = True
            self._unarmed += 1
        self._told[to] = self.received[to]
        packet = ReliablePacket(self.pid, to, seq, entry.msg, self.received[to], entry.payload)
        return Transmit(to, packet, MessageId(self.pid, entry.msg))

    @property
    def now(self) -> float:
        """The host's time at the last tick (``time.now``)."""
        return self.time.now

    # -- time ------------------------------------------------------------------------
    def next_deadline(self) -> float | None:
        if self.time.rebase and (self._timers or self._unarmed):
            return 0.0  # restored: tick now, whatever the host's clock, to re-base
        timers = self._timers
        while timers and not self._live(*timers[0]):
            heapq.heappop(timers)
        first = timers[0][0] if timers else None
        if self._unarmed:  # arm new packets' timers at the next tick, within arm_within
            arm = self.time.now + self.arm_within
            return arm if first is None or arm < first else first
        return first

    def _live(self, deadline: float, to: int, seq: int) -> bool:
        entry = self._out[to].get(seq)
        return entry is not None and entry.deadline == deadline

    def tick(self, now: float) -> list[Action]:
        """Arm new packets' timers and retransmit those whose deadline passed.

        Deadlines are kept relative to the last ``now``: if the host's clock is
        behind it (a restore after a reboot, a clock reset), every deadline moves
        back with it, so nothing stalls; a clock ahead counts as time that passed.
        Each packet is retransmitted at most once per call.
        """
        back = self.time.take(now)
        if back:
            self._shift(back)
        now = self.time.now
        if self._unarmed:
            for to, out in enumerate(self._out):
                for seq, entry in out.items():
                    if entry.sent and entry.deadline is None:
                        self._arm(to, seq, entry, now)
            self._unarmed = 0
        actions: list[Action] = []
        timers = self._timers
        due = []
        while timers and timers[0][0] <= now:
            due.append(heapq.heappop(timers))
        for deadline, to, seq in due:
            if not self._live(deadline, to, seq):
                continue
            entry = self._out[to][seq]
            entry.attempts += 1
            entry.rto = min(entry.rto * self.backoff, self.max_rto)
            self.retransmissions += 1
            actions.append(self._transmit(to, seq, entry))
            self._arm(to, seq, entry, now)
        return actions

    def _shift(self, delta: float) -> None:
        """Move every deadline by ``delta`` (the host's clock went back)."""
        self._timers = []
        for to, out in enumerate(self._out):
            for seq, entry in out.items():
                if entry.deadline is not None:
                    entry.deadline = max(entry.deadline + delta, 0.0)
                    self._timers.append((entry.deadline, to, seq))
        heapq.heapify(self._timers)

    def _arm(self, to: int, seq: int, entry: _Out, now: float) -> None:
        entry.deadline = now + entry.rto
        heapq.heappush(self._timers, (entry.deadline, to, seq))

    # -- receiving ---------------------------------------------------------------------
    def _validate(self, packet: object) -> ReliablePacket | ReliableAck:
        kind = type(packet)
        if kind is ReliablePacket:  # the common case, checked inline (same rules as below)
            p: Any = packet
            sender, seq, msg, ack = p.sender, p.seq, p.msg, p.ack
            if (
                type(sender) is int
                and 0 <= sender < self.n
                and p.dest == self.pid
                and type(p.dest) is int
                and type(ack) is int
                and 0 <= ack <= min(self.next_seq[sender], self.acked[sender] + self.window)
                and type(seq) is int
                and 0 < seq <= validate.MAX_COUNTER
                and type(msg) is int
                and 0 < msg <= validate.MAX_COUNTER
            ):
                return p  # type: ignore[no-any-return]
        if type(packet) is not ReliablePacket and type(packet) is not ReliableAck:
            raise RemoteError(
                f"Reliable expected a ReliablePacket or ReliableAck, got {type(packet).__name__}"
            )
        assert isinstance(packet, ReliablePacket | ReliableAck)
        sender = validate.pid(packet.sender, self.n)
        validate.dest(packet.dest, self.pid, self.n)
        ack = validate.counter(packet.ack, "ack")
        on_wire = min(self.next_seq[sender], self.acked[sender] + self.window)
        if ack > on_wire:
            raise RemoteError(
                f"ack {ack} from P{sender} acknowledges packets P{self.pid} never sent "
                f"(it sent {on_wire})"
            )
        if isinstance(packet, ReliablePacket):
            validate.positive(packet.seq, "seq")
            validate.positive(packet.msg, "message seq")
        return packet

    def receive(self, packet: object) -> list[Action]:
        actions, acks = self._receive(packet)
        return actions + [self._ack(q) for q in acks]

    def receive_many(self, packets: Iterable[object]) -> tuple[list[Action], list[RemoteError]]:
        """Receive packets in order as one step, answered with one cumulative
        acknowledgement per peer (the last); packets refused are reported, not raised."""
        actions: list[Action] = []
        errors: list[RemoteError] = []
        owed: dict[int, None] = {}
        for item in packets:
            try:
                got, acks = self._receive(item)
            except RemoteError as exc:
                errors.append(exc)
                continue
            actions += got
            owed.update(dict.fromkeys(acks))
        return actions + [self._ack(q) for q in owed], errors

    def _ack(self, peer: int) -> Transmit:
        """Lazy: only the sender's memory and its window wait on it, and its next data
        packet carries the same ack; urgent (not lazy) once half the peer's window is
        packets it has not been told of at once, so a host that holds lazy packets
        never closes the window."""
        received = self.received[peer]
        urgent = received - self._told[peer] >= max(1, self.window // 2)
        if urgent:
            self._told[peer] = received
        return Transmit(peer, ReliableAck(self.pid, peer, received), None, lazy=not urgent)

    def _receive(self, packet: object) -> tuple[list[Action], tuple[int, ...]]:
        """The actions of one packet and the peers it must be acknowledged to."""
        p = self._validate(packet)
        actions = self._acknowledged(p.sender, p.ack)
        if isinstance(p, ReliableAck):
            return actions, ()
        sender, seq = p.sender, p.seq
        held = self._held[sender]
        if seq <= self.received[sender]:
            actions += self.on_copy(p)
        elif seq in held:
            self.duplicates += 1
        elif seq > self.received[sender] + self.capacity:
            self.refused += 1
            return actions, ()  # not acknowledged: the sender will try again
        elif seq == self.received[sender] + 1:
            self.received[sender] = seq
            actions.append(Deliver(_message(p)))
            while (nxt := held.pop(self.received[sender] + 1, None)) is not None:
                self.received[sender] += 1
                actions.append(Deliver(_message(nxt)))
        else:
            held[seq] = p
        return actions, (sender,)

    @hook
    def on_copy(self, p: ReliablePacket) -> list[Action]:
        """Rule: a data packet at or below what was received from its sender is a copy
        (duplicated, or sent again because an ack was lost): it is counted in
        ``duplicates`` and delivers nothing (it is acknowledged again all the same)."""
        self.duplicates += 1
        return []

    def _acknowledged(self, peer: int, ack: int) -> list[Action]:
        """Forget packets to ``peer`` up to ``ack``; send those the window now admits."""
        if ack <= self.acked[peer]:
            return []
        out = self._out[peer]
        for seq in range(self.acked[peer] + 1, ack + 1):
            entry = out.pop(seq)
            if entry.sent and entry.deadline is None:
                self._unarmed -= 1
        old_limit = self.acked[peer] + self.window
        self.acked[peer] = ack
        new_limit = min(ack + self.window, self.next_seq[peer])
        return [self._transmit(peer, s, out[s]) for s in range(old_limit + 1, new_limit + 1)]

    # -- introspection ---------------------------------------------------------------------
    def buffered(self) -> int:
        """Packets held in the mail room, waiting for earlier ones."""
        return sum(len(h) for h in self._held)

    def retained(self) -> int:
        """Packets kept for retransmission (sent or waiting) until acknowledged."""
        return sum(len(out) for out in self._out)

    def pending(self) -> list[Pending]:
        unit = f"packet to P{self.pid}"
        return [
            Pending(_message(p), (Wait(s, self.received[s], seq - 1, unit),))
            for s, held in enumerate(self._held)
            for seq, p in sorted(held.items())
        ]

    # -- snapshot ------------------------------------------------------------------------
    def _dump_out(self) -> list[list[list[Any]]]:
        return [
            [
                [seq, e.msg, plain(e.payload), e.sent, e.deadline, e.rto, e.attempts]
                for seq, e in sorted(out.items())
            ]
            for out in self._out
        ]

    def _load_out(self, data: object) -> None:
        for to, rows in enumerate(snap_list(data, "out", self.n)):
            expect = self.acked[to] + 1
            for row in snap_list(rows, f"out[{to}]"):
                seq, msg, payload, sent, deadline, rto, attempts = snap_list(row, "out row", 7)
                if seq != expect or seq > self.next_seq[to]:
                    raise LocalError(f"snapshot keeps packet {seq!r} to P{to} out of sequence")
                expect += 1
                entry = _Out(snap_positive(msg, "out.msg"), unplain(payload), snap_time(rto, "rto"))
                if not self.rto <= entry.rto <= self.max_rto:
                    raise LocalError(f"snapshot field out.rto {rto!r} is outside rto..max_rto")
                entry.sent = snap_bool(sent, "out.sent")
                entry.attempts = snap_counter(attempts, "out.attempts")
                if entry.sent != (seq <= self.acked[to] + self.window):
                    raise LocalError(f"snapshot says packet {seq} to P{to} sent against its window")
                if deadline is not None:
                    if not entry.sent:
                        raise LocalError("snapshot arms a timer for a packet never sent")
                    entry.deadline = snap_time(deadline, "out.deadline")
                    heapq.heappush(self._timers, (entry.deadline, to, seq))
                elif entry.sent:
                    self._unarmed += 1
                self._out[to][seq] = entry
            if expect != self.next_seq[to] + 1:
                raise LocalError(f"snapshot lacks packets to P{to} it has not seen acknowledged")

    def _dump_held(self) -> list[list[dict[str, Any]]]:
        return [[packet_to_data(p) for _, p in sorted(h.items())] for h in self._held]

    def _load_held(self, data: object) -> None:
        for frm, items in enumerate(snap_list(data, "held", self.n)):
            for item in snap_list(items, f"held[{frm}]"):
                p = packet_from_data(ReliablePacket, item)
                if p.sender != frm or p.dest != self.pid:
                    raise LocalError(f"snapshot holds a packet from P{p.sender!r} under P{frm}")
                validate.positive(p.msg, "held.msg")
                validate.counter(p.ack, "held.ack")
                seq = validate.positive(p.seq, "held.seq")
                if not self.received[frm] + 1 < seq <= self.received[frm] + self.capacity:
                    raise LocalError(f"snapshot holds packet {seq} from P{frm} outside its window")
                if seq in self._held[frm]:
                    raise LocalError(f"snapshot holds packet {seq} from P{frm} twice")
                self._held[frm][seq] = p

    persistent = (
        arguments("params", ("rto", "backoff", "max_rto", "window", "capacity")),
        Field("arm_within", kind=TIME, absent=0.0),
        NOW,
        counts("next_seq"),
        counts("acked"),
        counts("received"),
        Field.custom("out", _dump_out, _load_out),
        Field.custom("held", _dump_held, _load_held),
        counter("refused"),
        counter("retransmissions"),
    )


def _message(p: ReliablePacket) -> Message:
    return Message(MessageId(p.sender, p.msg), p.sender, p.payload)


__all__ = ["Reliable", "ReliableAck", "ReliablePacket"]
