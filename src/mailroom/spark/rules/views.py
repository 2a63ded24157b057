"""The group membership properties on Spark, as the reference defines them.

They read the persisted table's view rows: a window by run gives each view id its
successor, a window by process each process's next view (``Tables.succ``,
``Tables.successions``); deliveries carry their segment (``_sv``, ``_sn``).
"""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rows import renamed, union_all, violation_rows
from mailroom.spark.tables import Tables, by_process

#: A view's members as the reference words them: "[0, 1, 2]".
_MEMBERS = "concat('[', array_join(array_sort(array_distinct(dest)), ', '), ']')"
#: Where an event happened, as the reference words it, from a view id column.
IN_VIEW = "CASE WHEN {0} IS NULL THEN 'outside any view' ELSE concat('in view ', {0}) END"


def view_agreement(t: Tables) -> Any:
    """(p, q, k), p < q: both installed view k (first time each) with different members;
    (p, k1, k2): p installed k2 right after k1, and k2 <= k1."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    first = Window.partitionBy("run", "process", "view").orderBy("seq")
    installs = t.views.withColumn("_k", F.row_number().over(first)).where("_k = 1")
    installs = installs.withColumn("_m", F.expr(_MEMBERS))
    a = renamed(installs, ["run", "view"], {"p": "process", "ps": "seq", "pm": "_m"})
    b = renamed(installs, ["run", "view"], {"q": "process", "qs": "seq", "qm": "_m"})
    differ = violation_rows(
        a.join(b, ["run", "view"]).where("p < q AND pm != qm"),
        "view_agreement",
        "array(p, q)",
        [("0", "view")],
        "array(ps, qs)",
        "format_string('P%d installed view %d as %s and P%d as %s', p, view, pm, q, qm)",
    )
    previous = F.lag(F.struct("view", "seq")).over(by_process()).alias("_prev")
    back = t.views.select("run", "process", "seq", "view", previous).where("_prev.view >= view")
    going_back = violation_rows(
        back,
        "view_agreement",
        "array(process)",
        [("0", "_prev.view"), ("0", "view")],
        "array(_prev.seq, seq)",
        "format_string('P%d installed view %d after view %d', process, view, _prev.view)",
    )
    return union_all([differ, going_back])


def self_inclusion(t: Tables) -> Any:
    """(p, k): p installed view k without being one of its members."""
    return violation_rows(
        t.views.where("NOT array_contains(dest, process)"),
        "self_inclusion",
        "array(process)",
        [("0", "view")],
        "array(seq)",
        "format_string('P%d installed view %d [%s], which does not include it', "
        "process, view, array_join(dest, ', '))",
    )


def same_view(t: Tables) -> Any:
    """(q, m): q delivered m in another view than the one m was sent in (field ``view``)."""
    return violation_rows(
        t.deliveries.where("NOT _unsent AND NOT (view <=> sview)"),
        "same_view",
        "array(process)",
        [("mo", "ms")],
        "array(seq)",
        f"format_string('P%d delivered %s %s, but it was sent %s', process, "
        f"{m('mo', 'ms')}, {IN_VIEW.format('view')}, {IN_VIEW.format('sview')})",
    )


def virtual_synchrony(t: Tables) -> Any:
    """(p, q, m), p < q: both installed V and then V', one delivered m between, the other
    not (m sent to both)."""
    from pyspark.sql import functions as F

    # what each process delivered between installing V and V' (first delivery each)
    got = (
        t.deliveries.where("_sv IS NOT NULL AND _sn IS NOT NULL")
        .groupBy("run", "process", "_sv", "_sn", "mo", "ms")
        .agg(
            F.min("seq").alias("dseq"),
            F.first("sdest").alias("sdest"),
            F.first("_unsent").alias("_unsent"),
        )
    )
    segment = ["run", "_sv", "_sn"]
    others = renamed(t.successions, ["run"], {"_sv": "v", "_sn": "nxt", "q": "process"})
    missed = (
        got.join(others.distinct(), segment)
        .where(
            "q != process AND (_unsent OR (array_contains(sdest, process) "
            "AND array_contains(sdest, q)))"
        )
        .join(
            renamed(got, [*segment, "mo", "ms"], {"q": "process"}),
            [*segment, "q", "mo", "ms"],
            "left_anti",
        )
    )
    return violation_rows(
        missed,
        "virtual_synchrony",
        "array(least(process, q), greatest(process, q))",
        [("mo", "ms")],
        "array(dseq)",
        f"format_string('P%d delivered %s in view %d and P%d did not; both installed "
        f"view %d next', process, {m('mo', 'ms')}, _sv, q, _sn)",
    )
