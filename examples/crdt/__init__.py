"""Operation-based CRDTs on tagged causal stable broadcast: the demo.

The data types and the replica now live in the library, ``mailroom.replicated.crdt``
(with a counter and a multi-value map besides); this package re-exports them, so
``from crdt import AWSet, MVRegister, Replica`` keeps working.

Run the demo from the repository root: ``python -m examples.crdt``. The package
imports as ``examples.crdt`` or, with ``examples/`` on the path, as ``crdt``.
"""

from mailroom.replicated.crdt import AWSet, Counter, MVMap, MVRegister, Replica

__all__ = ["AWSet", "Counter", "MVMap", "MVRegister", "Replica"]
