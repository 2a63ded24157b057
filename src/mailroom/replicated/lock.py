"""A replicated lock manager whose holders are released when they leave the group.

A lock is held by a member incarnation (and, within it, an optional ``client``
name): ``[pid, incarnation, client]``. ``acquire`` grants a free lock (or one the
caller already holds) and returns True, else False; ``release`` frees a lock the
caller holds. No timer: when a view no longer holds the holder (it crashed and was
suspected, was excluded, or left) or a later incarnation of its pid has spoken,
every replica releases its locks at that same point of the order (``on_view``).
So at any point of the order a lock has at most one holder, and that holder is a
current member. PySyncObj's ReplLockManager instead frees a lock whose holder has not
renewed it for ``autoUnlockTime`` (75 s by default), and can grant it meanwhile to
another node while a slow holder still believes it holds it.
"""

from __future__ import annotations

from typing import Any

from mailroom.replicated.methods import Caller, replicated
from mailroom.replicated.replica import Members


def _name(name: Any, what: str = "a lock name") -> str:
    if type(name) is not str:
        raise TypeError(f"{what} is a str, not {type(name).__name__}")
    return name


class ReplLockManager:
    """Named locks, each held by at most one (member incarnation, client)."""

    def __init__(self) -> None:
        #: lock name -> [pid, incarnation, client]
        self.locks: dict[str, list[Any]] = {}

    @replicated(checks_first=True, caller=True)
    def acquire(self, name: str, client: str = "", *, caller: Caller) -> bool:
        """Take lock ``name`` for the calling member's ``client``; True if it holds it now."""
        holder = [caller.pid, caller.incarnation, _name(client, "a client name")]
        held = self.locks.get(_name(name))
        if held is None:
            self.locks[name] = holder
            return True
        return held == holder

    @replicated(checks_first=True, caller=True)
    def release(self, name: str, client: str = "", *, caller: Caller) -> bool:
        """Free lock ``name`` if the caller's ``client`` holds it; True if it did."""
        holder = [caller.pid, caller.incarnation, _name(client, "a client name")]
        if self.locks.get(_name(name)) != holder:
            return False
        del self.locks[name]
        return True

    def on_view(self, members: Members) -> None:
        """Release every lock whose holder is no longer a current member."""
        for name in [n for n, (pid, inc, _) in self.locks.items() if not members.current(pid, inc)]:
            del self.locks[name]

    def holder(self, name: str) -> list[Any] | None:
        """``[pid, incarnation, client]`` holding lock ``name``, or None."""
        held = self.locks.get(name)
        return None if held is None else list(held)

    def held(self) -> dict[str, list[Any]]:
        return {n: list(h) for n, h in self.locks.items()}

    def is_held(self, name: str) -> bool:
        return name in self.locks


__all__ = ["ReplLockManager"]
