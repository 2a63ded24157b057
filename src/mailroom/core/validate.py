"""Checks on packets from the network: each raises RemoteError naming the problem."""

from __future__ import annotations

from collections.abc import Sequence

from mailroom.core.errors import RemoteError

#: Counters above this are absurd for any real run and are refused as corrupt.
MAX_COUNTER = 2**53
_INT = {int}


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
