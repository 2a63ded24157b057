"""Constants the runtime and the ``mailroom status`` text share, in a module that
imports nothing (``mailroom status`` reads them without loading the runtime)."""

from __future__ import annotations

#: A CLAIM's destination that means "whoever listens at this address" (a seed).
ANY = 0xFFFF

#: The counters of refused frames and connections (``NetStats``), by reason.
REJECTED = (
    "garbage",
    "bad_mac",
    "replayed",
    "unknown_peer",
    "refused",
    "timeouts",
    "evicted",
    "mislabeled",
)

__all__ = ["ANY", "REJECTED"]
