"""The garbage collector's young generation, sized for a process that runs nodes.

A node takes a frame as one step and hands the application every delivery of it at
once: three objects each (the ``Deliver``, its ``Message`` and its ``MessageId``),
thousands in a busy frame, all alive until the step ends. Under CPython's default
young-generation threshold (700 allocations) the collector runs many times within
one step, finds those objects alive, and promotes them into the older generations,
whose collections then walk them again; at n = 3 that was about a sixth of a busy
node's CPU. A larger young generation is collected a few times a second instead,
when most of what it held is gone (docs/runtime-operations.md, "The garbage collector").

It is a setting of the whole process, and a trade (fewer, longer young passes), so
nothing in mailroom changes it by itself: an application that runs nodes may call
``tune_collector()`` once at start-up, and ``python -m mailroom.net --gc-young N``
does it for the process it runs.
"""

from __future__ import annotations

import gc

from mailroom.core.errors import LocalError

#: The young-generation threshold ``tune_collector`` sets (CPython's default is 700).
YOUNG = 100_000


def tune_collector(young: int = YOUNG) -> tuple[int, int, int]:
    """Collect the young generation once ``young`` more objects are alive than at its
    last collection (the older generations' thresholds are kept); return the thresholds
    before the call, for ``gc.set_threshold(*before)`` to put them back."""
    if type(young) is not int or young < 1:
        raise LocalError(
            f"the young generation's threshold must be a positive integer, got {young!r}"
        )
    before = gc.get_threshold()
    gc.set_threshold(young, before[1], before[2])
    return before


__all__ = ["YOUNG", "tune_collector"]
