"""The events a trace records wrongly, on Spark (``mailroom.trace.records``): deliveries of
messages never sent, and sends and deliveries whose ``view`` is not the view their
process installed last before them. Rows of ``INVALID_COLUMNS``, source "trace"."""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rows import union_all
from mailroom.spark.rules.views import IN_VIEW
from mailroom.spark.tables import Tables
from mailroom.trace.records import UNSENT

#: (which rows, why), each as the reference words it.
_KINDS = (
    (
        "kind = 'deliver' AND _unsent",
        f"format_string('delivery of %s, which was never sent', {m('mo', 'ms')})",
    ),
    (
        "kind IN ('send', 'deliver') AND view IS NOT NULL AND NOT (view <=> _sv)",
        "format_string('%s of %s recorded in view %d, but P%d was %s by its installations', "
        f"CASE WHEN kind = 'send' THEN 'send' ELSE 'delivery' END, {m('mo', 'ms')}, view, "
        f"process, {IN_VIEW.format('_sv')})",
    ),
)


def invalid_events(t: Tables) -> Any:
    """The invalid rows of the events themselves (not of the files they were read from)."""
    from pyspark.sql import functions as F

    return union_all(
        [
            t.table.where(rows).select(
                F.lit(UNSENT).alias("source"),
                F.lit(None).cast("long").alias("line"),
                "run",
                "process",
                "seq",
                F.expr(reason).alias("reason"),
            )
            for rows, reason in _KINDS
        ]
    )
