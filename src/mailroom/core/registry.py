"""One registry of protocols and one way back from a snapshot to an endpoint.

``PROTOCOLS`` maps the names the CLI, the simulator, the sweep and the runtime use
(``mailroom simulate --protocol skeen``) to the endpoint factory, the workload
mode it runs ("unicast" or "broadcast") and the trace properties it promises.
The protocols register themselves when ``mailroom.protocols`` is imported (core
imports no protocol). ``restore_endpoint`` rebuilds any endpoint or ``Stack``
from its ``snapshot()`` data, using the classes registered by protocol name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from mailroom.core.endpoint import ENDPOINT_TYPES, Endpoint, Snapshot
from mailroom.core.errors import LocalError
from mailroom.core.stack import Stack

Factory = Callable[[int, int], Endpoint]

#: name -> (factory, workload mode, properties the protocol promises)
PROTOCOLS: dict[str, tuple[Factory, str, tuple[str, ...]]] = {}

MODES = ("unicast", "broadcast")


@attrs.frozen
class ProtocolEntry:
    """A registered protocol, as ``entry(name)`` returns it."""

    name: str
    factory: Factory
    mode: str
    promises: tuple[str, ...]


def register_protocol(name: str, factory: Factory, mode: str, promises: tuple[str, ...]) -> None:
    """Add (or replace) protocol ``name``; LocalError for a mode no host can drive."""
    if mode not in MODES:
        raise LocalError(f"mode must be one of {MODES}, got {mode!r}")
    PROTOCOLS[name] = (factory, mode, tuple(promises))


def entry(name: str) -> ProtocolEntry:
    """The registered protocol ``name``, or LocalError naming the known ones."""
    if name not in PROTOCOLS:
        raise LocalError(f"unknown protocol {name!r}; choose from {', '.join(sorted(PROTOCOLS))}")
    factory, mode, promises = PROTOCOLS[name]
    return ProtocolEntry(name, factory, mode, promises)


def restore_endpoint(data: Snapshot) -> Any:
    """Rebuild an endpoint or a Stack from its ``snapshot()`` data (LocalError if it
    does not fit)."""
    name = data.get("protocol") if isinstance(data, dict) else None
    if name == Stack.protocol:
        return Stack.restore(data)
    kind = ENDPOINT_TYPES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise LocalError(f"snapshot names unknown protocol {name!r}")
    return kind.restore(data)


__all__ = [
    "MODES",
    "PROTOCOLS",
    "Factory",
    "ProtocolEntry",
    "entry",
    "register_protocol",
    "restore_endpoint",
]
