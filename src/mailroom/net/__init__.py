"""mailroom.net: run any endpoint (or Stack) over real TCP sockets, authenticated.

``Node(endpoint, peers, key, **options)`` hosts one process's endpoint (the options
are the fields of ``NodeConfig``); ``PeerTable`` is the
``pid -> host:port`` table (``peers.toml``); ``load_key`` reads the group key
from a file or ``$MAILROOM_KEY`` (``generate_key`` writes a new one);
``group_endpoint`` makes a member (or joiner) of a process group with views, for
a node to host; ``tune_collector`` sizes the garbage collector's young generation
for a process that runs nodes. ``python -m mailroom.net`` runs one process of a group with a
scripted workload. See ``docs/runtime.md``.

The names are imported on first use (PEP 562): ``mailroom status`` reads
``mailroom.net.status_text`` without loading the runtime.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mailroom._exports import lazy_exports

if TYPE_CHECKING:
    from mailroom.net.collector import tune_collector
    from mailroom.net.config import KEY_ENV, PeerTable, generate_key, load_key
    from mailroom.net.frames import FrameError
    from mailroom.net.membership import group_endpoint
    from mailroom.net.node import NetStats, Node
    from mailroom.net.settings import NodeConfig

#: Where each public name lives (imported on first use).
_HOMES = {
    "KEY_ENV": "mailroom.net.config",
    "FrameError": "mailroom.net.frames",
    "NetStats": "mailroom.net.node",
    "Node": "mailroom.net.node",
    "NodeConfig": "mailroom.net.settings",
    "PeerTable": "mailroom.net.config",
    "generate_key": "mailroom.net.config",
    "group_endpoint": "mailroom.net.membership",
    "load_key": "mailroom.net.config",
    "tune_collector": "mailroom.net.collector",
}


if not TYPE_CHECKING:  # (type checkers see the imports above, and no other name)
    __getattr__, __dir__ = lazy_exports(__name__, _HOMES, globals())


__all__ = [
    "KEY_ENV",
    "FrameError",
    "NetStats",
    "Node",
    "NodeConfig",
    "PeerTable",
    "generate_key",
    "group_endpoint",
    "load_key",
    "tune_collector",
]
