"""Operation-based CRDTs on tagged causal stable broadcast (Baquero, Almeida, Shoker 2014).

The middleware delivers each operation once, in causal order, with a vector
clock tag that characterizes happens-before precisely, and later reports it
causally stable. So the data types carry no timestamps of their own: they keep
a partially ordered log of the operations that still matter, keyed by the
delivered tags, and prune it when operations become stable.

- ``AWSet``: add-wins set (an add wins over a concurrent remove);
- ``MVRegister``: multi-value register (concurrent writes are all kept);
- ``Replica``: one process, an endpoint and a data type wired together.

Run the demo from the repository root: ``python -m examples.crdt``. The package
imports as ``examples.crdt`` or, with ``examples/`` on the path, as ``crdt``.
"""

from .awset import AWSet
from .mvregister import MVRegister
from .replica import Replica

__all__ = ["AWSet", "MVRegister", "Replica"]
