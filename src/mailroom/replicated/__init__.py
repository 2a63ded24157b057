"""Replicated objects: any class's state kept the same on every member of a group.

Mark a class's mutating methods ``@replicated``; a ``Replica`` turns calls into
operations that a ``Group`` over a total-order protocol delivers to every member in
one order, applies them, and hands each caller its method's result (or the error it
raised: the state is then unchanged everywhere). Reads are local (this replica, at
once: sequentially consistent) or ordered (at their place in the order:
linearizable). The core is sans-IO; ``SimGroup`` hosts replicas in the simulator and
``AsyncReplica`` over ``mailroom.net``; ``serve(obj, address, others)`` is the one-call
form (by addresses, its event loop in a thread; ``replicate`` for asyncio).
Batteries: ``ReplCounter``, ``ReplDict``, ``ReplSet``, ``ReplList``, ``ReplQueue``,
``ReplPriorityQueue``, ``ReplLockManager``
(and ``Bundle`` for several in one group). ``mailroom.replicated.crdt`` holds the
causal flavour (CRDTs on tagged causal broadcast, available under partitions);
``mailroom.replicated.history`` checks histories. See docs/replicated.md.
"""

from mailroom.replicated.aiohost import AsyncReplica
from mailroom.replicated.batteries import (
    Bundle,
    ReplCounter,
    ReplDict,
    ReplList,
    ReplPriorityQueue,
    ReplQueue,
    ReplSet,
)
from mailroom.replicated.entry import ServedReplica, replicate, serve
from mailroom.replicated.history import History, HistoryFile, check_history
from mailroom.replicated.journal import COMPACT_BYTES
from mailroom.replicated.lock import ReplLockManager
from mailroom.replicated.methods import Caller, replicated
from mailroom.replicated.operations import MAX_OPERATION_BYTES
from mailroom.replicated.replica import Members, Outcome, OutcomeUnknown, Replica
from mailroom.replicated.simhost import SimCall, SimGroup

__all__ = [
    "COMPACT_BYTES",
    "MAX_OPERATION_BYTES",
    "AsyncReplica",
    "Bundle",
    "Caller",
    "History",
    "HistoryFile",
    "Members",
    "Outcome",
    "OutcomeUnknown",
    "ReplCounter",
    "ReplDict",
    "ReplList",
    "ReplLockManager",
    "ReplPriorityQueue",
    "ReplQueue",
    "ReplSet",
    "Replica",
    "ServedReplica",
    "SimCall",
    "SimGroup",
    "check_history",
    "replicate",
    "replicated",
    "serve",
]
