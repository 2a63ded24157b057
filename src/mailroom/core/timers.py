"""The host's clock as an endpoint with timers sees it (``Reliable``, the heartbeat detector).

An endpoint reads no clock: the host passes ``now`` to ``tick``. A ``HostTime``, a part
the endpoint owns as ``time``, keeps the last ``now``; the endpoint keeps its deadlines
relative to it. If the host's clock is behind it (a restore on another machine, a clock
reset), every kept time moves back with it (``HostTime.take`` says how far; the endpoint
moves its own), so nothing stalls; a clock ahead counts as time that passed. A restored
endpoint asks for a tick at once (``HostTime.rebase``), whatever the host's clock.

Why a part and not a mixin: the endpoint's own state stays its own, and the compiled
build (docs/compiled.md) builds a class with one base.
"""

from __future__ import annotations

import math
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.core.persist import Field, snap_time

#: Host times above this are refused (beyond it, adding a timeout may not move a deadline).
MAX_TIME = 2.0**40


class HostTime:
    """``now``, the host's time at the endpoint's last tick, and ``rebase``: True after a
    restore until the first tick (the host's clock may be another one)."""

    __slots__ = ("now", "rebase")

    def __init__(self) -> None:
        self.now = 0.0
        self.rebase = False

    def take(self, now: float) -> float:
        """Take the host's ``now`` (LocalError unless a time in 0..MAX_TIME) as the
        current time, and say how far back every kept time must move: ``now`` minus the
        last time if the clock went back, else 0 (the endpoint moves its own times)."""
        if type(now) not in (int, float) or not math.isfinite(now) or not 0 <= now <= MAX_TIME:
            raise LocalError(f"now must be a finite time in 0..{MAX_TIME:g}, got {now!r}")
        now = float(now)
        back = min(now - self.now, 0.0)
        self.rebase = False
        self.now = now
        return back

    def restored(self, now: float) -> None:
        """Restored at ``now``: the next tick re-bases kept times on the host's clock."""
        self.now = now
        self.rebase = True


def _dump_now(endpoint: Any) -> float:
    return float(endpoint.time.now)


def _load_now(endpoint: Any, data: object) -> None:
    now = snap_time(data, "now")
    if now > MAX_TIME:
        raise LocalError(f"snapshot field now is beyond {MAX_TIME:g}")
    endpoint.time.restored(now)


#: The persistent field of an endpoint that owns a ``HostTime`` as ``time``: the last
#: ``now``; restored, the endpoint asks for a tick at once and re-bases there.
NOW = Field.custom("now", _dump_now, _load_now)

__all__ = ["MAX_TIME", "NOW", "HostTime"]
