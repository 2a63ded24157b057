"""Operation-based CRDTs on tagged causal stable broadcast (Baquero, Almeida, Shoker 2014).

The causal flavour of replicated state: every replica applies its own operations at
once and stays available when cut off from the others (a partition, a minority);
replicas that delivered the same operations hold the same value, whatever the order.
The middleware delivers each operation once, in causal order, with a vector clock tag
that characterizes happens-before precisely, and later reports it causally stable. So
the data types carry no timestamps of their own: they keep a partially ordered log of
the operations that still matter, keyed by the delivered tags, and prune it when
operations become stable.

- ``AWSet``: add-wins set (an add wins over a concurrent remove);
- ``MVRegister``: multi-value register (concurrent writes are all kept);
- ``MVMap``: a map of multi-value registers with an observed remove;
- ``Counter``: adds and subtracts;
- ``CausalReplica`` (also ``Replica``, as the examples named it): one process, an
  endpoint and a data type wired together.
"""

from mailroom.replicated.crdt.awset import AWSet
from mailroom.replicated.crdt.counter import Counter
from mailroom.replicated.crdt.mvmap import MVMap
from mailroom.replicated.crdt.mvregister import MVRegister
from mailroom.replicated.crdt.replica import CausalReplica, DataType, Replica

__all__ = ["AWSet", "CausalReplica", "Counter", "DataType", "MVMap", "MVRegister", "Replica"]
