"""Moved to ``mailroom.replicated.crdt.mvregister``; kept so old imports work."""

from mailroom.replicated.crdt.mvregister import MVRegister

__all__ = ["MVRegister"]
