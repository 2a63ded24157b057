"""Property ``clock`` on Spark: the rows whose vector clock the by-process shuffle found
wrong (``mailroom.spark.tables``: its previous clock, merged with its send's on a
delivery, its own entry one more)."""

from __future__ import annotations

from typing import Any

from mailroom.spark.rules.witness import witnessed
from mailroom.spark.tables import Tables


def clock(t: Tables) -> Any:
    """(p, m): the event whose clock is wrong, with the one expected."""
    return witnessed(t.table.where("_cbad"), "clock")
