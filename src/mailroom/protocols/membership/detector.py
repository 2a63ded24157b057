"""A heartbeat failure detector, as its own layer around a group endpoint.

For hosts that have no failure detector of their own. Rules, in words:

- Beating: while the group has a view, every ``interval`` the detector sends
  ``Heartbeat(view, sender)`` to every other member (the first at the tick that
  follows the installation of a view).
- Hearing: a Heartbeat from a process, or any group packet that names its
  ``sender``, counts as hearing from that process; the detector reads no clock,
  so it is noted at the next ``tick(now)`` as heard at ``now``.
- Suspecting: a member not heard from for ``timeout`` is passed to
  ``group.suspect(pid)``, once per view (again if the group withdrew the suspicion:
  the member answered, and stays silent anew); when the group installs a new view,
  members that stay keep their last-heard time (a silent one is suspected again
  at once), newcomers start at the tick that sees the view.
- Founding: with ``formation`` seconds, the members of the first view this detector
  watches (the founders, view 1) count as heard ``formation`` seconds after that tick
  until they are really heard from: a founder that starts late is let into the
  founding view instead of being excluded before it ever ran. Once heard from, or
  in any later view, the rule above holds. (0, the default: no window.)
- Time: ``tick(now)`` with a clock behind the last one (a restore on another
  machine) moves every kept time back with it, as ``Reliable`` does.

Everything else (sends, joins, leaves, state transfer, the group's own timers) is
passed through to the group; ``snapshot()`` includes the group's snapshot.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable
from typing import Any, Protocol, Self, runtime_checkable

import attrs

from mailroom.core import validate
from mailroom.core.actions import Action, Transmit, View
from mailroom.core.endpoint import Endpoint, EndpointBase, Snapshot, capabilities, receive_each
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, Payload
from mailroom.core.pending import Pending
from mailroom.core.persist import (
    COUNTER,
    PIDS,
    TIME,
    Field,
    arguments,
    counter,
    init_arguments,
    snap_list,
    snap_pid,
    snap_time,
)
from mailroom.core.registry import restore_endpoint
from mailroom.core.timers import MAX_TIME, NOW, HostTime
from mailroom.core.wire import packet


@packet
@attrs.frozen
class Heartbeat:
    """``sender``, a member of view ``view``, is alive."""

    view: int
    sender: int

    def carries(self) -> MessageId | None:
        """A control packet: it carries no application message."""
        return None


@runtime_checkable
class GroupLike(Endpoint, Protocol):
    """What the detector needs of the endpoint it wraps (a ``Group``)."""

    @property
    def view(self) -> View | None: ...

    def suspect(self, pid: int) -> list[Action]: ...


def _of_group(name: str) -> Any:
    """The wrapped group's attribute ``name``: read here, never set here."""

    def read(self: HeartbeatDetector) -> Any:
        return getattr(self.group, name)

    def refuse(self: HeartbeatDetector, value: object) -> None:
        raise LocalError(f"a HeartbeatDetector's {name} is its group's")

    return property(read, refuse, doc=f"The group's ``{name}``.")


def _check_time(value: object, what: str) -> float:
    if type(value) is int or type(value) is float:
        number = float(value)
        if math.isfinite(number) and 0 < number <= MAX_TIME:
            return number
    raise LocalError(f"{what} must be a positive finite number, got {value!r}")


def _beats_iff_watching(d: HeartbeatDetector, beat: float | None) -> str | None:
    """``next_beat``: set exactly when a view is watched (loaded just above)."""
    return None if (d.watching is None) == (beat is None) else "does not fit watching"


def _suspects_watched(d: HeartbeatDetector, suspected: set[int]) -> str | None:
    """``suspected``: only members it watches (``heard``, loaded above)."""
    return None if suspected <= set(d.heard) else "holds a process it does not watch"


def _group_argument(data: object) -> dict[str, Any]:
    """``group``: the wrapped endpoint, restored from its own snapshot."""
    if not isinstance(data, dict) or data.get("protocol") == HeartbeatDetector.protocol:
        raise LocalError("snapshot field group must be another endpoint's snapshot")
    return {"group": restore_endpoint(data)}


class HeartbeatDetector(EndpointBase):
    """Suspects a member of the group's view that stays silent for ``timeout``."""

    protocol = "HeartbeatDetector"

    def __init__(
        self, group: Any, *, interval: float = 1.0, timeout: float = 3.0, formation: float = 0.0
    ) -> None:
        if not isinstance(group, GroupLike):
            raise LocalError(f"{group!r} is not a group endpoint (it needs view and suspect)")
        self.interval = _check_time(interval, "interval")
        self.timeout = _check_time(timeout, "timeout")
        self.formation = 0.0 if formation == 0 else _check_time(formation, "formation")
        self.group: Any = group
        self.pid = group.pid
        self.n = group.n
        #: What the application may call: the group's capabilities.
        self.capabilities: frozenset[str] = capabilities(group)
        #: the host's time at the last tick
        self.time = HostTime()
        #: The view id the heartbeat schedule was set up for (None: no view yet).
        self.watching: int | None = None
        self.next_beat: float | None = None
        #: member -> the time it was last heard from (as of a tick)
        self.heard: dict[int, float] = {}
        #: processes heard from since the last tick
        self.fresh: set[int] = set()
        #: members passed to group.suspect in the watched view
        self.suspected: set[int] = set()
        self.heartbeats_sent = 0
        #: process -> the latest view id its heartbeats named (an observation for the
        #: host, ``heard_in``: not in snapshots, and no action depends on it)
        self.beats: dict[int, int] = {}

    def __repr__(self) -> str:
        return f"HeartbeatDetector({self.group!r})"

    # -- the group's counters and surface, passed through ----------------------------------
    sent_count = _of_group("sent_count")
    duplicates = _of_group("duplicates")
    view = _of_group("view")
    flushing = _of_group("flushing")
    sending_view = _of_group("sending_view")
    joined = _of_group("joined")
    safe = _of_group("safe")

    @property
    def needs_consume(self) -> bool:
        return "consume" in self.capabilities and bool(self.group.needs_consume)

    def _offers(self, capability: str) -> None:
        if capability not in self.capabilities:
            raise LocalError(f"{self!r} does not offer {capability}")

    def broadcast(self, payload: Payload) -> list[Action]:
        self._offers("broadcast")
        return list(self.group.broadcast(payload))

    def send(self, payload: Payload, to: int) -> list[Action]:
        self._offers("unicast")
        return list(self.group.send(payload, to=to))

    def multicast(self, payload: Payload, to: Collection[int]) -> list[Action]:
        self._offers("multicast")
        return list(self.group.multicast(payload, to=to))

    def consume(self, message_id: MessageId | None = None) -> list[Action]:
        self._offers("consume")
        return list(self.group.consume(message_id))

    def can_send(self, to: int | None = None) -> bool:
        self._offers("can_send")
        return bool(self.group.can_send(to))

    def suspect(self, pid: int) -> list[Action]:
        """Another detector's (or the host's) suspicion, passed on to the group."""
        return list(self.group.suspect(pid))

    def leave(self) -> list[Action]:
        return list(self.group.leave())

    def join(self, contacts: Collection[int] | None = None) -> list[Action]:
        if contacts is None:
            return list(self.group.join())
        return list(self.group.join(contacts))

    def status(self) -> Any:
        """The group's ``status()`` (a ``GroupStatus``)."""
        return self.group.status()

    def provide_state(self, view: int, state: Payload) -> list[Action]:
        return list(self.group.provide_state(view, state))

    # -- the network's side ---------------------------------------------------------------
    def receive(self, packet: object) -> list[Action]:
        if type(packet) is Heartbeat:
            return self._heartbeat(packet)
        actions: list[Action] = self.group.receive(packet)
        sender = getattr(packet, "sender", None)
        if type(sender) is int and 0 <= sender < self.n and sender != self.pid:
            self.fresh.add(sender)
        return actions

    def receive_many(self, packets: Iterable[object]) -> tuple[list[Action], list[RemoteError]]:
        """Receive ``packets`` in order as one step of the group's (``one_step``)."""
        one_step = getattr(self.group, "one_step", None)
        if callable(one_step):
            result: tuple[list[Action], list[RemoteError]] = one_step(self.receive, packets)
            return result
        return receive_each(self.receive, packets)

    def _heartbeat(self, beat: Heartbeat) -> list[Action]:
        validate.counter(beat.view, "Heartbeat view")
        validate.pid(beat.sender, self.n, "Heartbeat sender")
        if beat.sender == self.pid:
            raise RemoteError(f"Heartbeat from P{self.pid} to itself")
        self.fresh.add(beat.sender)
        self.beats[beat.sender] = max(beat.view, self.beats.get(beat.sender, 0))
        view = self.group.view
        if view is None or beat.view != view.id:  # one of the two missed a view change
            return list(self.group.notice(beat.sender, beat.view))
        return []

    @property
    def now(self) -> float:
        """The host's time at the last tick (``time.now``)."""
        return self.time.now

    # -- time -------------------------------------------------------------------------------
    def _own_deadline(self) -> float | None:
        view = self.group.view
        if view is None:
            return self.time.now if self.watching is not None else None
        if self.time.rebase:
            return 0.0  # restored: tick now, whatever the host's clock, to re-base
        if self.watching != view.id:
            return self.time.now
        times = [self.next_beat] if self.next_beat is not None else []
        times += [t + self.timeout for q, t in self.heard.items() if q not in self.suspected]
        return min(times) if times else None

    def next_deadline(self) -> float | None:
        deadlines = [d for d in (self._own_deadline(), self.group.next_deadline()) if d is not None]
        return min(deadlines) if deadlines else None

    def tick(self, now: float) -> list[Action]:
        """The group's timers, then heartbeats due and suspicions of silent members."""
        back = self.time.take(now)
        if back:
            self._shift(back)
        now = self.time.now
        actions: list[Action] = list(self.group.tick(now))
        actions += self._watch()
        return actions

    def _watch(self) -> list[Action]:
        """Bring the schedule to the group's view; beat and suspect what is due now."""
        now = self.time.now
        view = self.group.view
        if view is None:
            self.watching, self.next_beat = None, None
            self.heard.clear()
            self.fresh.clear()
            self.suspected.clear()
            return []
        others = [q for q in view.members if q != self.pid]
        if self.watching != view.id:
            founding = self.watching is None and not self.heard and view.id == 1
            start = now + self.formation if founding else now
            self.watching = view.id
            self.heard = {q: self.heard.get(q, start) for q in others}
            self.suspected.clear()
            self.next_beat = now
        for q in self.fresh:
            if q in self.heard:
                self.heard[q] = now  # (before a founder's window ends: it ends for it)
        self.fresh.clear()
        actions: list[Action] = []
        if self.next_beat is not None and now >= self.next_beat:
            for q in others:
                actions.append(Transmit(q, Heartbeat(view.id, self.pid), None))
            self.heartbeats_sent += len(others)
            self.next_beat = now + self.interval
        # a suspicion the group withdrew (the member answered) may be raised again
        self.suspected &= set(getattr(self.group, "suspects", self.suspected))
        for q in others:
            # the same sum as the deadline, so a tick at that deadline always suspects
            if q not in self.suspected and now >= self.heard[q] + self.timeout:
                self.suspected.add(q)
                actions += self.group.suspect(q)
        return actions

    def _shift(self, delta: float) -> None:
        """Move every kept time by ``delta`` (the host's clock went back)."""
        if self.next_beat is not None:
            self.next_beat = max(self.next_beat + delta, 0.0)
        self.heard = {q: max(t + delta, 0.0) for q, t in self.heard.items()}

    # -- introspection ------------------------------------------------------------------------
    def heard_in(self, view: View) -> set[int]:
        """The members of ``view`` known to have installed it: this process if it has, and
        each other member whose heartbeat named ``view`` (a host asks it before it trusts
        a view it started in: a founder that starts late finds the others gone on)."""
        mine = self.group.view
        heard = {q for q in view.members if self.beats.get(q) == view.id}
        if mine is not None and mine.id == view.id and self.pid in view.members:
            heard.add(self.pid)
        return heard

    def buffered(self) -> int:
        return int(self.group.buffered())

    def pending(self) -> list[Pending]:
        return list(self.group.pending())

    # -- snapshot ----------------------------------------------------------------------------
    @classmethod
    def _from_header(cls, data: Snapshot) -> Self:
        """The detector around its restored group, with its parameters; the header's
        counters are the group's."""
        cls._check_header(data)
        return cls(**init_arguments(cls.persistent, data))

    def _dump_heard(self) -> list[list[Any]]:
        return [[q, t] for q, t in sorted(self.heard.items())]

    def _load_heard(self, data: object) -> None:
        for row in snap_list(data, "heard"):
            q, t = snap_list(row, "heard row", 2)
            self.heard[snap_pid(q, self.n, "heard")] = snap_time(t, "heard")
        if self.pid in self.heard or (self.heard and self.watching is None):
            raise LocalError("snapshot field heard holds a process it does not watch")

    persistent = (
        arguments("params", ("interval", "timeout")),
        Field("formation", kind=TIME, init=lambda value: {"formation": value}, absent=0.0),
        NOW,
        Field("watching", kind=COUNTER.optional()),
        Field("next_beat", kind=TIME.optional(), check=_beats_iff_watching),
        Field.custom("heard", _dump_heard, _load_heard),
        Field("fresh", kind=PIDS),
        Field("suspected", kind=PIDS, check=_suspects_watched),
        counter("heartbeats_sent"),
        Field("group", dumper=lambda d: d.group.snapshot(), init=_group_argument),
    )


__all__ = ["GroupLike", "Heartbeat", "HeartbeatDetector"]
