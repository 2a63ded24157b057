"""The two shuffles every Spark check reads: one table, persisted once.

Shuffle 1, by message (window functions, no joins): each event gets its message's
send (the last one, as the reference keeps it), the processes that delivered the
message, and whether it is its process's first delivery (or last send) of it.
Shuffle 2, by process in ``seq`` order: the previous clock (the clock check is
done here, so that only the send's clock is kept in the table) and each event's
segment (``_sv``, ``_sn``: the view its process installed last before it and next
after it). The result is persisted (``MEMORY_AND_DISK``) and every property reads
it (``Tables``); view events ride along in both shuffles (they are never a
message's send or delivery) and feed the view properties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from mailroom.spark.load import EVENT_DDL_COLUMNS, Loaded

#: A delivery's segment, comparable with ``=`` (no view: -1).
SEGMENT = (
    "CASE WHEN _sv IS NOT NULL AND _sn IS NOT NULL AND NOT (_sn <=> _succ) THEN NULL "
    "ELSE named_struct('v', coalesce(_sv, -1L), 'n', coalesce(_sn, -1L)) END"
)

#: With each positive entry of a clock ``vc`` the expected one, the clock is right
#: when it has every key of the expected clock: the positive keys of its process's
#: previous clock ``_p``, of its send's ``_q``, and its process. Without zero entries
#: (the common case) that is a difference of key arrays, which Spark compiles; with
#: them, a count of the positive keys, which it interprets (and is many times slower).
_CLOCK_KEYS = (
    "CASE WHEN NOT (array_contains(map_values(vc), 0L) OR array_contains(map_values(_p), 0L) "
    "OR array_contains(map_values(_q), 0L)) THEN size(array_except(concat(map_keys(_p), "
    "map_keys(_q), array(process)), map_keys(vc))) = 0 "
    "ELSE size(filter(map_values(vc), v -> v > 0)) = size(array_distinct(concat("
    "map_keys(map_filter(_p, (k, v) -> v > 0)), map_keys(map_filter(_q, (k, v) -> v > 0)), "
    "array(process)))) END"
)
#: The expected entry for key ``{0}``: its process's previous one plus one for its own
#: key, else the larger of the previous clock's and the send's.
_EXPECTED = (
    "CASE WHEN {0} = process THEN coalesce(try_element_at(_p, {0}), 0) + 1 ELSE greatest("
    "coalesce(try_element_at(_p, {0}), 0), coalesce(try_element_at(_q, {0}), 0)) END"
)
_KEYS = "array_distinct(concat(map_keys(_p), map_keys(_q), array(process)))"
#: A clock as a verdict shows it: JSON with its keys in order (as the reference).
_SORTED_JSON = "to_json(map_from_entries(array_sort(map_entries({0}))))"


@attrs.frozen
class Tables:
    """What the property checks read: the persisted ``table`` and views of it."""

    table: Any
    mode: str
    in_flight: float | None
    loaded: Loaded
    properties: tuple[str, ...]

    @property
    def deliveries(self) -> Any:
        return self.table.where("kind = 'deliver'")

    @property
    def first(self) -> Any:
        """Each process's first delivery of each message."""
        return self.table.where("_first")

    @property
    def views(self) -> Any:
        return self.table.where("kind = 'view'")

    @property
    def succ(self) -> Any:
        """Each view id installed in a run -> its successor (the next higher one installed)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        return (
            self.views.select("run", F.col("view").alias("v"))
            .distinct()
            .withColumn("_succ", F.lead("v").over(Window.partitionBy("run").orderBy("v")))
        )

    @property
    def successions(self) -> Any:
        """(process, V, V'): the process installed V and then V's successor V', nothing
        between."""
        from pyspark.sql import functions as F

        return (
            self.views.select(
                "run",
                "process",
                F.col("view").alias("v"),
                F.lead("view").over(by_process()).alias("nxt"),
            )
            .join(self.succ, ["run", "v"])
            .where("nxt = _succ")
            .select("run", "process", "v", "nxt")
        )


def by_process() -> Any:
    """The window of a process's events in ``seq`` order."""
    from pyspark.sql import Window

    return Window.partitionBy("run", "process").orderBy("seq")


def before() -> tuple[int, int]:
    """The frame of the rows before the current one (``rowsBetween(*before())``)."""
    from pyspark.sql import Window

    return Window.unboundedPreceding, -1


def _by_message(rows: Any) -> Any:
    """Shuffle 1: each row with its message's send (``_s``), its deliverers (``_got`` on
    sends, ``_ngot`` everywhere), its place in the reference order of total order
    (``_ok``) and ``_rn`` (1 for a process's first delivery or last send, else 2).

    One sort: by kind, process and seq within the message, so that a row's neighbours
    tell whether it is its process's first delivery or last send of the message."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    is_send = F.col("kind") == "send"
    is_deliver = F.col("kind") == "deliver"
    w_ord = Window.partitionBy("run", "mo", "ms").orderBy("kind", "process", "seq")
    w_msg = w_ord.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    send_info = F.struct(
        F.col("dest").alias("sdest"),
        F.col("seq").alias("sseq"),
        F.col("time").alias("stime"),
        F.col("process").alias("sproc"),
        F.col("vc").alias("sc"),
        F.col("view").alias("sview"),
    )
    who = F.struct("kind", "process")
    repeated = F.when(is_send, F.lead(who).over(w_ord) == who).otherwise(
        F.lag(who).over(w_ord) == who
    )
    got = F.collect_set(F.when(is_deliver, F.col("process"))).over(w_msg)
    return rows.select(
        *EVENT_DDL_COLUMNS,
        F.max_by(F.when(is_send, send_info), F.when(is_send, F.col("seq"))).over(w_msg).alias("_s"),
        # only sends need which processes delivered it (liveness), every row how many
        # (total order): the tables are narrower without the rest
        F.when(is_send, got).alias("_got"),
        F.size(got).alias("_ngot"),
        F.struct(
            F.coalesce(F.min(F.when(is_deliver, F.col("time"))).over(w_msg), F.lit(0.0)),
            F.col("mo"),
            F.col("ms"),
        ).alias("_ok"),
        F.when(F.coalesce(repeated, F.lit(False)), 2).otherwise(1).alias("_rn"),
    )


def _out_of_order(fwd: Any, back: Any) -> list[Any]:
    """Windows that find the deliveries total order must pair up (the others cannot
    be in a violation): each first delivery's place in a reference order (``_k``),
    and the latest (``_kb``) and earliest (``_ka``) places its process delivered
    before and after it. A first delivery is out of the reference order at its
    process (``_x``) when ``_k < _kb`` or ``_k > _ka``.

    Total order is checked on pairs of processes, which costs the square of the
    processes that delivered each message. A process that delivered m1 before m2
    and one that delivered them the other way round cannot both agree with any
    one order of the messages, so only messages that some process delivered out
    of a reference order can be in a violation. The reference order (``_ok``) is
    each message's earliest delivery time, then its id: a protocol that keeps
    total order delivers in it at every process that delivers both messages, so in
    practice nothing is left to pair up.
    """
    from pyspark.sql import functions as F

    key = F.when(F.expr("kind = 'deliver' AND _rn = 1 AND _ngot > 1"), F.col("_ok"))
    return [
        key.alias("_k"),
        F.max(key).over(fwd.rowsBetween(*before())).alias("_kb"),
        F.min(key).over(back.rowsBetween(*before())).alias("_ka"),
    ]


def _by_process(by_msg: Any, total: bool) -> Any:
    """Shuffle 2: each row's previous clock (``pred``) and segment (``_sv``, ``_sn``),
    and with ``total`` whether it is out of the reference order (``_x``).

    One select, so that every window reading forwards shares one sort and every
    window reading backwards another; a frame from the current row to the end is
    evaluated afresh for every row (quadratic in a process's events), so "the next
    view" reads the frame backwards."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w_proc = by_process()
    upto = w_proc.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    back = Window.partitionBy("run", "process").orderBy(F.desc("seq"))
    is_view = F.col("kind") == "view"
    pred = F.last(F.when(~is_view, F.struct(F.col("vc").alias("v"))), ignorenulls=True)
    view_id = F.when(is_view, F.col("view"))
    windows = [
        pred.over(w_proc.rowsBetween(*before())).getField("v").alias("pred"),
        F.last(view_id, ignorenulls=True).over(upto).alias("_sv"),
        F.last(view_id, ignorenulls=True)
        .over(back.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("_sn"),
    ]
    if total:
        windows += _out_of_order(w_proc, back)
    # (a delivery's send's clock: only deliveries read it, and the persisted table is
    # cheaper without a second clock on every send)
    out = by_msg.select("*", *windows).withColumn(
        "sc", F.when(F.col("kind") == "deliver", F.col("_s.sc"))
    )
    if total:
        out = out.withColumn(
            "_x",
            F.coalesce(F.col("_k") < F.col("_kb"), F.lit(False))
            | F.coalesce(F.col("_k") > F.col("_ka"), F.lit(False)),
        )
    return out


def _with_clock_check(df: Any, check: bool) -> Any:
    """``_cbad`` (the row's clock is wrong), and for wrong clocks ``_cvc`` and ``_cexp``
    (the clock and the one expected, as JSON); with ``check`` False, no clock is wrong."""
    from pyspark.sql import functions as F

    if not check:
        return df.withColumns(
            {
                "_cbad": F.lit(False),
                "_cvc": F.lit(None).cast("string"),
                "_cexp": F.lit(None).cast("string"),
            }
        )
    expected = (
        f"map_filter(map_from_arrays({_KEYS}, transform({_KEYS}, k -> "
        f"{_EXPECTED.format('k')})), (k, v) -> v > 0)"
    )
    return (
        df.withColumn("_p", F.expr("coalesce(pred, map())").cast("map<long,long>"))
        .withColumn(
            "_q",
            F.expr("CASE WHEN kind = 'deliver' THEN coalesce(sc, map()) ELSE map() END").cast(
                "map<long,long>"
            ),
        )
        # the clock is right when each of its positive entries is the expected one
        # and it has as many as expected (cheaper than building the expected map)
        .withColumn(
            "_cbad",
            F.expr(
                "kind != 'view' AND vc IS NOT NULL AND NOT (forall(map_entries(vc), e -> "
                f"e.value <= 0 OR e.value = {_EXPECTED.format('e.key')}) AND {_CLOCK_KEYS})"
            ),
        )
        .withColumn("_cvc", F.expr(f"CASE WHEN _cbad THEN {_SORTED_JSON.format('vc')} END"))
        .withColumn("_cexp", F.expr(f"CASE WHEN _cbad THEN {_SORTED_JSON.format(expected)} END"))
    )


def build_tables(
    rows: Any, properties: Sequence[str], mode: str, in_flight: float | None, loaded: Loaded
) -> Tables:
    """The persisted table of ``rows`` (send, deliver and view events with their clocks)
    for checking ``properties``; the caller unpersists ``Tables.table``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    total = "total" in properties
    checked = _with_clock_check(_by_process(_by_message(rows), total), "clock" in properties)
    table = checked.select(
        "run",
        "process",
        "seq",
        "kind",
        "mo",
        "ms",
        "dest",
        "time",
        "view",
        "sc",
        F.col("_s.sview").alias("sview"),
        "_sv",
        "_sn",
        F.col("_s.sdest").alias("sdest"),
        F.col("_s.sseq").alias("sseq"),
        F.col("_s.sproc").alias("sproc"),
        F.expr("_s IS NULL").alias("_unsent"),
        "_got",
        "_ngot",
        "_rn",
        F.expr("kind = 'deliver' AND _rn = 1").alias("_first"),
        F.expr("try_element_at(pred, mo)").alias("_pmo"),
        "_cbad",
        "_cvc",
        "_cexp",
        *(["_x"] if total else []),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    return Tables(table, mode, in_flight, loaded, tuple(properties))
