"""The endpoint contract (sans-IO) and the small base class the protocols share.

An endpoint is the state of one process's mail clerk. It does no I/O, reads no
clock and draws no random numbers; everything it wants done comes back as a
list of actions. See DESIGN.md, "The endpoint contract".
"""

from __future__ import annotations

from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from mailroom.core.actions import Action
from mailroom.core.errors import LocalError
from mailroom.core.messages import MessageId, Payload, check_payload
from mailroom.core.pending import Pending

Snapshot = dict[str, Any]


@runtime_checkable
class Endpoint(Protocol):
    """What every endpoint offers, whatever its ordering guarantee."""

    pid: int
    n: int

    def receive(self, packet: object) -> list[Action]: ...
    def tick(self, now: float) -> list[Action]: ...
    def next_deadline(self) -> float | None: ...
    def pending(self) -> list[Pending]: ...
    def buffered(self) -> int: ...
    def snapshot(self) -> Snapshot: ...


@runtime_checkable
class UnicastEndpoint(Endpoint, Protocol):
    def send(self, payload: Payload, to: int) -> list[Action]: ...


@runtime_checkable
class BroadcastEndpoint(Endpoint, Protocol):
    def broadcast(self, payload: Payload) -> list[Action]: ...


def load_counts(value: object, n: int, what: str) -> list[int]:
    """A snapshot's vector of n non-negative counters, or LocalError."""
    if not isinstance(value, list) or len(value) != n:
        raise LocalError(f"snapshot field {what} must be a list of {n} counters")
    if any(type(v) is not int or v < 0 for v in value):
        raise LocalError(f"snapshot field {what} holds something other than counters")
    return list(value)


#: Endpoint classes by protocol name, so a Stack snapshot can rebuild its layers.
ENDPOINT_TYPES: dict[str, type[EndpointBase]] = {}


class EndpointBase:
    """Shared plumbing: pid/n checks, message ids, duplicate counting, snapshot header."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "protocol" in cls.__dict__:  # a helper subclass that inherits a name must not
            ENDPOINT_TYPES[cls.protocol] = cls  # replace the class it borrowed it from

    #: Name written into snapshots; restore() refuses a snapshot of another protocol.
    protocol: ClassVar[str] = "endpoint"
    snapshot_version: ClassVar[int] = 1

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

    # -- helpers for subclasses -------------------------------------------------
    def _check_dest(self, to: object) -> int:
        if type(to) is not int or not 0 <= to < self.n:
            raise LocalError(f"destination {to!r} is not a process of this group (0..{self.n - 1})")
        return to

    def _check_payload(self, payload: Payload) -> None:
        check_payload(payload)

    def _next_id(self) -> MessageId:
        self.sent_count += 1
        return MessageId(self.pid, self.sent_count)

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

    def _load(self, data: Snapshot) -> None:
        """Fill a fresh endpoint from a snapshot's body (subclasses override)."""

    @classmethod
    def restore(cls, data: Snapshot) -> Self:
        """Rebuild an endpoint from ``snapshot()`` data; LocalError if it does not fit."""
        ep = cls._from_header(data)
        try:
            ep._load(data)
        except LocalError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise LocalError(f"snapshot of {cls.protocol} does not fit: {exc!r}") from None
        return ep

    @classmethod
    def _from_header(cls, data: Snapshot) -> Self:
        if not isinstance(data, dict):
            raise LocalError(f"a snapshot is a dict, got {type(data).__name__}")
        if data.get("protocol") != cls.protocol:
            raise LocalError(f"snapshot is of {data.get('protocol')!r}, not {cls.protocol!r}")
        if data.get("version") != cls.snapshot_version:
            raise LocalError(f"snapshot version {data.get('version')!r} is not supported")
        try:
            ep = cls(data["pid"], data["n"])
            ep.sent_count = int(data["sent_count"])
            ep.duplicates = int(data["duplicates"])
        except KeyError as exc:
            raise LocalError(f"snapshot lacks {exc.args[0]!r}") from None
        return ep
