"""The checkpoint log's entries: every input a node logs, as one typed table.

A node writes each input of a step (a packet received, a send, a tick, a host's call)
to its checkpoint log before it acts on it, and a restart replays them in order
(``mailroom.net.journal``). Each kind of input is one class here, which states once
its row (the JSON list the log holds; its first item names the kind, and the rows are
those 0.2.0 wrote), how a row is read back (``entry_of``, the one reader) and what
replaying it does to an endpoint (``replay``). Payloads are kept as ``plain`` data
(``mailroom.core.wire``), a packet as its base64 bytes.
"""

from __future__ import annotations

import base64
import math
from typing import Any, ClassVar

import attrs

from mailroom.core.actions import Action
from mailroom.core.codec import decode, encode
from mailroom.core.endpoint import broadcast_batch
from mailroom.core.errors import RemoteError
from mailroom.core.messages import MessageId
from mailroom.core.wire import plain, unplain


@attrs.frozen
class Received:
    """A packet received (its bytes as base64), with the kind its frame said
    (``said``: broadcast or unicast) when the endpoint does both."""

    KIND: ClassVar[str] = "r"
    packet: str
    said: int | None = None

    @classmethod
    def of(cls, packet: bytes | object, said: int | None = None) -> Received:
        """The entry of ``packet``: its encoded bytes, or a packet to encode."""
        data = packet if isinstance(packet, bytes) else encode(packet)
        return cls(base64.b64encode(data).decode(), said)

    def row(self) -> list[Any]:
        return (
            [self.KIND, self.packet] if self.said is None else [self.KIND, self.packet, self.said]
        )

    @classmethod
    def read(cls, row: list[Any]) -> Received:
        return cls(_text(row, 1), int(row[2]) if len(row) > 2 else None)

    def decoded(self) -> object:
        """The packet (RemoteError if its bytes do not decode)."""
        return decode(base64.b64decode(self.packet, validate=True))

    def replay(self, endpoint: Any) -> list[Action]:
        try:
            return list(endpoint.receive(self.decoded()))
        except RemoteError:
            return []  # refused then too: nothing changed


@attrs.frozen
class Broadcast:
    """One payload broadcast."""

    KIND: ClassVar[str] = "b"
    payload: Any

    @classmethod
    def of(cls, payload: Any) -> Broadcast:
        return cls(plain(payload))

    def row(self) -> list[Any]:
        return [self.KIND, self.payload]

    @classmethod
    def read(cls, row: list[Any]) -> Broadcast:
        return cls(row[1])

    def payloads(self) -> list[Any]:
        return [self.payload]

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.broadcast(unplain(self.payload)))


@attrs.frozen
class BroadcastMany:
    """Payloads broadcast as one batch (a ``broadcast_many`` call is logged per
    frame-sized part)."""

    KIND: ClassVar[str] = "m"
    batch: list[Any]

    @classmethod
    def of(cls, payloads: list[Any]) -> BroadcastMany:
        return cls([plain(p) for p in payloads])

    def row(self) -> list[Any]:
        return [self.KIND, self.batch]

    @classmethod
    def read(cls, row: list[Any]) -> BroadcastMany:
        if type(row[1]) is not list:
            raise ValueError(f"a batch of {type(row[1]).__name__}, not a list")
        return cls(row[1])

    def payloads(self) -> list[Any]:
        return self.batch

    def replay(self, endpoint: Any) -> list[Action]:
        return broadcast_batch(endpoint, [unplain(p) for p in self.batch])


@attrs.frozen
class Sent:
    """One payload sent to one process."""

    KIND: ClassVar[str] = "s"
    payload: Any
    to: int

    @classmethod
    def of(cls, payload: Any, to: int) -> Sent:
        return cls(plain(payload), to)

    def row(self) -> list[Any]:
        return [self.KIND, self.payload, self.to]

    @classmethod
    def read(cls, row: list[Any]) -> Sent:
        return cls(row[1], int(row[2]))

    def payloads(self) -> list[Any]:
        return [self.payload]

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.send(unplain(self.payload), to=self.to))


@attrs.frozen
class Tick:
    """The endpoint's timers at the host clock's ``now``."""

    KIND: ClassVar[str] = "t"
    now: float

    def row(self) -> list[Any]:
        return [self.KIND, self.now]

    @classmethod
    def read(cls, row: list[Any]) -> Tick:
        now = row[1]
        if not isinstance(now, (int, float)) or not math.isfinite(now):
            raise ValueError(f"tick at {now!r}")
        return cls(float(now))

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.tick(self.now))


@attrs.frozen
class Consumed:
    """The application took a delivery (an endpoint with explicit consumption)."""

    KIND: ClassVar[str] = "c"
    message: MessageId | None

    def row(self) -> list[Any]:
        mid = self.message
        return [self.KIND, None if mid is None else [mid.origin, mid.seq]]

    @classmethod
    def read(cls, row: list[Any]) -> Consumed:
        mid = row[1]
        return cls(None if mid is None else MessageId(int(mid[0]), int(mid[1])))

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.consume(self.message))


@attrs.frozen
class Provided:
    """A group endpoint was given the application's state for a joiner of ``view``."""

    KIND: ClassVar[str] = "p"
    view: int
    state: Any

    @classmethod
    def of(cls, view: int, state: Any) -> Provided:
        return cls(view, plain(state))

    def row(self) -> list[Any]:
        return [self.KIND, self.view, self.state]

    @classmethod
    def read(cls, row: list[Any]) -> Provided:
        return cls(int(row[1]), row[2])

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.provide_state(self.view, unplain(self.state)))


@attrs.frozen
class Joined:
    """A joiner asked to join, through ``contacts`` if discovery found them."""

    KIND: ClassVar[str] = "j"
    contacts: list[int] | None = None

    def row(self) -> list[Any]:
        return [self.KIND] if self.contacts is None else [self.KIND, self.contacts]

    @classmethod
    def read(cls, row: list[Any]) -> Joined:
        return cls(row[1] if len(row) > 1 else None)

    def replay(self, endpoint: Any) -> list[Action]:
        if self.contacts is None:
            return list(endpoint.join())
        return list(endpoint.join(self.contacts))


@attrs.frozen
class Suspected:
    """A failure detector outside the endpoint suspected member ``pid``."""

    KIND: ClassVar[str] = "x"
    pid: int

    def row(self) -> list[Any]:
        return [self.KIND, self.pid]

    @classmethod
    def read(cls, row: list[Any]) -> Suspected:
        return cls(int(row[1]))

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.suspect(self.pid))


@attrs.frozen
class Left:
    """The process left its group."""

    KIND: ClassVar[str] = "l"

    def row(self) -> list[Any]:
        return [self.KIND]

    @classmethod
    def read(cls, row: list[Any]) -> Left:
        return cls()

    def replay(self, endpoint: Any) -> list[Action]:
        return list(endpoint.leave())


#: Every kind of entry (what a row's first item names).
Entry = (
    Received
    | Broadcast
    | BroadcastMany
    | Sent
    | Tick
    | Consumed
    | Provided
    | Joined
    | Suspected
    | Left
)
#: The entries that are the application's sends.
SendEntry = Broadcast | BroadcastMany | Sent

KINDS: dict[str, type[Entry]] = {
    kind.KIND: kind
    for kind in (
        Received,
        Broadcast,
        BroadcastMany,
        Sent,
        Tick,
        Consumed,
        Provided,
        Joined,
        Suspected,
        Left,
    )
}


def entry_of(row: Any) -> Entry:
    """The entry a log row holds. ValueError naming what is wrong if it holds none
    (an unknown kind, a missing or malformed field)."""
    if type(row) is not list or not row or type(row[0]) is not str:
        raise ValueError(f"a log entry must be a list naming its kind, got {row!r:.60}")
    kind = KINDS.get(row[0])
    if kind is None:
        raise ValueError(f"unknown input {row[0]!r}")
    try:
        return kind.read(row)
    except (IndexError, TypeError, KeyError) as exc:
        raise ValueError(f"malformed {kind.__name__} entry {row!r:.60}: {exc}") from None


def _text(row: list[Any], index: int) -> str:
    value = row[index]
    if type(value) is not str:
        raise ValueError(f"{value!r:.40} is not text")
    return value


__all__ = [
    "KINDS",
    "Broadcast",
    "BroadcastMany",
    "Consumed",
    "Entry",
    "Joined",
    "Left",
    "Provided",
    "Received",
    "SendEntry",
    "Sent",
    "Suspected",
    "Tick",
    "entry_of",
]
