"""Property ``clock`` on Spark: the rows whose vector clock the by-process shuffle found
wrong (``mailroom.spark.tables``: its previous clock, merged with its send's on a
delivery, its own entry one more)."""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rows import violation_rows
from mailroom.spark.tables import Tables


def clock(t: Tables) -> Any:
    """(p, m): the event whose clock is wrong, with the one expected."""
    return violation_rows(
        t.table.where("_cbad"),
        "clock",
        "array(process)",
        [("mo", "ms")],
        "array(seq)",
        "format_string('P%d event %d (%s %s): clock %s, expected %s', process, seq, kind, "
        f"{m('mo', 'ms')}, _cvc, _cexp)",
    )
