"""Errors raised at the endpoint boundary.

``LocalError``: the caller misused the endpoint (unknown destination, payload
that cannot be encoded, a snapshot that does not fit). ``RemoteError``: a packet
from a peer is malformed or impossible. Both carry a ``hint`` saying what to do.
An endpoint that raises either has not changed its state. ``BackpressureError``: a
right call that cannot be taken now (``mailroom.net.Busy``); wait and try again.

Every error mailroom raises on purpose derives from ``MailroomError``; one that also
derives from a builtin (``ValueError``, ``RuntimeError``) keeps it, for callers that
catch that.
"""

from __future__ import annotations

DROP_HINT = "drop the packet; the endpoint is unchanged"


class MailroomError(Exception):
    """Base class of every error mailroom raises on purpose."""

    def __init__(self, message: str, *, hint: str = "") -> None:
        super().__init__(message)
        self.hint = hint


class LocalError(MailroomError):
    """The caller asked for something the endpoint cannot do."""


class BackpressureError(MailroomError):
    """The endpoint or node cannot take this now, though the call was right: wait (the
    raiser says for what) and try again. Not misuse: nothing needs fixing."""


class RemoteError(MailroomError):
    """A packet from the network is malformed or impossible; drop it and carry on."""

    def __init__(
        self, message: str, *, hint: str = "drop the packet; the endpoint is unchanged"
    ) -> None:
        super().__init__(message, hint=hint)
