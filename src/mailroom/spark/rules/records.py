"""The events a trace records wrongly, on Spark (``mailroom.trace.records``): deliveries of
messages never sent, and sends and deliveries whose ``view`` is not the view their
process installed last before them. Rows of ``INVALID_COLUMNS``, source "trace"."""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rules.witness import IN_VIEW
from mailroom.spark.tables import Tables
from mailroom.trace.records import UNSENT

_UNSENT = "kind = 'deliver' AND _unsent"
_MISRECORDED = "kind IN ('send', 'deliver') AND view IS NOT NULL AND NOT (view <=> _sv)"
#: Why each row is invalid, as the reference words it: one reason per fault, so an
#: event with both faults gives two rows (as in the reference), from one scan.
_REASONS = (
    f"filter(array(CASE WHEN {_UNSENT} THEN format_string("
    f"'delivery of %s, which was never sent', {m('mo', 'ms')}) END, "
    f"CASE WHEN {_MISRECORDED} THEN format_string("
    "'%s of %s recorded in view %d, but P%d was %s by its installations', "
    f"CASE WHEN kind = 'send' THEN 'send' ELSE 'delivery' END, {m('mo', 'ms')}, view, "
    f"process, {IN_VIEW.format('_sv')}) END), x -> x IS NOT NULL)"
)


def invalid_events(t: Tables) -> Any:
    """The invalid rows of the events themselves (not of the files they were read from)."""
    from pyspark.sql import functions as F

    return t.table.where(f"({_UNSENT}) OR ({_MISRECORDED})").select(
        F.lit(UNSENT).alias("source"),
        F.lit(None).cast("long").alias("line"),
        "run",
        "process",
        "seq",
        F.explode(F.expr(_REASONS)).alias("reason"),
    )
