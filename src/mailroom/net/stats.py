"""The runtime's counters (``NetStats``) and its rate-limited logger (``QuietLog``)."""

from __future__ import annotations

import logging
import time

import attrs

from mailroom.net.names import REJECTED

log = logging.getLogger("mailroom.net")

#: Rejected connections logged per window; the rest are counted and summed up.
LOG_BURST = 10
LOG_WINDOW = 10.0


class QuietLog:
    """A rate-limited logger: ``LOG_BURST`` messages per ``LOG_WINDOW``, then a count."""

    def __init__(self) -> None:
        self.start = -LOG_WINDOW
        self.count = 0
        self.suppressed = 0

    def __call__(self, level: int, msg: str, *args: object) -> None:
        now = time.monotonic()
        if now - self.start >= LOG_WINDOW:
            if self.suppressed:
                log.warning("%d more such messages were not logged", self.suppressed)
            self.start, self.count, self.suppressed = now, 0, 0
        if self.count < LOG_BURST:
            self.count += 1
            log.log(level, msg, *args)
        else:
            self.suppressed += 1


@attrs.define
class NetStats:
    """Counters of one process's runtime (``frames_in`` / ``frames_out`` count packets,
    whether they travelled alone in a DATA frame or with others in a BATCH frame).

    ``mislabeled`` counts authentic packets refused because they carry another
    message than their frame header names (the frame's other packets and the link
    stay); ``accepted``
    connections accepted, ``authenticated`` those that proved the group key,
    ``connected`` connections this process opened that completed the handshake;
    ``behind`` handshakes in which a peer had seen more of this process's message ids
    than it has sent (``restart``). ``data_frames_in`` and ``data_frames_out`` count
    the DATA and BATCH frames themselves, ``steps`` the endpoint's steps; ``unsent``
    counts broadcasts an endpoint refused as a batch after the calls had returned (an
    endpoint whose ``broadcast_many`` refuses what its ``broadcast`` accepts; never one
    of the library's); ``superseded`` control packets not written because a later one
    to the same peer made them useless (``latest_key``)."""

    frames_in: int = 0
    frames_out: int = 0
    sent: int = 0
    delivered: int = 0
    garbage: int = 0
    bad_mac: int = 0
    replayed: int = 0
    unknown_peer: int = 0
    refused: int = 0
    timeouts: int = 0
    remote_errors: int = 0
    outbox_dropped: int = 0
    accepted: int = 0
    authenticated: int = 0
    connected: int = 0
    closed: int = 0
    evicted: int = 0
    io_errors: int = 0
    mislabeled: int = 0
    behind: int = 0
    data_frames_in: int = 0
    data_frames_out: int = 0
    steps: int = 0
    unsent: int = 0
    superseded: int = 0
    #: exceptions an application callback raised while the node handed it a step
    app_errors: int = 0

    def to_dict(self) -> dict[str, int]:
        return attrs.asdict(self)

    def add(self, name: str, count: int = 1) -> None:
        """Add ``count`` to the counter called ``name`` (a ``FrameError``'s reason)."""
        setattr(self, name, getattr(self, name) + count)

    @property
    def rejected(self) -> int:
        """Frames or connections refused for security or garbage."""
        return sum(getattr(self, reason) for reason in REJECTED)


__all__ = ["LOG_BURST", "LOG_WINDOW", "REJECTED", "NetStats", "QuietLog"]
