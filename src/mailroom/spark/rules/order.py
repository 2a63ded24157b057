"""The ordering properties on Spark: integrity, FIFO, causal, total order, liveness.

``mode="full"`` reports every pair, as the reference does (pairwise joins: fine for
simulator-sized runs). ``mode="summary"`` scales: one row per violating later
delivery (fifo, causal) or per violating (p, q, m2) (total), each with one witness
pair that is in the full set. Causal summary uses the clock trick (send(m1) -> e
iff sc(m1)[origin] <= vc(e)[origin]), so it assumes the clocks passed validation.
"""

from __future__ import annotations

from typing import Any

from mailroom.spark.rows import message_name as m
from mailroom.spark.rows import renamed
from mailroom.spark.rules.witness import witnessed
from mailroom.spark.tables import SEGMENT, Tables, before, by_process


def integrity(t: Tables) -> Any:
    """Per delivery: never sent, not a destination, or delivered again."""
    from pyspark.sql import functions as F

    reason = (
        "CASE WHEN _unsent THEN format_string('P%d delivered %s, which was never sent',"
        f" process, {m('mo', 'ms')})"
        " WHEN NOT array_contains(sdest, process) THEN format_string("
        f"'P%d delivered %s, which was sent only to %s', process, {m('mo', 'ms')},"
        " concat('[', array_join(sdest, ', '), ']'))"
        " WHEN _rn > 1 THEN format_string('P%d delivered %s more than once', process, "
        f"{m('mo', 'ms')}) END"
    )
    bad = t.deliveries.withColumn("reason", F.expr(reason)).where("reason IS NOT NULL")
    return witnessed(bad, "integrity")


def fifo(t: Tables) -> Any:
    """(q, m1, m2): same origin, m1 sent first, q delivers m2 first."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keep = ["run", "process", "mo"]
    if t.mode == "full":
        a = renamed(t.first, keep, {"ms2": "ms", "pos2": "seq"})
        b = renamed(t.first, keep, {"ms1": "ms", "pos1": "seq"})
        pairs = a.join(b, keep).where("pos2 < pos1 AND ms1 < ms2")
    else:
        w = Window.partitionBy(*keep).orderBy("seq").rowsBetween(*before())
        best = F.max(F.when(F.col("_first"), F.struct("ms", "seq"))).over(w)
        pairs = renamed(
            t.table.withColumn("_best", best).where("_first AND _best.ms > ms"),
            keep,
            {"ms1": "ms", "pos1": "seq", "ms2": "_best.ms", "pos2": "_best.seq"},
        )
    return witnessed(pairs, "fifo")


def _causal_candidates(t: Tables) -> Any:
    """Summary mode: the first deliveries of m1 whose process had already delivered
    something sent after m1 (its previous clock's entry of m1's origin, or for its own
    messages the running maximum of the send clocks it delivered)."""
    from pyspark.sql import functions as F

    w = by_process().rowsBetween(*before())
    is_dc = F.expr("_first AND sc IS NOT NULL")
    cand = (
        t.table.withColumn("c1", F.when(is_dc, F.expr("try_element_at(sc, mo)")))
        .withColumn("_self", F.max(F.when(is_dc, F.expr("try_element_at(sc, process)"))).over(w))
        .where(
            "c1 IS NOT NULL AND CASE WHEN mo = process THEN coalesce(_self, 0) >= c1 "
            "ELSE coalesce(_pmo, 0) >= c1 END"
        )
    )
    return renamed(cand, ["run", "process", "c1"], {"pos1": "seq", "mo1": "mo", "ms1": "ms"})


def causal(t: Tables) -> Any:
    """(q, m1, m2) with send(m1) -> send(m2), q delivers m2 first."""
    from pyspark.sql import functions as F

    keep = ["run", "process"]
    dc = t.first.where("sc IS NOT NULL")
    a = renamed(dc, keep, {"pos2": "seq", "mo2": "mo", "ms2": "ms", "sc2": "sc"})
    if t.mode == "full":
        b = renamed(dc, keep, {"pos1": "seq", "mo1": "mo", "ms1": "ms", "sc1": "sc"})
        pairs = a.join(b, keep).where(
            "pos2 < pos1 AND forall(map_keys(sc1), k -> sc1[k] <= "
            "coalesce(try_element_at(sc2, k), 0)) AND exists(map_keys(sc2), k -> "
            "sc2[k] > coalesce(try_element_at(sc1, k), 0))"
        )
    else:
        pairs = (
            _causal_candidates(t)
            .join(a, keep)
            .where("pos2 < pos1 AND coalesce(try_element_at(sc2, mo1), 0) >= c1")
            .groupBy("run", "process", "pos1", "mo1", "ms1")
            .agg(F.min(F.struct("pos2", "mo2", "ms2")).alias("_w"))
            .select("run", "process", "pos1", "mo1", "ms1", "_w.pos2", "_w.mo2", "_w.ms2")
        )
    return witnessed(pairs, "causal")


def _total_pairs(t: Tables) -> Any:
    """(p, q, m) for p < q that both delivered m first in one segment, m being out of
    the reference order somewhere (``mailroom.spark.tables``): p's and q's positions."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    shared = (
        t.first.where("_ngot > 1")
        .withColumn("_inv", F.max("_x").over(Window.partitionBy("run", "mo", "ms")))
        .where("_inv")
        .join(F.broadcast(t.succ.withColumnRenamed("v", "_sv")), ["run", "_sv"], "left")
        .withColumn("_seg", F.expr(SEGMENT))
    )
    keep = ["run", "mo", "ms"]
    fp = renamed(shared, keep, {"p": "process", "pp": "seq", "_seg": "_seg"})
    fq = renamed(shared, keep, {"q": "process", "qp": "seq", "_qseg": "_seg"})
    return fp.join(fq, keep).where("p < q AND _seg = _qseg").drop("_seg", "_qseg")


def total(t: Tables) -> Any:
    """(p, q, m1, m2), p < q: p delivers m1 before m2, q the other way round.

    Only messages that two or more processes delivered can be out of order (in a
    run with view events, only within a segment both processes have; a segment left
    into another view than the successor is shared with no one), and only messages
    out of the reference order at some process."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    both = _total_pairs(t)
    keep = ["run", "p", "q"]
    first = {"mo1": "mo", "ms1": "ms", "pp1": "pp", "qp1": "qp"}
    if t.mode == "full":
        x = renamed(both, keep, first)
        y = renamed(both, keep, {"mo2": "mo", "ms2": "ms", "pp2": "pp", "qp2": "qp"})
        pairs = x.join(y, keep).where("pp1 < pp2 AND qp2 < qp1")
    else:
        w = Window.partitionBy(*keep).orderBy("pp").rowsBetween(*before())
        best = both.withColumn("_best", F.max(F.struct("qp", "pp", "mo", "ms")).over(w))
        best = best.where("_best.qp > qp")
        then = {"mo2": "mo", "ms2": "ms", "pp2": "pp", "qp2": "qp"}
        pairs = renamed(best, keep, {**{k: f"_best.{v}" for k, v in first.items()}, **then})
    return witnessed(pairs, "total")


def liveness(t: Tables) -> Any:
    """(q, m), q a destination of m that never delivered it; with ``in_flight``, messages
    sent less than that long before the run's last event are not reported."""
    from pyspark.sql import functions as F

    # the kept send of each message: its process's last send of it, at the kept seq
    kept = t.table.where("kind = 'send' AND _rn = 1 AND process = sproc AND seq = sseq")
    # a send that names its view V is owed to the processes that installed V and then
    # V's successor, if its sender did (see mailroom.trace.properties)
    owers = t.successions.groupBy("run", "v").agg(F.collect_set("process").alias("_owers"))
    kept = kept.join(renamed(owers, ["run", "_owers"], {"view": "v"}), ["run", "view"], "left")
    owed = kept.select(
        "run",
        "mo",
        "ms",
        F.col("seq").alias("sseq"),
        F.col("time").alias("stime"),
        F.explode(
            F.expr(
                "filter(dest, q -> NOT array_contains(_got, q) AND (view IS NULL OR "
                "(array_contains(coalesce(_owers, array()), process) "
                "AND array_contains(coalesce(_owers, array()), q))))"
            )
        ).alias("q"),
    )
    if t.in_flight is not None:
        end = t.loaded.events.groupBy("run").agg(F.max("time").alias("_end"))
        owed = owed.join(end, "run", "left").where(
            f"stime IS NULL OR _end IS NULL OR stime <= _end - {float(t.in_flight)!r}"
        )
    return witnessed(owed, "liveness")
