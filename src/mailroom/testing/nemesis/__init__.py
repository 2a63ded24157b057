"""A nemesis for real process groups: partitions, pauses, kills, clock jumps, slow links.

Members run as processes (``python -m mailroom.net``, or another system's
program), each in its own network namespace on a bridge; faults are nftables
rules, signals, libfaketime offsets and a TCP proxy; the clients' histories are
judged at the end by ``mailroom check`` and a history check. See docs/faults.md.
Needs root, ``ip netns`` and ``nft`` (``missing_support()`` says what is lacking).
"""

from mailroom.testing.nemesis.cluster import Cluster, System
from mailroom.testing.nemesis.faults import (
    KINDS,
    Fault,
    ScheduleError,
    parse_schedule,
    random_schedule,
)
from mailroom.testing.nemesis.group import MailroomGroup
from mailroom.testing.nemesis.network import Cut, Network, missing_support
from mailroom.testing.nemesis.replicated import ReplicatedGroup
from mailroom.testing.nemesis.runner import FaultResult, RunResult, Timing, run_schedule
from mailroom.testing.nemesis.verdict import Verdict

__all__ = [
    "KINDS",
    "Cluster",
    "Cut",
    "Fault",
    "FaultResult",
    "MailroomGroup",
    "Network",
    "ReplicatedGroup",
    "RunResult",
    "ScheduleError",
    "System",
    "Timing",
    "Verdict",
    "missing_support",
    "parse_schedule",
    "random_schedule",
    "run_schedule",
]
