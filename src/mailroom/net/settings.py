"""A node's settings (``NodeConfig``) and the runtime's default bounds.

``Node(endpoint, peers, key, **options)`` takes the fields of ``NodeConfig`` as
keyword arguments (or ``config=NodeConfig(...)``); each is described here once.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from mailroom.core.actions import Excluded, ViewChange
from mailroom.core.errors import LocalError
from mailroom.core.messages import Message, MessageId, Payload
from mailroom.trace.header import TraceHeader

#: Seconds an accepted connection has to authenticate before it is closed.
HANDSHAKE_TIMEOUT = 10.0
#: Accepted connections allowed in their handshake at once; one more closes the oldest.
MAX_UNAUTHENTICATED = 64
#: Default bound on the packets the reliable layer keeps for unacknowledged sends.
MAX_RETAINED = 4096
#: Default bound on a node's broadcasts not yet delivered back to it (``can_send()``).
MAX_IN_FLIGHT = 2048
#: First pause before retrying a failed checkpoint or trace write (doubles up to 1 s).
IO_RETRY = 0.05
#: Default outbox bound per peer (frames waiting for a connection).
OUTBOX_LIMIT = 100_000
#: Default outbox bound per peer for group endpoints: a dead member costs no more.
GROUP_OUTBOX = 1024
#: Seconds after a lot of sends was taken during which the next lot waits for the rest
#: of that time (sends that come this fast are gathered; after a quiet spell none waits).
BUSY_GAP = 0.0005
#: Seconds a lazy packet (``Transmit.lazy``: acknowledgements, reports no delivery waits
#: on) may wait, so that a link sends its lazy packets at most once per this long.
LAZY_WAIT = 0.005
#: Seconds after which lazy packets that no write to their peer took go alone: a link
#: that carries no data (under a sequencer, between two members that are not it) then
#: writes a frame per this long, not one per ``LAZY_WAIT``.
LAZY_ALONE = 0.05


def _bound(_: object, attribute: attrs.Attribute[Any], value: object) -> None:
    """None or a positive int (else LocalError)."""
    if value is not None and (type(value) is not int or value < 1):
        raise LocalError(f"{attribute.name} must be a positive integer or None, got {value!r}")


def _delays(value: Mapping[int, float] | None) -> dict[int, float]:
    return dict(value or {})


def _seconds(_: object, attribute: attrs.Attribute[float], value: object) -> None:
    """A finite, non-negative number of seconds (else LocalError)."""
    number = value if isinstance(value, int | float) and type(value) is not bool else math.nan
    if not math.isfinite(number) or number < 0:
        raise LocalError(f"{attribute.name} must be a finite number of seconds >= 0, got {value!r}")


def _with_app_state(config: NodeConfig, value: object) -> None:
    if value is not None and config.app_state is None:
        raise LocalError("app_changes needs app_state too (the data whole, for each new base)")


@attrs.frozen(kw_only=True)
class NodeConfig:
    """Everything a ``Node`` is told besides its endpoint, peer table and key."""

    #: A file to resume from (if it exists) and to keep up to date.
    checkpoint: str | Path | None = None
    #: A JSON Lines file of this process's send/receive/deliver/view events.
    trace: str | Path | None = None
    #: The run name in the trace.
    run: str = "run"
    #: Called with each delivered message; otherwise read ``Node.deliveries()``.
    on_deliver: Callable[[Message], None] | None = None
    #: Returns JSON data to keep in the checkpoint (``Node.resumed_state`` after a restart).
    app_state: Callable[[], Any] | None = None
    #: With ``app_state``: returns the JSON records its data gained since ``app_state`` or
    #: this was last called, or None if it changed otherwise. A step's checkpoint record
    #: then keeps those, not the whole data (``Node.resumed_changes`` after a restart).
    app_changes: Callable[[], list[Any] | None] | None = attrs.field(
        default=None, validator=lambda config, _, value: _with_app_state(config, value)
    )
    #: Seconds to hold frames to a peer back (a slow link).
    delays: dict[int, float] = attrs.field(factory=dict, converter=_delays)
    #: A listening socket to use instead of binding the peer-table address.
    listen: socket.socket | None = None
    #: Frames kept per unconnected peer (None: ``GROUP_OUTBOX`` or ``OUTBOX_LIMIT``).
    outbox_limit: int | None = None
    #: Seal data frames with ChaCha20-Poly1305 (every member must agree).
    encrypt: bool = False
    #: ``fsync`` the trace and the checkpoint log at every step.
    sync: bool = False
    #: Sends raise ``Busy`` while the reliable layer keeps this many packets (None: no bound).
    max_retained: int | None = MAX_RETAINED
    #: ``can_send()`` is False once this many of the node's broadcasts are not delivered
    #: back to it, until half of them are (``flow``: a relay such as a sequencer queues no
    #: more than that for it); a send still goes (None: no bound).
    max_in_flight: int | None = attrs.field(default=MAX_IN_FLIGHT, validator=_bound)
    #: Accepted connections allowed in their handshake at once.
    max_unauthenticated: int = MAX_UNAUTHENTICATED
    #: Seconds a connection has to authenticate (None: ``HANDSHAKE_TIMEOUT``).
    handshake_timeout: float | None = None
    #: Called with the ids of each ``Stable`` report.
    on_stable: Callable[[tuple[MessageId, ...]], None] | None = None
    #: A group endpoint's view changes, at their place among the deliveries.
    on_view: Callable[[ViewChange], None] | None = None
    #: The application's state for a joiner, taken right after the view change.
    get_state: Callable[[int], Payload] | None = None
    #: Called when the group excluded this process.
    on_excluded: Callable[[Excluded], None] | None = None
    #: Contacts: a member restored from ``checkpoint`` joins again as its next incarnation.
    rejoin: Collection[int] | None = None
    #: The trace's header (None: what the hosted protocol promises, found in the registry).
    trace_header: TraceHeader | None = None
    #: Take the sends of one turn of the event loop as one step (``outgoing``).
    coalesce: bool = True
    #: Seconds a lot of sends waits for more before it is taken (0: the end of the turn).
    linger: float = attrs.field(default=0.0, validator=_seconds)
    #: A lot started within this many seconds of the last one taken waits for the rest
    #: of them (0: never; the end of the turn, or ``linger``, as set).
    busy_gap: float = attrs.field(default=BUSY_GAP, validator=_seconds)
    #: Lazy packets to a peer go at most once per this many seconds, the latest of each
    #: kind, with the next write once due (0: every packet at the end of the callback).
    lazy_wait: float = attrs.field(default=LAZY_WAIT, validator=_seconds)
    #: ... and go alone once this many seconds passed with no write to take them (at
    #: least ``lazy_wait``).
    lazy_alone: float = attrs.field(default=LAZY_ALONE, validator=_seconds)
    #: A growable group: "host:port" where the others reach this node (None: its peer-table
    #: entry, else the listening socket's name).
    address: str | None = None

    def handshake_seconds(self) -> float:
        """Seconds a connection has to complete its handshake."""
        return self.handshake_timeout if self.handshake_timeout else HANDSHAKE_TIMEOUT

    def outbox_for(self, member: bool) -> int:
        """Frames kept per unconnected peer (a group endpoint repairs losses itself)."""
        if self.outbox_limit is not None:
            return self.outbox_limit
        return GROUP_OUTBOX if member else OUTBOX_LIMIT


__all__ = [
    "BUSY_GAP",
    "GROUP_OUTBOX",
    "HANDSHAKE_TIMEOUT",
    "IO_RETRY",
    "MAX_IN_FLIGHT",
    "MAX_RETAINED",
    "MAX_UNAUTHENTICATED",
    "OUTBOX_LIMIT",
    "NodeConfig",
]
