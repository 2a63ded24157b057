"""The endpoint contract (sans-IO) and the small base class the protocols share.

An endpoint is the state of one process's mail clerk. It does no I/O, reads no
clock and draws no random numbers; everything it wants done comes back as a
list of actions. See docs/story.md, "The design".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from mailroom.core.actions import Action
from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import MessageId, Payload, check_payload
from mailroom.core.pending import Pending
from mailroom.core.persist import MAX_COUNTER as MAX_COUNTER
from mailroom.core.persist import Field, check_table, dump_fields, init_arguments, load_fields
from mailroom.core.persist import load_counts as load_counts
from mailroom.core.persist import snap_bool as snap_bool
from mailroom.core.persist import snap_counter as snap_counter
from mailroom.core.persist import snap_list as snap_list
from mailroom.core.persist import snap_pid as snap_pid
from mailroom.core.persist import snap_positive as snap_positive
from mailroom.core.persist import snap_seen as snap_seen
from mailroom.core.persist import snap_time as snap_time
from mailroom.core.validate import BATCH_LIMIT
from mailroom.core.wire import is_packet

Snapshot = dict[str, Any]


@runtime_checkable
class Endpoint(Protocol):
    """What every endpoint offers, whatever its ordering guarantee.

    ``sent_count``: application messages this endpoint has sent (its last message
    id's seq); ``duplicates``: packets dropped as copies of ones already received.
    """

    @property
    def pid(self) -> int: ...
    @property
    def n(self) -> int: ...
    @property
    def sent_count(self) -> int: ...
    @property
    def duplicates(self) -> int: ...

    def receive(self, packet: object) -> list[Action]: ...
    def tick(self, now: float) -> list[Action]: ...
    def next_deadline(self) -> float | None: ...
    def pending(self) -> list[Pending]: ...
    def buffered(self) -> int: ...
    def snapshot(self) -> Snapshot: ...


@runtime_checkable
class UnicastEndpoint(Endpoint, Protocol):
    """Sends a message to one process."""

    def send(self, payload: Payload, to: int) -> list[Action]: ...


@runtime_checkable
class BroadcastEndpoint(Endpoint, Protocol):
    """Sends a message to every process, itself included."""

    def broadcast(self, payload: Payload) -> list[Action]: ...


@runtime_checkable
class MulticastEndpoint(Endpoint, Protocol):
    """Sends a message to a set of processes."""

    def multicast(self, payload: Payload, to: Collection[int]) -> list[Action]: ...


@runtime_checkable
class ConsumingEndpoint(Endpoint, Protocol):
    """Needs to hear when the application takes a delivery (``consume``); hosts
    must call it after the application handled each ``Deliver`` when
    ``needs_consume`` is true, and hand ``Stable`` actions to the application."""

    @property
    def needs_consume(self) -> bool: ...

    def consume(self, message_id: MessageId | None = None) -> list[Action]: ...


@runtime_checkable
class FlowControlled(Endpoint, Protocol):
    """Says when a send would only be queued (``Backpressure``)."""

    def can_send(self, to: int | None = None) -> bool: ...


@runtime_checkable
class BatchReceiving(Endpoint, Protocol):
    """Receives several packets as one step (and may batch its replies)."""

    def receive_many(self, packets: Iterable[object]) -> tuple[list[Action], list[RemoteError]]: ...


def receive_batch(
    endpoint: Endpoint, packets: Iterable[object]
) -> tuple[list[Action], list[RemoteError]]:
    """Receive ``packets`` in order as one step; refused packets are returned, not raised."""
    # (a method lookup: asking the BatchReceiving protocol costs tens of µs a call)
    many = getattr(endpoint, "receive_many", None)
    if callable(many):
        result: tuple[list[Action], list[RemoteError]] = many(packets)
        return result
    return receive_each(endpoint.receive, packets)


def receive_each(
    receive: Callable[[object], list[Action]], packets: Iterable[object]
) -> tuple[list[Action], list[RemoteError]]:
    """``receive(packet)`` for each of ``packets`` in order; the refused ones' errors are
    returned, not raised."""
    actions: list[Action] = []
    errors: list[RemoteError] = []
    for packet in packets:
        try:
            actions += receive(packet)
        except RemoteError as exc:
            errors.append(exc)
    return actions, errors


@runtime_checkable
class BatchBroadcasting(Endpoint, Protocol):
    """Broadcasts several payloads as one step (and may carry them in one packet)."""

    def broadcast_many(self, payloads: Sequence[Payload]) -> list[Action]: ...


def broadcast_batch(endpoint: Endpoint, payloads: Sequence[Payload]) -> list[Action]:
    """Broadcast ``payloads`` in order as one step; their ids are ``sent_count + 1``, ``+ 2``...

    The same deliveries as one ``broadcast`` per payload, in the same order; an endpoint
    with ``broadcast_many`` may carry the batch in fewer packets. Every payload is checked
    first, so a bad one is a LocalError and nothing is sent.
    """
    return _batch(endpoint, payloads, "broadcast", "broadcast_many", ())


def _batch(
    endpoint: Endpoint, payloads: Sequence[Payload], one: str, many: str, to: tuple[int, ...]
) -> list[Action]:
    """``broadcast_batch`` (``to`` empty) or ``send_batch`` (``to`` the destination): the
    capability ``one`` required, every payload checked, then ``many`` or ``one`` each."""
    require(endpoint, "unicast" if to else one)
    batch = list(payloads)
    for payload in batch:
        check_payload(payload)
    # (a method lookup: asking the BatchBroadcasting protocol costs tens of µs a call)
    method = getattr(endpoint, many, None)
    if callable(method):
        return list(method(batch, *to))
    single = getattr(endpoint, one)
    return [a for payload in batch for a in single(payload, *to)]


def upcoming_ids(endpoint: Endpoint, count: int = 1) -> list[MessageId]:
    """The ids the next ``count`` messages ``endpoint`` sends will get, in order.

    An endpoint numbers its own messages (``sent_count``: the last one's seq), so a
    host that must name a message before it is sent (a replica registering its call,
    a node tracing or queueing a send) asks this rather than computing the rule."""
    first = int(endpoint.sent_count) + 1
    return [MessageId(endpoint.pid, first + k) for k in range(count)]


def upcoming_id(endpoint: Endpoint) -> MessageId:
    """The id the next message ``endpoint`` sends will get (``upcoming_ids``)."""
    return MessageId(endpoint.pid, int(endpoint.sent_count) + 1)


@runtime_checkable
class BatchSending(Endpoint, Protocol):
    """Sends several payloads to one process as one step (and may carry them in one packet)."""

    def send_many(self, payloads: Sequence[Payload], to: int) -> list[Action]: ...


def send_batch(endpoint: Endpoint, payloads: Sequence[Payload], to: int) -> list[Action]:
    """Send ``payloads`` to process ``to`` in order as one step; their ids are
    ``sent_count + 1``, ``+ 2``...

    The same deliveries as one ``send`` per payload, in the same order; an endpoint
    with ``send_many`` may carry the batch in fewer packets. Every payload is checked
    first, so a bad one is a LocalError and nothing is sent.
    """
    return _batch(endpoint, payloads, "send", "send_many", (to,))


def consumer(endpoint: object) -> ConsumingEndpoint | None:
    """The endpoint, if its host must call ``consume`` for every delivery; else None."""
    if "consume" in capabilities(endpoint) and isinstance(endpoint, ConsumingEndpoint):
        return endpoint if endpoint.needs_consume else None
    return None


#: The capability protocols, by the name hosts and errors use.
CAPABILITIES: dict[str, type] = {
    "unicast": UnicastEndpoint,
    "broadcast": BroadcastEndpoint,
    "multicast": MulticastEndpoint,
    "consume": ConsumingEndpoint,
    "can_send": FlowControlled,
    # batch forms: one call (and, where the protocol has batch packets, one packet per
    # destination) for several payloads; a host may coalesce sends into them
    "broadcast_many": BatchBroadcasting,
    "send_many": BatchSending,
}


def capabilities(endpoint: object) -> frozenset[str]:
    """The capabilities an endpoint offers (names of ``CAPABILITIES``)."""
    offered = getattr(endpoint, "capabilities", None)
    if isinstance(offered, frozenset):
        return offered
    if isinstance(endpoint, EndpointBase):  # methods of the class: ask its protocols once
        kind = type(endpoint)
        offered = _CLASS_CAPABILITIES.get(kind)
        if offered is None:
            offered = _CLASS_CAPABILITIES[kind] = _ask_protocols(endpoint)
        return offered
    return _ask_protocols(endpoint)


#: The capabilities of each EndpointBase subclass: a ``runtime_checkable`` isinstance
#: costs tens of microseconds, and hosts ask before every send and batch.
_CLASS_CAPABILITIES: dict[type, frozenset[str]] = {}


def _ask_protocols(endpoint: object) -> frozenset[str]:
    return frozenset(name for name, proto in CAPABILITIES.items() if isinstance(endpoint, proto))


def require(endpoint: object, capability: str) -> None:
    """LocalError unless ``endpoint`` offers ``capability``."""
    if capability not in capabilities(endpoint):
        raise LocalError(f"{endpoint!r} does not offer {capability}")


# -- strict snapshot fields: each returns the value or raises LocalError ------------------
# (defined with the persistent-field table in mailroom.core.persist; re-exported here)
#: Groups larger than this are refused when restoring (state is allocated per process).
MAX_GROUP = 4096


def same_data(a: object, b: object) -> bool:
    """Equal as snapshot data, types included (True is not 1, 1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        assert isinstance(b, dict)
        return a.keys() == b.keys() and all(same_data(a[k], b[k]) for k in a)
    if isinstance(a, list):
        assert isinstance(b, list)
        return len(a) == len(b) and all(same_data(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))  # type: ignore[arg-type]
    return a == b


def first_difference(a: object, b: object, path: str = "") -> str:
    """Where two snapshot data differ (for error messages)."""
    if type(a) is not type(b):
        return path or "top"
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{path}.{k}" if path else str(k)
            if not same_data(a[k], b[k]):
                return first_difference(a[k], b[k], f"{path}.{k}" if path else str(k))
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path} (length)"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if not same_data(x, y):
                return first_difference(x, y, f"{path}[{i}]")
    return path or "top"


def _chunks(
    payloads: Sequence[Payload],
    check: Callable[[Payload], None],
    single: Callable[[Payload], list[Action]],
    many: Callable[[tuple[Payload, ...]], list[Action]] | None,
) -> list[Action]:
    """Every payload checked, then ``many`` for each run of 2..``BATCH_LIMIT`` of them
    and ``single`` for a run of one, or for each payload when one is a packet (a packet
    travels alone) or there is no ``many``."""
    batch = list(payloads)
    for payload in batch:
        check(payload)
    if many is None or any(is_packet(p) for p in batch):
        return [a for p in batch for a in single(p)]
    actions: list[Action] = []
    for start in range(0, len(batch), BATCH_LIMIT):
        chunk = tuple(batch[start : start + BATCH_LIMIT])
        actions += single(chunk[0]) if len(chunk) == 1 else many(chunk)
    return actions


#: Endpoint classes by protocol name, so a Stack snapshot can rebuild its layers.
ENDPOINT_TYPES: dict[str, type[EndpointBase]] = {}
#: The keys of every endpoint snapshot's header (``EndpointBase._header``), in order.
HEADER_KEYS = ("protocol", "version", "pid", "n", "sent_count", "duplicates")


class EndpointBase:
    """Shared plumbing: pid/n checks, message ids, duplicate counting, snapshot header."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        check_table(cls.__name__, cls.persistent, HEADER_KEYS)
        if "protocol" in cls.__dict__:  # a helper subclass that inherits a name must not
            ENDPOINT_TYPES[cls.protocol] = cls  # replace the class it borrowed it from

    #: Name written into snapshots; restore() refuses a snapshot of another protocol.
    protocol: ClassVar[str] = "endpoint"
    snapshot_version: ClassVar[int] = 1
    #: What the snapshot holds after its header, declared once (mailroom.core.persist):
    #: ``snapshot`` writes these fields and ``_load`` reads them back, in this order.
    persistent: ClassVar[tuple[Field, ...]] = ()

    def __init__(self, pid: int, n: int) -> None:
        if type(n) is not int or n < 1:
            raise LocalError(f"n must be a positive integer, got {n!r}")
        if type(pid) is not int or not 0 <= pid < n:
            raise LocalError(f"pid must be in 0..{n - 1}, got {pid!r}")
        self.pid = pid
        self.n = n
        self.sent_count = 0
        self.duplicates = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}(pid={self.pid}, n={self.n})"

    # -- helpers for subclasses (``mailroom.lowlevel``) ---------------------------------
    # Public for protocol authors; the underscore names are the same functions, kept
    # for protocols written before 0.3 (each is an alias, not a call more per send).
    def check_dest(self, to: object) -> int:
        """``to`` if it is a process of this group, else LocalError."""
        if type(to) is not int or not 0 <= to < self.n:
            raise LocalError(f"destination {to!r} is not a process of this group (0..{self.n - 1})")
        return to

    def check_payload(self, payload: Payload) -> None:
        """LocalError unless ``payload`` can travel (``mailroom.core.check_payload``)."""
        check_payload(payload)

    def next_id(self) -> MessageId:
        """The id of the message sent now: counts it in ``sent_count``."""
        self.sent_count += 1
        return MessageId(self.pid, self.sent_count)

    def next_ids(self, size: int) -> MessageId:
        """The id of the first of ``size`` messages sent now (the others follow it)."""
        self.sent_count += size
        return MessageId(self.pid, self.sent_count - size + 1)

    _check_dest = check_dest
    _check_payload = check_payload
    _next_id = next_id
    _next_ids = next_ids

    def _broadcast_chunks(
        self,
        payloads: Sequence[Payload],
        send: Callable[[tuple[Payload, ...]], list[Action]],
    ) -> list[Action]:
        """``broadcast_many`` for a protocol with batch packets: every payload checked
        first, then ``send`` for each run of 2..``BATCH_LIMIT`` of them (a run of one
        is a plain ``broadcast``; payloads that are packets travel one by one)."""
        return _chunks(payloads, self._check_payload, self.broadcast, send)  # type: ignore[attr-defined]

    def _send_chunks(
        self,
        payloads: Sequence[Payload],
        to: int,
        send: Callable[[tuple[Payload, ...], int], list[Action]],
    ) -> list[Action]:
        """``send_many`` for a protocol with batch packets: the destination and every
        payload checked first, then ``send(run, to)`` for each run of 2..``BATCH_LIMIT``
        of them (a run of one is a plain ``send``; packets travel one by one)."""
        self._check_dest(to)
        single = self.send  # type: ignore[attr-defined]
        return _chunks(
            payloads, self._check_payload, lambda p: single(p, to=to), lambda c: send(c, to)
        )

    # -- contract defaults --------------------------------------------------------
    def tick(self, now: float) -> list[Action]:
        """No timers: nothing to do."""
        return []

    def next_deadline(self) -> float | None:
        return None

    def _header(self) -> Snapshot:
        return {
            "protocol": self.protocol,
            "version": self.snapshot_version,
            "pid": self.pid,
            "n": self.n,
            "sent_count": self.sent_count,
            "duplicates": self.duplicates,
        }

    def snapshot(self) -> Snapshot:
        """The endpoint's state as JSON data: the header, then the ``persistent`` fields."""
        data = self._header()
        dump_fields(self, self.persistent, data)
        return data

    def _load(self, data: Snapshot) -> None:
        """Fill a fresh endpoint from a snapshot's body: the ``persistent`` fields, in order."""
        load_fields(self, self.persistent, data)

    @classmethod
    def restore(cls, data: Snapshot) -> Self:
        """Rebuild an endpoint from ``snapshot()`` data; LocalError if it does not fit.

        Strict: the data must be exactly what ``snapshot()`` of the rebuilt endpoint
        writes (no unknown keys, no stray types), and every packet in it must be
        one the protocol would have accepted.
        """
        return cls._checked(data, lambda: cls._from_header(data))

    @classmethod
    def _checked(cls, data: Snapshot, build: Any) -> Self:
        try:
            ep: Self = build()
            ep._load(data)
            back = ep.snapshot()
        except LocalError:
            raise
        except RemoteError as exc:
            raise LocalError(f"snapshot of {cls.protocol} holds a bad packet: {exc}") from None
        except (
            KeyError,
            TypeError,
            ValueError,
            IndexError,
            AttributeError,
            ArithmeticError,
            RecursionError,
        ) as exc:
            raise LocalError(f"snapshot of {cls.protocol} does not fit: {exc!r}") from None
        if not same_data(back, data):
            where = first_difference(back, data)
            raise LocalError(
                f"snapshot of {cls.protocol} is not what snapshot() writes (at {where})"
            )
        return ep

    @classmethod
    def _check_header(cls, data: Snapshot) -> None:
        """LocalError unless ``data`` is a snapshot of this protocol and version."""
        if not isinstance(data, dict):
            raise LocalError(f"a snapshot is a dict, got {type(data).__name__}")
        if data.get("protocol") != cls.protocol:
            raise LocalError(f"snapshot is of {data.get('protocol')!r}, not {cls.protocol!r}")
        if data.get("version") != cls.snapshot_version:
            raise LocalError(f"snapshot version {data.get('version')!r} is not supported")
        n = data.get("n")
        if type(n) is int and n > MAX_GROUP:
            raise LocalError(f"snapshot names a group of {n} processes (at most {MAX_GROUP})")

    @classmethod
    def _from_header(cls, data: Snapshot) -> Self:
        """A fresh endpoint built from the header and the ``persistent`` fields that are
        constructor arguments."""
        cls._check_header(data)
        try:
            ep = cls(data["pid"], data["n"], **init_arguments(cls.persistent, data))
            ep.sent_count = snap_counter(data["sent_count"], "sent_count")
            ep.duplicates = snap_counter(data["duplicates"], "duplicates")
        except KeyError as exc:
            raise LocalError(f"snapshot lacks {exc.args[0]!r}") from None
        return ep
