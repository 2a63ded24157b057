"""Checks on packets from the network: each raises RemoteError naming the problem."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mailroom.core.errors import LocalError, RemoteError
from mailroom.core.messages import check_payload
from mailroom.core.wire import is_packet

#: Counters above this are absurd for any real run and are refused as corrupt.
MAX_COUNTER = 2**53
#: The most messages one batch packet carries (a longer batch travels as several).
BATCH_LIMIT = 4096
_INT = {int}
#: Payload types that are plain data whatever their value (not float: it may be infinite).
_SCALARS = frozenset((int, str, bool, type(None)))


def expect_type(packet: object, cls: type, protocol: str) -> None:
    if type(packet) is not cls:
        raise RemoteError(f"{protocol} expected a {cls.__name__}, got {type(packet).__name__}")


def counter(value: object, what: str) -> int:
    if type(value) is not int:
        raise RemoteError(f"{what} must be an integer, got {type(value).__name__}")
    if value < 0:
        raise RemoteError(f"{what} is negative ({value})")
    if value > MAX_COUNTER:
        raise RemoteError(f"{what} is absurdly large ({value})")
    return value


def positive(value: object, what: str) -> int:
    if counter(value, what) == 0:
        raise RemoteError(f"{what} must be at least 1")
    return value  # type: ignore[return-value]


def pid(value: object, n: int, what: str = "sender") -> int:
    if type(value) is not int:
        raise RemoteError(f"{what} must be an integer pid, got {type(value).__name__}")
    if not 0 <= value < n:
        raise RemoteError(f"{what} {value} is not a process of this group (0..{n - 1})")
    return value


def vector(value: object, n: int, what: str) -> Sequence[int]:
    if not isinstance(value, tuple | list):
        raise RemoteError(f"{what} must be a sequence of {n} counters, got {type(value).__name__}")
    if len(value) != n:
        raise RemoteError(f"{what} has {len(value)} entries, expected {n}")
    if n and set(map(type, value)) == _INT and min(value) >= 0 and max(value) <= MAX_COUNTER:
        return value  # the common case, checked without a call per entry
    for k, v in enumerate(value):
        counter(v, f"{what}[{k}]")
    return value


def matrix(value: object, n: int, what: str) -> Sequence[Sequence[int]]:
    if not isinstance(value, tuple | list):
        raise RemoteError(f"{what} must be a {n} x {n} matrix, got {type(value).__name__}")
    if len(value) != n:
        raise RemoteError(f"{what} has {len(value)} rows, expected {n}")
    for k, row in enumerate(value):
        vector(row, n, f"{what}[{k}]")
    return value


def dest(value: object, me: int, n: int) -> int:
    """The packet's destination must be this process."""
    pid(value, n, "dest")
    if value != me:
        raise RemoteError(f"packet for P{value} arrived at P{me}")
    return me


def batch_payloads(value: object) -> tuple[Any, ...]:
    """A batch packet's payloads: 1..BATCH_LIMIT of JSON data (packets travel one by one)."""
    if type(value) is not tuple:
        raise RemoteError(f"batch payloads must be a sequence, got {type(value).__name__}")
    if not 1 <= len(value) <= BATCH_LIMIT:
        raise RemoteError(f"a batch carries 1..{BATCH_LIMIT} messages, this one {len(value)}")
    if _SCALARS.issuperset(map(type, value)):
        return value  # text, numbers, None: plain data whatever their value
    for k, payload in enumerate(value):
        if is_packet(payload):
            raise RemoteError(f"batch payload {k} is a {type(payload).__name__} packet")
        try:
            check_payload(payload)
        except LocalError as exc:
            raise RemoteError(f"batch payload {k}: {exc}") from None
    return value


def first_of_range(value: object, size: int, what: str) -> int:
    """The first of ``size`` consecutive counters (a batch's numbers), all in range."""
    first = positive(value, what)
    if first + size - 1 > MAX_COUNTER:
        raise RemoteError(f"{what} range {first}..{first + size - 1} overflows")
    return first
