"""Moved to ``mailroom.replicated.crdt.awset``; kept so old imports work."""

from mailroom.replicated.crdt.awset import AWSet

__all__ = ["AWSet"]
