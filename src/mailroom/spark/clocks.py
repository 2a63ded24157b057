"""Happens-before on Spark: clocks given by the trace, or computed for runs that lack them.

A run whose send and deliver events all carry ``vc`` uses those clocks ("given");
any other run gets clocks computed ("compute": the reference algorithm, a process
ticks its own entry at each send and delivery, and a delivery first merges its
send's clock). ``propagation`` chooses how: "sequential" (the default) is one
Python pass per run on an executor (``mailroom.trace.history.propagate_clocks``);
"iterative" is DataFrame rounds to a fixpoint (``iterative_clocks``), one round per
message hop that brings news. Clocks stay sparse maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from mailroom.spark.load import EVENT_DDL, EVENT_DDL_COLUMNS
from mailroom.trace.history import propagate_clocks

HB_MODES = ("auto", "given", "compute")
#: How clocks are computed for runs that lack them (see ``with_clocks``).
PROPAGATIONS = ("sequential", "iterative")


def _compute_run(item: tuple[str, Iterable[Any]]) -> Iterator[tuple[Any, ...]]:
    """The reference clock algorithm over one run's send and deliver events."""
    run, rows = item
    hist: dict[int, list[Any]] = {}
    for r in rows:
        hist.setdefault(r.process, []).append(r)
    for h in hist.values():
        h.sort(key=lambda r: r.seq)
    sent = {(r.mo, r.ms) for h in hist.values() for r in h if r.kind == "send"}
    for r, vc in propagate_clocks(hist, lambda r: r.kind, lambda r: (r.mo, r.ms), sent):
        yield (run, *r[1:8], vc, r.time, r.view)


def with_clocks(
    spark: Any,
    app: Any,
    hb: str,
    propagation: str = "sequential",
    rounds: list[int] | None = None,
    *,
    probe: Any | None = None,
) -> Any:
    """Send and deliver events with ``vc`` given or computed per run (see the header).

    ``propagation`` chooses how missing clocks are computed: "sequential" (one
    Python pass per run on an executor) or "iterative" (DataFrame rounds to a
    fixpoint, ``iterative_clocks``); ``rounds``, if given, receives the number of
    rounds the iterative method needed. ``probe``, if given, is a cheaper table
    that has a row whenever ``app`` has a clockless one (it may have rows when
    ``app`` has none: then the runs to compute are looked for in ``app``).
    Returns ``app`` itself when every run carries its clocks.
    """
    from pyspark.sql import functions as F

    if hb == "given":
        return app
    if hb == "compute":
        need = app.select("run").distinct()
    else:
        # a probe that stops at the first clockless row and reads only two columns
        clockless = app.where("vc IS NULL") if probe is None else probe
        if not clockless.select(F.lit(1)).limit(1).collect():
            return app  # every run carries its clocks: nothing to compute
        need = app.where("vc IS NULL").select("run").distinct()
    todo = app.join(need, "run", "left_semi").select(*EVENT_DDL_COLUMNS)
    if propagation == "iterative":
        computed = iterative_clocks(todo, rounds)
    else:
        computed = spark.createDataFrame(
            todo.rdd.map(lambda r: (r.run, r)).groupByKey().flatMap(_compute_run), EVENT_DDL
        )
    kept = app.join(need, "run", "left_anti").select(*EVENT_DDL_COLUMNS)
    return kept.unionByName(computed)


def _clocks_at(state: Any, marks: Any, ids: list[str], deliveries: Any, keys: Any) -> Any:
    """The clock at each marked event (run, process, _r), given the send clocks ``state``:
    each of its process's entries ``keys`` is the running maximum, over the process's
    ranks up to the event, of what its deliveries' send clocks say; its own entry is
    its rank."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    upto = Window.partitionBy("run", "process", "k").orderBy("_r", "_o")
    upto = upto.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    contrib = deliveries.join(state.select("run", "mo", "ms", "vc"), ["run", "mo", "ms"]).select(
        "run", "process", "_r", F.explode("vc").alias("k", "v"), F.lit(0).alias("_o")
    )
    at = marks.join(keys, "run").select(
        "run", "process", "_r", "k", F.lit(None).cast("long").alias("v"), F.lit(1).alias("_o"), *ids
    )
    merged = (
        contrib.unionByName(at, allowMissingColumns=True)
        .withColumn("_m", F.max("v").over(upto))
        .where("_o = 1")
        .groupBy("run", "process", "_r", *ids)
        .agg(F.collect_list(F.when(F.col("_m").isNotNull(), F.struct("k", "_m"))).alias("_e"))
    )
    return merged.withColumn(
        "vc",
        F.expr(
            "map_concat(map_filter(map_from_entries(_e), (k, v) -> k != process), "
            "map(process, CAST(_r AS long)))"
        ),
    ).drop("_e")


def _entry_sum(state: Any) -> int:
    """The sum of every entry of every clock of ``state`` (clocks only grow)."""
    from pyspark.sql import functions as F

    row = state.agg(F.sum(F.expr("aggregate(map_values(vc), 0L, (a, x) -> a + x)"))).first()
    return int(row[0] or 0)


def iterative_clocks(todo: Any, rounds: list[int] | None = None) -> Any:
    """Vector clocks of send and deliver events by DataFrame rounds to a fixpoint.

    The clock of an event at process p with rank r (its position among p's send
    and deliver events) is {p: r} merged with the send clocks of the messages p
    delivered at or before it. So each round recomputes every send clock from the
    previous round's (``_clocks_at``); a process's own history costs no rounds, only
    message hops do. Clocks only grow, so the round whose entries sum to the
    previous round's total is the fixpoint; it takes as many rounds as the longest
    chain of message hops plus one. Every round is cut from its lineage with
    ``localCheckpoint``. Deliveries of messages never sent merge nothing, as in
    ``propagate_clocks``; a run where a delivery precedes its own send causally
    (``propagate_clocks`` leaves such events without a clock) is not detected.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w_rank = Window.partitionBy("run", "process").orderBy("seq")
    ev = todo.withColumn("_r", F.row_number().over(w_rank)).localCheckpoint()
    keys = ev.select("run", F.col("process").alias("k")).distinct().localCheckpoint()
    sends = (
        ev.where("kind = 'send'")
        .groupBy("run", "mo", "ms")
        .agg(F.max_by(F.struct("process", "_r"), "seq").alias("_s"))
        .select("run", "mo", "ms", "_s.process", "_s._r")
        .localCheckpoint()
    )
    dels = ev.where("kind = 'deliver'").select("run", "process", "_r", "mo", "ms")
    state = sends.withColumn(
        "vc", F.expr("map(process, CAST(_r AS long))").cast("map<long,long>")
    ).localCheckpoint()
    before, done = _entry_sum(state), 0
    while True:  # ends: the sum grows each round and is bounded by the events
        state = _clocks_at(state, sends, ["mo", "ms"], dels, keys).localCheckpoint()
        done += 1
        after = _entry_sum(state)
        if after == before:
            break
        before = after
    if rounds is not None:
        rounds.append(done)
    final = _clocks_at(state, ev.select("run", "process", "_r"), [], dels, keys)
    return ev.drop("vc").join(final, ["run", "process", "_r"]).select(*EVENT_DDL_COLUMNS)
