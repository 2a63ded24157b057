"""Moved to ``mailroom.replicated.crdt.replica``; kept so old imports work."""

from mailroom.replicated.crdt.replica import Replica

__all__ = ["Replica"]
