"""The deterministic simulator: network model, fault injection, trace recorder, metrics."""

from mailroom.core.registry import restore_endpoint
from mailroom.sim.faults import Partition
from mailroom.sim.metrics import Metrics, metadata_size, varint_size
from mailroom.sim.simulation import InFlight, NetworkModel, Simulation, view_of
from mailroom.sim.workload import random_workload

__all__ = [
    "InFlight",
    "Metrics",
    "NetworkModel",
    "Partition",
    "Simulation",
    "metadata_size",
    "random_workload",
    "restore_endpoint",
    "varint_size",
    "view_of",
]
