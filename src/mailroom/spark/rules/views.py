"""The group membership properties on Spark, as the reference defines them.

They read the persisted table's view rows: a window by run gives each view id its
successor, a window by process each process's next view (``Tables.succ``,
``Tables.successions``); deliveries carry their segment (``_sv``, ``_sn``).
"""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import renamed, union_all
from mailroom.spark.rules.witness import witnessed
from mailroom.spark.tables import Tables, by_process

#: A view's members as the reference words them: "[0, 1, 2]".
_MEMBERS = "concat('[', array_join(array_sort(array_distinct(dest)), ', '), ']')"


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
    differ = a.join(b, ["run", "view"]).where("p < q AND pm != qm")
    previous = F.lag(F.struct("view", "seq")).over(by_process()).alias("_prev")
    back = t.views.select("run", "process", "seq", "view", previous).where("_prev.view >= view")
    return union_all(
        [
            witnessed(differ, "view_agreement"),
            witnessed(back, "view_agreement", "going_back"),
        ]
    )


def self_inclusion(t: Tables) -> Any:
    """(p, k): p installed view k without being one of its members."""
    return witnessed(t.views.where("NOT array_contains(dest, process)"), "self_inclusion")


def same_view(t: Tables) -> Any:
    """(q, m): q delivered m in another view than the one m was sent in (field ``view``)."""
    return witnessed(t.deliveries.where("NOT _unsent AND NOT (view <=> sview)"), "same_view")


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
    return witnessed(missed, "virtual_synchrony")
