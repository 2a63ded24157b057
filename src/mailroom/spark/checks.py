"""The ordering properties checked on Spark, row for row like the reference checkers.

Rules, in words (``mailroom.trace.checkers`` is the oracle; its header defines the
canonical violation sets, and ``mode="full"`` reproduces them exactly):

- Only send and deliver events take part in happens-before; receives are ignored.
  A delivery's position is its ``seq``; FIFO, causal and total order look at each
  process's *first* delivery of each message.
- Happens-before (``hb``): a run whose send and deliver events all carry ``vc``
  uses those clocks ("given"); any other run gets clocks computed ("compute":
  the reference algorithm, a process ticks its own entry at each send and
  delivery, and a delivery first merges its send's clock). ``propagation``
  chooses how: "sequential" (the default) is one Python pass per run on an
  executor; "iterative" is DataFrame rounds to a fixpoint (``iterative_clocks``),
  one round per message hop that brings news. Clocks stay sparse maps.
- Clock validation (property ``clock``): each send or delivery's ``vc`` must be
  its process's previous clock with its own entry plus one, merged (entrywise
  max) with its message's send clock for a delivery. One pass: a window lag per
  process; the send's clock comes with the by-message shuffle (see Plan).
- integrity: per delivery, never sent / not a destination / delivered again.
- fifo: (q, m1, m2), same origin, m1 sent first, q delivers m2 first.
- causal: (q, m1, m2) with send(m1) -> send(m2), q delivers m2 first.
- total: (p, q, m1, m2), p < q, p delivers m1 before m2, q the other way round.
- liveness: (q, m), q a destination of m that never delivered it; with an
  ``in_flight`` cut-off, messages sent less than that long before the run's
  last event are still in flight and not reported.
- ``mode="full"`` reports every pair, as the reference does (pairwise joins:
  fine for simulator-sized runs). ``mode="summary"`` scales: one row per
  violating later delivery (fifo, causal) or per violating (p, q, m2) (total),
  each with one witness pair that is in the full set; the set of violating
  deliveries is the same as the full set's. Causal summary uses the clock
  trick (send(m1) -> e iff sc(m1)[origin] <= vc(e)[origin]), so it assumes
  the clocks passed validation.
- Deliveries of messages that were never sent are also rows of ``invalid``.
- Group membership (view events): view_agreement, self_inclusion, same_view and
  virtual_synchrony as the reference defines them, and total and liveness
  scoped by views (``mailroom.trace.checkers`` header). View events ride along
  in both shuffles (they are never a message's send or delivery), so the
  window by process gives every event its segment (``_sv``, ``_sn``: the view
  installed last before it and next after it); the view properties read the
  persisted table's view rows (a window by run gives each view id its
  successor, a window by process each process's next view).

Plan: one shuffle by message (each event gets its message's send, its delivery
rank and the message's deliverers, by window functions, no joins) and one by
process in ``seq`` order (the previous clock); that table is persisted once and
every property reads it, so the events are shuffled twice whatever the
properties. Total order shuffles the first deliveries of messages that two
or more processes delivered once more, by message, for its pairs.

Nothing is collected to the driver except the per-property counts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.spark.load import EVENT_DDL, INVALID_DDL, Loaded, Split
from mailroom.trace.checkers import ALL_PROPERTIES, PROPERTIES, propagate_clocks

#: The reference properties (ordering and group membership) plus clock validation.
SPARK_PROPERTIES = (*ALL_PROPERTIES, "clock")
MODES = ("summary", "full")
HB_MODES = ("auto", "given", "compute")
#: How clocks are computed for runs that lack them (see ``with_clocks``).
PROPAGATIONS = ("sequential", "iterative")

VIOLATION_DDL = (
    "property string, run string, processes array<long>, "
    "messages array<struct<origin:long,seq:long>>, positions array<long>, reason string"
)

_MSG = "format_string('P%d#%d', {0}, {1})"


def _m(o: str, s: str) -> str:
    return _MSG.format(o, s)


#: Witnesses per property (and invalid rows) fetched with the counts, in the one action.
DIGEST_WITNESSES = 10


@attrs.frozen
class Digest:
    """What the report prints, fetched in one Spark action: counts and first witnesses."""

    counts: dict[str, int]
    witnesses: dict[str, list[tuple[str, str]]]  # property -> [(run, reason)], in order
    invalid_count: int
    invalid_first: list[tuple[str, str]]  # [(where, reason)], by source and line
    events: int | None = None
    runs: int | None = None


def digest(
    violations: Any,
    invalid: Any,
    events: Any | None = None,
    k: int = DIGEST_WITNESSES,
) -> Digest:
    """Counts per property, the first ``k`` witnesses of each and of ``invalid`` (by run and
    positions, by source and line), and the events and runs of ``events``: one collect."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    by_prop = Window.partitionBy("property")
    v = violations.select(
        F.col("property").alias("_kind"),
        F.count(F.lit(1)).over(by_prop).alias("_n"),
        F.row_number().over(by_prop.orderBy("run", "positions", "processes")).alias("_rn"),
        F.col("run").alias("_a"),
        F.col("reason").alias("_b"),
        F.lit(None).cast("long").alias("_c"),
    ).where(f"_rn <= {int(k)}")
    by_src = Window.partitionBy(F.lit(1))
    where = F.expr(
        "CASE WHEN line IS NOT NULL THEN concat(source, ':', line) ELSE concat('run ', run) END"
    )
    i = invalid.select(
        F.lit("\u0000invalid").alias("_kind"),
        F.count(F.lit(1)).over(by_src).alias("_n"),
        F.row_number().over(by_src.orderBy("source", "line", "run", "seq")).alias("_rn"),
        where.alias("_a"),
        F.col("reason").alias("_b"),
        F.lit(None).cast("long").alias("_c"),
    ).where(f"_rn <= {int(k)}")
    parts = v.unionByName(i)
    if events is not None:
        parts = parts.unionByName(
            events.agg(
                F.lit("\u0000events").alias("_kind"),
                F.count(F.lit(1)).alias("_n"),
                F.lit(1).alias("_rn"),
                F.lit(None).cast("string").alias("_a"),
                F.lit(None).cast("string").alias("_b"),
                F.countDistinct("run").alias("_c"),
            )
        )
    counts: dict[str, int] = {}
    witnesses: dict[str, list[tuple[str, str]]] = {}
    ranked: dict[str, list[tuple[int, str, str]]] = {}
    n_events = n_runs = None
    for r in parts.collect():
        if r._kind == "\u0000events":
            n_events, n_runs = int(r._n), int(r._c)
            continue
        counts[r._kind] = int(r._n)
        ranked.setdefault(r._kind, []).append((int(r._rn), r._a, r._b))
    for kind, rows in ranked.items():
        witnesses[kind] = [(a, b) for _, a, b in sorted(rows)]
    return Digest(
        {p: n for p, n in counts.items() if p != "\u0000invalid"},
        {p: w for p, w in witnesses.items() if p != "\u0000invalid"},
        counts.get("\u0000invalid", 0),
        witnesses.get("\u0000invalid", []),
        n_events,
        n_runs,
    )


@attrs.frozen
class SparkReport:
    """Violation rows (``VIOLATION_DDL``), invalid rows and counts per checked property.

    ``violations`` and ``invalid`` are persisted; ``summary`` and the counts come
    from one action (``digest``), so printing and writing the report never
    recompute the checks.
    """

    checked: tuple[str, ...]
    violations: Any
    invalid: Any
    counts: dict[str, int]
    invalid_count: int
    mode: str
    found: Digest | None = None

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    @property
    def events(self) -> int | None:
        """Events in the checked trace (receives included), counted in the digest's action."""
        return None if self.found is None else self.found.events

    @property
    def runs(self) -> int | None:
        return None if self.found is None else self.found.runs

    def first(self, prop: str, k: int = 3) -> list[Any]:
        """The first ``k`` violations of ``prop`` (by run and positions)."""
        return list(
            self.violations.where(f"property = '{prop}'")
            .orderBy("run", "positions", "processes")
            .limit(k)
            .collect()
        )

    def summary(self, k: int = 3) -> str:
        found = self.found
        if found is None or k > DIGEST_WITNESSES:
            found = digest(self.violations, self.invalid, k=k)
        lines = []
        for prop in self.checked:
            n = self.counts.get(prop, 0)
            lines.append(f"{prop:10s} {'ok' if not n else f'{n} violation(s)'}")
            if n:
                lines.extend(f"    run {r}: {why}" for r, why in found.witnesses[prop][:k])
        lines.append(f"{'invalid':10s} {self.invalid_count} row(s)")
        lines.extend(f"    {where}: {why}" for where, why in found.invalid_first[:k])
        return "\n".join(lines)

    def write(self, out: str | Path, k: int = 3) -> None:
        """Write ``violations/`` and ``invalid/`` (Parquet), ``summary.json`` and
        ``summary.txt`` (with ``k`` witnesses per property) to ``out``."""
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        self.violations.write.mode("overwrite").parquet(str(out / "violations"))
        self.invalid.write.mode("overwrite").parquet(str(out / "invalid"))
        summary = {
            "checked": list(self.checked),
            "mode": self.mode,
            "violations": self.counts,
            "invalid": self.invalid_count,
        }
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        (out / "summary.txt").write_text(self.summary(k) + "\n")


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
    """Send and deliver events with ``vc`` given or computed per run (see header).

    ``propagation`` chooses how missing clocks are computed: "sequential" (one
    Python pass per run on an executor) or "iterative" (DataFrame rounds to a
    fixpoint, ``iterative_clocks``); ``rounds``, if given, receives the number of
    rounds the iterative method needed. ``probe``, if given, is a cheaper table
    that has a row whenever ``app`` has a clockless one (it may have rows when
    ``app`` has none: then the runs to compute are looked for in ``app``).
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


def iterative_clocks(todo: Any, rounds: list[int] | None = None) -> Any:
    """Vector clocks of send and deliver events by DataFrame rounds to a fixpoint.

    The clock of an event at process p with rank r (its position among p's send
    and deliver events) is {p: r} merged with the send clocks of the messages p
    delivered at or before it. So each round recomputes every send clock from the
    previous round's: the deliveries contribute their messages' clock entries,
    and a running maximum per (process, entry) over ranks, read at each send,
    is the prefix merge; a process's own history costs no rounds, only message
    hops do. Clocks only grow, so the round whose entries sum to the previous
    round's total is the fixpoint; it takes as many rounds as the longest chain
    of message hops plus one. Every round is cut from its lineage with
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
    upto = Window.partitionBy("run", "process", "k").orderBy("_r", "_o")
    upto = upto.rowsBetween(Window.unboundedPreceding, Window.currentRow)

    def clocks_at(state: Any, marks: Any, ids: list[str]) -> Any:
        """The clock at each marked event (run, process, _r) given the send clocks."""
        contrib = dels.join(state.select("run", "mo", "ms", "vc"), ["run", "mo", "ms"]).select(
            "run", "process", "_r", F.explode("vc").alias("k", "v"), F.lit(0).alias("_o")
        )
        at = marks.join(keys, "run").select(
            "run",
            "process",
            "_r",
            "k",
            F.lit(None).cast("long").alias("v"),
            F.lit(1).alias("_o"),
            *ids,
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

    def total(state: Any) -> int:
        row = state.agg(F.sum(F.expr("aggregate(map_values(vc), 0L, (a, x) -> a + x)"))).first()
        return int(row[0] or 0)

    state = sends.withColumn(
        "vc", F.expr("map(process, CAST(_r AS long))").cast("map<long,long>")
    ).localCheckpoint()
    before, done = total(state), 0
    while True:
        state = clocks_at(state, sends, ["mo", "ms"]).localCheckpoint()
        done += 1
        after = total(state)
        if after == before:
            break
        before = after
    if rounds is not None:
        rounds.append(done)
    final = clocks_at(state, ev.select("run", "process", "_r"), [])
    return ev.drop("vc").join(final, ["run", "process", "_r"]).select(*EVENT_DDL_COLUMNS)


EVENT_DDL_COLUMNS = [
    "run",
    "process",
    "seq",
    "kind",
    "mo",
    "ms",
    "sender",
    "dest",
    "vc",
    "time",
    "view",
]


#: A delivery's segment, comparable with ``=`` (no view: -1).
_SEGMENT = (
    "CASE WHEN _sv IS NOT NULL AND _sn IS NOT NULL AND NOT (_sn <=> _succ) THEN NULL "
    "ELSE named_struct('v', coalesce(_sv, -1L), 'n', coalesce(_sn, -1L)) END"
)


def _out_of_order(fwd: Any, back: Any) -> list[Any]:
    """Windows that find the deliveries total order must pair up (the others cannot
    be in a violation): each first delivery's place in a reference order (``_k``),
    and the latest (``_kb``) and earliest (``_ka``) places its process delivered
    before and after it. A first delivery is out of the reference order at its process (``_x``) when
    ``_k < _kb`` or ``_k > _ka``.

    Total order is checked on pairs of processes, which costs the square of the
    processes that delivered each message. A process that delivered m1 before m2
    and one that delivered them the other way round cannot both agree with any
    one order of the messages, so only messages that some process delivered out
    of a reference order can be in a violation: those before which the process
    delivered a later message, or after which an earlier one. The reference order
    (``_ok``) is each message's earliest delivery time, then its id: a protocol
    that keeps total order delivers in it at every process that delivers both
    messages (whenever the earliest delivery of the later one is at a process that
    delivered the earlier one too), so in practice nothing is left to pair up.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = F.when(F.expr("kind = 'deliver' AND _rn = 1 AND _ngot > 1"), F.col("_ok"))
    before = Window.unboundedPreceding, -1
    return [
        key.alias("_k"),
        F.max(key).over(fwd.rowsBetween(*before)).alias("_kb"),
        F.min(key).over(back.rowsBetween(*before)).alias("_ka"),
    ]


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


def _violation(
    df: Any,
    prop: str,
    processes: str,
    messages: Sequence[tuple[str, str]],
    positions: str,
    reason: str,
) -> Any:
    from pyspark.sql import functions as F

    return df.select(
        F.lit(prop).alias("property"),
        F.col("run"),
        F.expr(f"transform({processes}, x -> CAST(x AS long))").alias("processes"),
        F.expr(
            "CAST(array("
            + ", ".join(f"named_struct('origin', {o}, 'seq', {q})" for o, q in messages)
            + ") AS array<struct<origin:long,seq:long>>)"
        ).alias("messages"),
        F.expr(f"transform({positions}, x -> CAST(x AS long))").alias("positions"),
        F.expr(reason).alias("reason"),
    )


def check_trace(
    spark: Any,
    loaded: Loaded,
    properties: Sequence[str] = PROPERTIES,
    *,
    mode: str = "summary",
    hb: str = "auto",
    in_flight: float | None = None,
    propagation: str = "sequential",
) -> SparkReport:
    """Check ``properties`` (of ``SPARK_PROPERTIES``) on every run of ``loaded``.

    Two shuffles carry every check (see the header): one by message, so that each
    event sees its message's send and each delivery knows whether it is the first
    at its process; one by process, sorted by ``seq``, persisted once and read by
    every property. Total order adds a shuffle of the first deliveries by message
    for its pairs of processes.
    """
    from pyspark import StorageLevel
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    unknown = [p for p in properties if p not in SPARK_PROPERTIES]
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {list(SPARK_PROPERTIES)}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {list(MODES)}, got {mode!r}")
    if hb not in HB_MODES:
        raise ValueError(f"hb must be one of {list(HB_MODES)}, got {hb!r}")
    if propagation not in PROPAGATIONS:
        raise ValueError(f"propagation must be one of {list(PROPAGATIONS)}, got {propagation!r}")
    # send and deliver events (with their clocks) and view events, which only mark
    # the segments (see mailroom.trace.checkers) and feed the view properties
    kinds = "kind IN ('send', 'deliver', 'view')"
    rows = loaded.events.where(kinds)
    computed = False
    if {"causal", "clock"} & set(properties):
        app = rows.where("kind != 'view'")
        # (a Parquet trace is probed for clockless events before its rows are checked,
        # on the two columns that tell, not on every column the checks need)
        probe = None
        if loaded.split is not None:
            probe = loaded.split.rows.where(
                f"kind IN ('send', 'deliver') AND ({loaded.split.clockless})"
            )
        clocked = with_clocks(spark, app, hb, propagation, probe=probe)
        if clocked is not app:
            rows = clocked.unionByName(rows.where("kind = 'view'"))
            computed = True
    # the events and runs are counted as the first shuffle reads them (see _observe);
    # where clocks are computed, which reads them twice, the digest counts them
    observation = None
    if not computed:
        split = loaded.split or Split(loaded.events, "true", "false", lambda rows: rows)
        observed, observation = _observe(split)
        rows = split.events(observed).where(kinds)

    # shuffle 1, by message: the message's send (the last one, as the reference keeps
    # it), the processes that delivered it, and whether each event is the first of
    # its process's events of that kind for that message (deliveries first to last,
    # sends last to first: _rn 1, else 2)
    # (one sort: by kind, process and seq within the message, so that a row's
    # neighbours tell whether it is its process's first delivery or last send of it)
    is_send = F.col("kind") == "send"
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
    is_deliver = F.col("kind") == "deliver"
    who = F.struct("kind", "process")
    repeated = F.when(is_send, F.lead(who).over(w_ord) == who).otherwise(
        F.lag(who).over(w_ord) == who
    )
    got = F.collect_set(F.when(is_deliver, F.col("process"))).over(w_msg)
    by_msg = rows.select(
        *EVENT_DDL_COLUMNS,
        F.max_by(F.when(is_send, send_info), F.when(is_send, F.col("seq"))).over(w_msg).alias("_s"),
        # the processes that delivered it: only sends need which (liveness), every
        # row how many (total order), and the tables are narrower without the rest
        F.when(is_send, got).alias("_got"),
        F.size(got).alias("_ngot"),
        # the message's place in a reference order for total order (see _out_of_order)
        F.struct(
            F.coalesce(F.min(F.when(is_deliver, F.col("time"))).over(w_msg), F.lit(0.0)),
            F.col("mo"),
            F.col("ms"),
        ).alias("_ok"),
        # 1 for the first, 2 for any other
        F.when(F.coalesce(repeated, F.lit(False)), 2).otherwise(1).alias("_rn"),
    )
    # shuffle 2, by process in seq order: the previous clock. The clock check is
    # done here, so that of the three clocks of a row (its own, the previous one and
    # its send's) only the send's is kept in the persisted table, which every
    # property reads.
    # The same window gives each event its segment: the view its process installed
    # last before it (_sv) and the one it installs next (_sn).
    w_proc = Window.partitionBy("run", "process").orderBy("seq")
    upto = w_proc.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    is_view = F.col("kind") == "view"
    pred = F.last(F.when(~is_view, F.struct(F.col("vc").alias("v"))), ignorenulls=True)
    # (one select, so that every window reading forwards shares one sort and every
    # window reading backwards another; a frame from the current row to the end is
    # evaluated afresh for every row, quadratic in a process's events, so "the next
    # view" reads the frame backwards)
    back = Window.partitionBy("run", "process").orderBy(F.desc("seq"))
    view_id = F.when(is_view, F.col("view"))
    windows = [
        pred.over(w_proc.rowsBetween(Window.unboundedPreceding, -1)).getField("v").alias("pred"),
        F.last(view_id, ignorenulls=True).over(upto).alias("_sv"),
        F.last(view_id, ignorenulls=True)
        .over(back.rowsBetween(Window.unboundedPreceding, Window.currentRow))
        .alias("_sn"),
    ]
    if "total" in properties:
        windows += _out_of_order(w_proc, back)
    # (a delivery's send's clock: only deliveries read it, and the persisted table is
    # cheaper without a second clock on every send)
    with_pred = by_msg.select("*", *windows).withColumn("sc", F.when(is_deliver, F.col("_s.sc")))
    if "total" in properties:
        with_pred = with_pred.withColumn(
            "_x",
            F.coalesce(F.col("_k") < F.col("_kb"), F.lit(False))
            | F.coalesce(F.col("_k") > F.col("_ka"), F.lit(False)),
        )
    if "clock" in properties:
        # the clock each event should have: its process's previous one, merged with its
        # send's on a delivery, its own entry one more (only computed for wrong clocks)
        keys = "array_distinct(concat(map_keys(_p), map_keys(_q), array(process)))"
        expected = (
            f"map_filter(map_from_arrays({keys}, transform({keys}, k -> CASE WHEN k = process "
            "THEN coalesce(try_element_at(_p, k), 0) + 1 ELSE greatest(coalesce("
            "try_element_at(_p, k), 0), coalesce(try_element_at(_q, k), 0)) END)), "
            "(k, v) -> v > 0)"
        )
        with_pred = (
            with_pred.withColumn("_p", F.expr("coalesce(pred, map())").cast("map<long,long>"))
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
                    "e.value <= 0 OR e.value = CASE WHEN e.key = process THEN coalesce("
                    "try_element_at(_p, e.key), 0) + 1 ELSE greatest(coalesce(try_element_at("
                    "_p, e.key), 0), coalesce(try_element_at(_q, e.key), 0)) END) AND "
                    f"{_CLOCK_KEYS})"
                ),
            )
            .withColumn("_cvc", F.expr("CASE WHEN _cbad THEN to_json(vc) END"))
            .withColumn("_cexp", F.expr(f"CASE WHEN _cbad THEN to_json({expected}) END"))
        )
    else:
        with_pred = with_pred.withColumn("_cbad", F.lit(False))
        with_pred = with_pred.withColumn("_cvc", F.lit(None).cast("string"))
        with_pred = with_pred.withColumn("_cexp", F.lit(None).cast("string"))
    table = with_pred.select(
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
        *(["_x"] if "total" in properties else []),
    ).persist(StorageLevel.MEMORY_AND_DISK)
    deliveries = table.where("kind = 'deliver'")
    first = table.where("_first")
    views = table.where("kind = 'view'")
    # each view id installed in a run -> its successor (the next higher one installed)
    succ = (
        views.select("run", F.col("view").alias("v"))
        .distinct()
        .withColumn("_succ", F.lead("v").over(Window.partitionBy("run").orderBy("v")))
    )
    # (process, V, V'): the process installed V and then V's successor V', nothing between
    w_views = Window.partitionBy("run", "process").orderBy("seq")
    successions = (
        views.select(
            "run",
            "process",
            F.col("view").alias("v"),
            F.lead("view").over(w_views).alias("nxt"),
        )
        .join(succ, ["run", "v"])
        .where("nxt = _succ")
        .select("run", "process", "v", "nxt")
    )
    parts: list[Any] = []

    if "integrity" in properties:
        reason = (
            "CASE WHEN _unsent THEN format_string('P%d delivered %s, which was never sent',"
            f" process, {_m('mo', 'ms')})"
            " WHEN NOT array_contains(sdest, process) THEN format_string("
            f"'P%d delivered %s, which was sent only to %s', process, {_m('mo', 'ms')},"
            " concat('[', array_join(sdest, ', '), ']'))"
            " WHEN _rn > 1 THEN format_string('P%d delivered %s more than once', process, "
            f"{_m('mo', 'ms')}) END"
        )
        bad = deliveries.withColumn("reason", F.expr(reason)).where("reason IS NOT NULL")
        parts.append(
            _violation(bad, "integrity", "array(process)", [("mo", "ms")], "array(seq)", "reason")
        )

    before = Window.unboundedPreceding, -1
    if "fifo" in properties:
        if mode == "full":
            a = first.select(
                "run", "process", "mo", F.col("ms").alias("ms2"), F.col("seq").alias("pos2")
            )
            b = first.select(
                "run", "process", "mo", F.col("ms").alias("ms1"), F.col("seq").alias("pos1")
            )
            pairs = a.join(b, ["run", "process", "mo"]).where("pos2 < pos1 AND ms1 < ms2")
        else:
            w = Window.partitionBy("run", "process", "mo").orderBy("seq").rowsBetween(*before)
            pairs = (
                table.withColumn(
                    "_best", F.max(F.when(F.col("_first"), F.struct("ms", "seq"))).over(w)
                )
                .where("_first AND _best.ms > ms")
                .select(
                    "run",
                    "process",
                    "mo",
                    F.col("ms").alias("ms1"),
                    F.col("seq").alias("pos1"),
                    F.col("_best.ms").alias("ms2"),
                    F.col("_best.seq").alias("pos2"),
                )
            )
        parts.append(
            _violation(
                pairs,
                "fifo",
                "array(process)",
                [("mo", "ms1"), ("mo", "ms2")],
                "array(pos1, pos2)",
                f"format_string('P%d delivered %s before %s, sent before it', process, "
                f"{_m('mo', 'ms2')}, {_m('mo', 'ms1')})",
            )
        )

    if "causal" in properties:
        dc = first.where("sc IS NOT NULL")
        a = dc.select(
            "run",
            "process",
            F.col("seq").alias("pos2"),
            F.col("mo").alias("mo2"),
            F.col("ms").alias("ms2"),
            F.col("sc").alias("sc2"),
        )
        if mode == "full":
            b = dc.select(
                "run",
                "process",
                F.col("seq").alias("pos1"),
                F.col("mo").alias("mo1"),
                F.col("ms").alias("ms1"),
                F.col("sc").alias("sc1"),
            )
            pairs = a.join(b, ["run", "process"]).where(
                "pos2 < pos1 AND forall(map_keys(sc1), k -> sc1[k] <= "
                "coalesce(try_element_at(sc2, k), 0)) AND exists(map_keys(sc2), k -> "
                "sc2[k] > coalesce(try_element_at(sc1, k), 0))"
            )
        else:
            w = Window.partitionBy("run", "process").orderBy("seq").rowsBetween(*before)
            is_dc = F.expr("_first AND sc IS NOT NULL")
            cand = (
                table.withColumn("c1", F.when(is_dc, F.expr("try_element_at(sc, mo)")))
                .withColumn(
                    "_self", F.max(F.when(is_dc, F.expr("try_element_at(sc, process)"))).over(w)
                )
                .where(
                    "c1 IS NOT NULL AND CASE WHEN mo = process THEN coalesce(_self, 0) >= c1 "
                    "ELSE coalesce(_pmo, 0) >= c1 END"
                )
                .select(
                    "run",
                    "process",
                    F.col("seq").alias("pos1"),
                    F.col("mo").alias("mo1"),
                    F.col("ms").alias("ms1"),
                    "c1",
                )
            )
            pairs = (
                cand.join(a, ["run", "process"])
                .where("pos2 < pos1 AND coalesce(try_element_at(sc2, mo1), 0) >= c1")
                .groupBy("run", "process", "pos1", "mo1", "ms1")
                .agg(F.min(F.struct("pos2", "mo2", "ms2")).alias("_w"))
                .select("run", "process", "pos1", "mo1", "ms1", "_w.pos2", "_w.mo2", "_w.ms2")
            )
        parts.append(
            _violation(
                pairs,
                "causal",
                "array(process)",
                [("mo1", "ms1"), ("mo2", "ms2")],
                "array(pos1, pos2)",
                f"format_string('P%d delivered %s before %s, whose send happened before it', "
                f"process, {_m('mo2', 'ms2')}, {_m('mo1', 'ms1')})",
            )
        )

    if "total" in properties:
        # only messages that at least two processes delivered can be out of order
        # (in a run with view events, only within a segment both processes have)
        # (a segment left into another view than the successor is shared with no one)
        # and only messages out of the reference order at some process (see _out_of_order)
        shared = (
            first.where("_ngot > 1")
            .withColumn("_inv", F.max("_x").over(Window.partitionBy("run", "mo", "ms")))
            .where("_inv")
            .join(F.broadcast(succ.withColumnRenamed("v", "_sv")), ["run", "_sv"], "left")
            .withColumn("_seg", F.expr(_SEGMENT))
        )
        fp = shared.select(
            "run", "mo", "ms", F.col("process").alias("p"), F.col("seq").alias("pp"), "_seg"
        )
        fq = shared.select(
            "run",
            "mo",
            "ms",
            F.col("process").alias("q"),
            F.col("seq").alias("qp"),
            F.col("_seg").alias("_qseg"),
        )
        both = (
            fp.join(fq, ["run", "mo", "ms"]).where("p < q AND _seg = _qseg").drop("_seg", "_qseg")
        )
        if mode == "full":
            x = both.select(
                "run",
                "p",
                "q",
                F.col("mo").alias("mo1"),
                F.col("ms").alias("ms1"),
                F.col("pp").alias("pp1"),
                F.col("qp").alias("qp1"),
            )
            y = both.select(
                "run",
                "p",
                "q",
                F.col("mo").alias("mo2"),
                F.col("ms").alias("ms2"),
                F.col("pp").alias("pp2"),
                F.col("qp").alias("qp2"),
            )
            pairs = x.join(y, ["run", "p", "q"]).where("pp1 < pp2 AND qp2 < qp1")
        else:
            w = Window.partitionBy("run", "p", "q").orderBy("pp").rowsBetween(*before)
            pairs = (
                both.withColumn("_best", F.max(F.struct("qp", "pp", "mo", "ms")).over(w))
                .where("_best.qp > qp")
                .select(
                    "run",
                    "p",
                    "q",
                    F.col("_best.mo").alias("mo1"),
                    F.col("_best.ms").alias("ms1"),
                    F.col("_best.pp").alias("pp1"),
                    F.col("_best.qp").alias("qp1"),
                    F.col("mo").alias("mo2"),
                    F.col("ms").alias("ms2"),
                    F.col("pp").alias("pp2"),
                    F.col("qp").alias("qp2"),
                )
            )
        parts.append(
            _violation(
                pairs,
                "total",
                "array(p, q)",
                [("mo1", "ms1"), ("mo2", "ms2")],
                "array(pp1, pp2, qp1, qp2)",
                f"format_string('P%d delivered %s before %s, P%d the other way round', p, "
                f"{_m('mo1', 'ms1')}, {_m('mo2', 'ms2')}, q)",
            )
        )

    if "liveness" in properties:
        # the kept send of each message: its process's last send of it, at the kept seq
        kept = table.where("kind = 'send' AND _rn = 1 AND process = sproc AND seq = sseq")
        # a send that names its view V is owed to the processes that installed V and then
        # V's successor, if its sender did (see mailroom.trace.checkers)
        owers = successions.groupBy("run", "v").agg(F.collect_set("process").alias("_owers"))
        owers = owers.select("run", F.col("v").alias("view"), "_owers")
        kept = kept.join(owers, ["run", "view"], "left")
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
        if in_flight is not None:
            end = loaded.events.groupBy("run").agg(F.max("time").alias("_end"))
            owed = owed.join(end, "run", "left").where(
                f"stime IS NULL OR _end IS NULL OR stime <= _end - {float(in_flight)!r}"
            )
        parts.append(
            _violation(
                owed,
                "liveness",
                "array(q)",
                [("mo", "ms")],
                "array(sseq)",
                f"format_string('P%d never delivered %s', q, {_m('mo', 'ms')})",
            )
        )

    if "view_agreement" in properties:
        installs = views.withColumn(
            "_k", F.row_number().over(Window.partitionBy("run", "process", "view").orderBy("seq"))
        ).where("_k = 1")
        members = "concat('[', array_join(array_sort(array_distinct({})), ', '), ']')"
        a = installs.select(
            "run",
            "view",
            F.col("process").alias("p"),
            F.col("seq").alias("ps"),
            F.expr(members.format("dest")).alias("pm"),
        )
        b = installs.select(
            "run",
            "view",
            F.col("process").alias("q"),
            F.col("seq").alias("qs"),
            F.expr(members.format("dest")).alias("qm"),
        )
        parts.append(
            _violation(
                a.join(b, ["run", "view"]).where("p < q AND pm != qm"),
                "view_agreement",
                "array(p, q)",
                [("0", "view")],
                "array(ps, qs)",
                "format_string('P%d installed view %d as %s and P%d as %s', p, view, pm, q, qm)",
            )
        )
        back = views.select(
            "run",
            "process",
            "seq",
            "view",
            F.lag(F.struct("view", "seq")).over(w_views).alias("_prev"),
        ).where("_prev.view >= view")
        parts.append(
            _violation(
                back,
                "view_agreement",
                "array(process)",
                [("0", "_prev.view"), ("0", "view")],
                "array(_prev.seq, seq)",
                "format_string('P%d installed view %d after view %d', process, view, _prev.view)",
            )
        )

    if "self_inclusion" in properties:
        parts.append(
            _violation(
                views.where("NOT array_contains(dest, process)"),
                "self_inclusion",
                "array(process)",
                [("0", "view")],
                "array(seq)",
                "format_string('P%d installed view %d [%s], which does not include it', "
                "process, view, array_join(dest, ', '))",
            )
        )

    if "same_view" in properties:
        where = "CASE WHEN {0} IS NULL THEN 'outside any view' ELSE concat('in view ', {0}) END"
        parts.append(
            _violation(
                deliveries.where("NOT _unsent AND NOT (view <=> sview)"),
                "same_view",
                "array(process)",
                [("mo", "ms")],
                "array(seq)",
                f"format_string('P%d delivered %s %s, but it was sent %s', process, "
                f"{_m('mo', 'ms')}, {where.format('view')}, {where.format('sview')})",
            )
        )

    if "virtual_synchrony" in properties:
        # what each process delivered between installing V and V' (first delivery each)
        got = (
            deliveries.where("_sv IS NOT NULL AND _sn IS NOT NULL")
            .groupBy("run", "process", "_sv", "_sn", "mo", "ms")
            .agg(
                F.min("seq").alias("dseq"),
                F.first("sdest").alias("sdest"),
                F.first("_unsent").alias("_unsent"),
            )
        )
        others = successions.select(
            "run", F.col("v").alias("_sv"), F.col("nxt").alias("_sn"), F.col("process").alias("q")
        ).distinct()
        missed = (
            got.join(others, ["run", "_sv", "_sn"])
            .where(
                "q != process AND (_unsent OR (array_contains(sdest, process) "
                "AND array_contains(sdest, q)))"
            )
            .join(
                got.select("run", "_sv", "_sn", F.col("process").alias("q"), "mo", "ms"),
                ["run", "_sv", "_sn", "q", "mo", "ms"],
                "left_anti",
            )
        )
        parts.append(
            _violation(
                missed,
                "virtual_synchrony",
                "array(least(process, q), greatest(process, q))",
                [("mo", "ms")],
                "array(dseq)",
                f"format_string('P%d delivered %s in view %d and P%d did not; both installed "
                f"view %d next', process, {_m('mo', 'ms')}, _sv, q, _sn)",
            )
        )

    if "clock" in properties:
        parts.append(
            _violation(
                table.where("_cbad"),
                "clock",
                "array(process)",
                [("mo", "ms")],
                "array(seq)",
                "format_string('P%d event %d (%s %s): clock %s, expected %s', process, seq, kind, "
                f"{_m('mo', 'ms')}, _cvc, _cexp)",
            )
        )

    if parts:
        violations = parts[0]
        for part in parts[1:]:
            violations = violations.unionByName(part)
        # each part has the shuffle's partitions: as many in all as one shuffle has
        violations = violations.coalesce(_partitions(spark))
    else:
        violations = spark.createDataFrame([], VIOLATION_DDL)
    never_sent = deliveries.where("_unsent").select(
        F.lit("trace").alias("source"),
        F.lit(None).cast("long").alias("line"),
        "run",
        "process",
        "seq",
        F.expr(f"format_string('delivery of %s, which was never sent', {_m('mo', 'ms')})").alias(
            "reason"
        ),
    )
    # the rows the loader rejected, unless they are counted as the check reads the
    # trace (then read only if there is one)
    counted = observation is not None and loaded.split is not None
    invalid = never_sent if counted else loaded.invalid.unionByName(never_sent)
    violations = violations.persist(StorageLevel.MEMORY_AND_DISK)
    invalid = invalid.persist(StorageLevel.MEMORY_AND_DISK)
    # the one action: computes (and caches) every property's rows, the invalid rows and
    # the event and run counts, and brings back only the counts and first witnesses
    found = digest(violations, invalid, loaded.events if observation is None else None)
    if observation is not None:
        events, runs, rejected = _observed(observation, loaded)
        found = attrs.evolve(found, events=events, runs=runs)
        if counted and rejected:
            invalid.unpersist()
            invalid = loaded.invalid.unionByName(never_sent).persist(StorageLevel.MEMORY_AND_DISK)
            again = digest(spark.createDataFrame([], VIOLATION_DDL), invalid)
            found = attrs.evolve(
                found, invalid_count=again.invalid_count, invalid_first=again.invalid_first
            )
    counts = {p: found.counts.get(p, 0) for p in properties}
    table.unpersist()
    return SparkReport(
        tuple(properties), violations, invalid, counts, found.invalid_count, mode, found
    )


def _observe(split: Split) -> tuple[Any, Any]:
    """``split.rows``, counted by whatever action reads them: the events and runs
    ``split.events`` keeps, and the rows ``invalid`` reports.

    A count of its own would read the whole trace again, and so would the invalid
    rows (each about a tenth of a 1M-event check); Spark's observed metrics count
    the rows as the check's first shuffle reads them.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    good = F.expr(split.good)
    observed = split.rows.observe(
        observation,
        F.count_if(good).alias("events"),
        F.size(F.collect_set(F.when(good, F.col("run")))).alias("runs"),
        F.count_if(F.expr(split.bad)).alias("invalid"),
    )
    return observed, observation


def _observed(observation: Any, loaded: Loaded) -> tuple[int, int, int]:
    """The events, runs and invalid rows ``_observe`` counted, or counted now if the
    action did not read them (Spark may leave out a scan whose rows nothing needs)."""
    from pyspark.sql import functions as F

    done = observation._jo is not None and observation._jo.future().isCompleted()
    if done:
        try:
            got = observation.get
            return int(got["events"]), int(got["runs"]), int(got["invalid"])
        except Exception:  # the action that read them failed: count them again
            pass
    row = loaded.events.agg(F.count(F.lit(1)).alias("n"), F.countDistinct("run").alias("r")).first()
    return int(row["n"]), int(row["r"]), 1  # (1: read the invalid rows to know)


def _partitions(spark: Any) -> int:
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))


def empty_invalid(spark: Any) -> Any:
    return spark.createDataFrame([], INVALID_DDL)
