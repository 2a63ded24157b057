"""Loading traces into Spark: the event table and the ``invalid`` table.

Rules, in words:

- Every format lands in one event table with the columns of ``EVENT_SCHEMA``:
  the DESIGN.md schema with the message id split into ``mo`` (origin) and
  ``ms`` (seq) and ``vc`` as a sparse map<long, long>.
- A row that cannot be an event (missing field, unknown kind, negative or
  non-integer numbers, bad JSON) goes to the ``invalid`` table
  (``INVALID_SCHEMA``) with the reason, and is left out of the checks. A row
  whose only fault is a malformed clock is kept without its clock, and the
  clock is reported as invalid. Nothing is collected to the driver.
- JSON Lines rows are validated by ``Event.from_dict``, the same code as the
  reference reader, so the reasons read the same.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import attrs

from mailroom.trace.events import KINDS, Event, TraceError

EVENT_DDL = (
    "run string, process long, seq long, kind string, mo long, ms long, sender long, "
    "dest array<long>, vc map<long,long>, time double"
)
INVALID_DDL = "source string, line long, run string, process long, seq long, reason string"

FORMATS = ("jsonl", "parquet")


@attrs.frozen
class Loaded:
    """A trace as Spark tables: ``events`` (checkable rows) and ``invalid`` (rejected rows)."""

    events: Any
    invalid: Any


def event_tuple(e: Event) -> tuple[Any, ...]:
    return (
        e.run,
        e.process,
        e.seq,
        e.kind,
        e.message.origin,
        e.message.seq,
        e.sender,
        list(e.dest),
        None if e.vc is None else dict(e.vc),
        e.time,
    )


def events_frame(spark: Any, events: Iterable[Event]) -> Loaded:
    """Events already in memory (tests, small traces) as a ``Loaded`` with no invalid rows."""
    rows = [event_tuple(e) for e in events]
    return Loaded(spark.createDataFrame(rows, EVENT_DDL), spark.createDataFrame([], INVALID_DDL))


def _parse_line(item: tuple[tuple[str, str], int]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    (source, line), index = item
    if not line.strip():
        return
    lineno = index + 1
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        yield ("bad", (source, lineno, None, None, None, f"not JSON ({exc.msg})"))
        return
    ident: list[Any] = [None, None, None]
    if isinstance(row, dict):
        run = row.get("run")
        ident = [
            None if run is None else str(run),
            row.get("process") if type(row.get("process")) is int else None,
            row.get("seq") if type(row.get("seq")) is int else None,
        ]
    try:
        event = Event.from_dict(row)
    except TraceError as exc:
        if not (isinstance(row, dict) and "'vc'" in str(exc)):
            yield ("bad", (source, lineno, *ident, str(exc)))
            return
        yield ("bad", (source, lineno, *ident, f"malformed clock: {exc}"))
        try:
            event = Event.from_dict({k: v for k, v in row.items() if k != "vc"})
        except TraceError as exc2:  # pragma: no cover - the vc was the first fault found
            yield ("bad", (source, lineno, *ident, str(exc2)))
            return
    yield ("ok", event_tuple(event))


def read_jsonl_frame(spark: Any, paths: Sequence[str]) -> Loaded:
    """JSON Lines files as Spark tables (parsed on the executors)."""
    sc = spark.sparkContext
    parts = [
        sc.textFile(str(p)).map(lambda line, src=str(p): (src, line)).zipWithIndex() for p in paths
    ]
    parsed = sc.union(parts).flatMap(_parse_line).cache()
    events = spark.createDataFrame(
        parsed.filter(lambda x: x[0] == "ok").map(lambda x: x[1]), EVENT_DDL
    )
    invalid = spark.createDataFrame(
        parsed.filter(lambda x: x[0] == "bad").map(lambda x: x[1]), INVALID_DDL
    )
    return Loaded(events, invalid)


def read_parquet_frame(spark: Any, paths: Sequence[str]) -> Loaded:
    """Parquet traces (``mailroom.trace.parquet`` schema) as Spark tables, validated in SQL."""
    from pyspark.sql import functions as F

    raw = spark.read.parquet(*[str(p) for p in paths])
    cols = set(raw.columns)
    for name in ("run", "process", "seq", "kind", "message", "sender", "dest", "vc", "time"):
        if name not in cols:
            default = "map<long,long>" if name == "vc" else "string"
            if name in ("process", "seq", "sender"):
                default = "long"
            elif name == "time":
                default = "double"
            elif name == "dest":
                default = "array<long>"
            elif name == "message":
                default = "struct<origin:long,seq:long>"
            raw = raw.withColumn(name, F.lit(None).cast(default))
    raw = raw.withColumn("_line", F.monotonically_increasing_id() + 1).withColumn(
        "_source", F.input_file_name()
    )
    kinds = ", ".join(f"'{k}'" for k in KINDS)
    reason = F.expr(
        f"""CASE
        WHEN run IS NULL THEN "missing field 'run'"
        WHEN process IS NULL THEN "missing field 'process'"
        WHEN seq IS NULL THEN "missing field 'seq'"
        WHEN kind IS NULL THEN "missing field 'kind'"
        WHEN message IS NULL OR message.origin IS NULL OR message.seq IS NULL
            THEN "missing field 'message'"
        WHEN sender IS NULL THEN "missing field 'sender'"
        WHEN dest IS NULL THEN "missing field 'dest'"
        WHEN kind NOT IN ({kinds}) THEN concat("unknown kind '", kind, "'")
        WHEN process < 0 THEN "field 'process' must be a non-negative integer"
        WHEN seq < 0 THEN "field 'seq' must be a non-negative integer"
        WHEN sender < 0 THEN "field 'sender' must be a non-negative integer"
        WHEN message.origin < 0 OR message.seq < 0 THEN "field 'message' must be [origin, seq]"
        WHEN exists(dest, d -> d IS NULL OR d < 0)
            THEN "field 'dest' must be a pid or a list of pids"
        END"""
    )
    bad_vc = F.expr(
        "vc IS NOT NULL AND exists(map_entries(vc), x -> x.key < 0 OR x.value IS NULL"
        " OR x.value < 0)"
    )
    tagged = raw.withColumn("_reason", reason).withColumn("_badvc", bad_vc)
    invalid_rows = tagged.where("_reason IS NOT NULL").select(
        F.col("_source").alias("source"),
        F.col("_line").alias("line"),
        "run",
        "process",
        "seq",
        F.col("_reason").alias("reason"),
    )
    invalid_vc = tagged.where("_reason IS NULL AND _badvc").select(
        F.col("_source").alias("source"),
        F.col("_line").alias("line"),
        "run",
        "process",
        "seq",
        F.lit("malformed clock: field 'vc' must map pids to non-negative counters").alias("reason"),
    )
    events = tagged.where("_reason IS NULL").select(
        "run",
        "process",
        "seq",
        "kind",
        F.col("message.origin").alias("mo"),
        F.col("message.seq").alias("ms"),
        "sender",
        "dest",
        F.expr("CASE WHEN _badvc THEN NULL ELSE vc END").alias("vc"),
        "time",
    )
    return Loaded(events, invalid_rows.unionByName(invalid_vc))


def load_trace(spark: Any, paths: Sequence[str], fmt: str = "jsonl") -> Loaded:
    """Load trace files of format ``jsonl`` or ``parquet`` (ShiViz: ``mailroom.spark.shiviz``)."""
    if fmt == "jsonl":
        return read_jsonl_frame(spark, paths)
    if fmt == "parquet":
        return read_parquet_frame(spark, paths)
    raise ValueError(f"unknown format {fmt!r}; choose from {list(FORMATS)}")
