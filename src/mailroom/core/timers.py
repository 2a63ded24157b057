"""The host's clock as an endpoint with timers sees it (``Reliable``, the heartbeat detector).

An endpoint reads no clock: the host passes ``now`` to ``tick``. ``HostClock`` keeps
the last ``now`` and keeps deadlines relative to it. If the host's clock is behind it
(a restore on another machine, a clock reset), every kept time moves back with it
(``_take_time`` says how far; the endpoint moves its own), so nothing stalls; a clock
ahead counts as time that passed. A restored endpoint asks for a tick at once (its
``_rebase`` flag), whatever the host's clock.
"""

from __future__ import annotations

import math
from typing import Any

from mailroom.core.errors import LocalError
from mailroom.core.persist import Field, snap_time

#: Host times above this are refused (beyond it, adding a timeout may not move a deadline).
MAX_TIME = 2.0**40


class HostClock:
    """Mixin: ``now``, the host's time at the last tick, and the re-basing after a restore."""

    now: float
    #: True after restore until the first tick: the host's clock may be another one
    _rebase: bool

    def _take_time(self, now: float) -> float:
        """Take the host's ``now`` (LocalError unless a time in 0..MAX_TIME) as the
        current time, and say how far back every kept time must move: ``now`` minus the
        last time if the clock went back, else 0 (the endpoint moves its own times)."""
        if type(now) not in (int, float) or not math.isfinite(now) or not 0 <= now <= MAX_TIME:
            raise LocalError(f"now must be a finite time in 0..{MAX_TIME:g}, got {now!r}")
        now = float(now)
        back = min(now - self.now, 0.0)
        self._rebase = False
        self.now = now
        return back


def _dump_now(endpoint: Any) -> float:
    return float(endpoint.now)


def _load_now(endpoint: Any, data: object) -> None:
    now = snap_time(data, "now")
    if now > MAX_TIME:
        raise LocalError(f"snapshot field now is beyond {MAX_TIME:g}")
    endpoint.now = now
    endpoint._rebase = True  # the next tick re-bases kept times on the host's clock


#: The persistent field of a ``HostClock``: the last ``now``; restored, the endpoint
#: asks for a tick at once and re-bases on the host's clock there.
NOW = Field.custom("now", _dump_now, _load_now)

__all__ = ["MAX_TIME", "NOW", "HostClock"]
