"""Loading traces into Spark: the event table and the ``invalid`` table.

Rules, in words:

- Every format lands in one event table with the columns of ``EVENT_SCHEMA``:
  the trace schema (``mailroom.trace.events``) with the message id split into ``mo`` (origin) and
  ``ms`` (seq) and ``vc`` as a sparse map<long, long>; ``view`` (group
  membership) is null in traces that do not have it.
- A row that cannot be an event (missing field, unknown kind, negative or
  non-integer numbers, bad JSON) goes to the ``invalid`` table
  (``INVALID_SCHEMA``) with the reason, and is left out of the checks. A row
  whose only fault is a malformed clock is kept without its clock, and the
  clock is reported as invalid. Nothing is collected to the driver.
- JSON Lines are read by Spark's JSON parser with a schema, in the JVM: a row
  that is plainly valid (every field of its type, non-negative, a known kind,
  a clock of pid keys and counters) becomes an event with no Python involved.
  Any other line (malformed JSON, a wrong type, a missing field, a clock to
  repair) goes to ``Event.from_dict`` in Python, the same code as the
  reference reader, so the reasons read the same; such lines are rare. Line
  numbers of those lines are computed from the file's blocks (rows before the
  block plus the row's place in it), so no step numbers every line. The trace
  header line (``{"header": ...}``) is dropped, never an event nor invalid.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.spark.rows import INVALID_DDL
from mailroom.trace.events import KINDS, MAX_NUMBER, Event, TraceError, lone_surrogate
from mailroom.trace.jsonl import parse_row
from mailroom.trace.report import ddl

#: The event table's columns (Spark types): the trace schema with the message id split.
EVENT_COLUMNS = (
    ("run", "string"),
    ("process", "long"),
    ("seq", "long"),
    ("kind", "string"),
    ("mo", "long"),
    ("ms", "long"),
    ("sender", "long"),
    ("dest", "array<long>"),
    ("vc", "map<long,long>"),
    ("time", "double"),
    ("view", "long"),
)
EVENT_DDL = ddl(EVENT_COLUMNS)
#: The event table's column names, in order.
EVENT_DDL_COLUMNS = [name for name, _ in EVENT_COLUMNS]

FORMATS = ("jsonl", "parquet")
#: The event kinds as a SQL list.
_KIND_LIST = ", ".join(f"'{k}'" for k in KINDS)


@attrs.frozen
class Split:
    """How ``events`` and ``invalid`` come from one table of read rows: ``rows``, where
    ``good`` (SQL) marks the rows ``events(rows)`` keeps and ``bad`` those ``invalid``
    reports. A check that reads ``events`` once can count both kinds as it reads,
    and read ``invalid`` only if there is one (see ``mailroom.spark.checks``); it
    can look for clockless events on the few columns ``clockless`` reads."""

    rows: Any
    good: str
    bad: str
    events: Callable[[Any], Any]
    #: true on every row that becomes an event without a clock (and maybe others)
    clockless: str = "vc IS NULL"


@attrs.frozen
class Loaded:
    """A trace as Spark tables: ``events`` (checkable rows) and ``invalid`` (rejected
    rows), and how both come from one table of read rows when they do (``split``)."""

    events: Any
    invalid: Any
    split: Split | None = None


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
        e.view,
    )


def events_frame(spark: Any, events: Iterable[Event]) -> Loaded:
    """Events already in memory (tests, small traces) as a ``Loaded`` with no invalid rows."""
    rows = [event_tuple(e) for e in events]
    return Loaded(spark.createDataFrame(rows, EVENT_DDL), spark.createDataFrame([], INVALID_DDL))


def _number(value: Any) -> int | None:
    """``value`` if it is an integer a long column holds, else None."""
    return value if type(value) is int and -MAX_NUMBER - 1 <= value <= MAX_NUMBER else None


def _identity(row: Any) -> list[Any]:
    """The run, process and seq of a row, as far as they can be read."""
    if not isinstance(row, dict):
        return [None, None, None]
    run = None if row.get("run") is None else str(row["run"])
    text = None if run is None or lone_surrogate(run) else run
    return [text, _number(row.get("process")), _number(row.get("seq"))]


def _parse_line(item: tuple[tuple[str, str], int]) -> Iterator[tuple[str, tuple[Any, ...]]]:
    """An odd line (see the header): ("ok", event row) and/or ("bad", invalid row)."""
    (source, line), index = item
    if not line.strip():
        return
    lineno = index + 1
    try:
        row = parse_row(line)
    except TraceError as exc:
        yield ("bad", (source, lineno, None, None, None, str(exc)))
        return
    if isinstance(row, dict) and "header" in row:
        return  # the trace header: never an event
    ident = _identity(row)
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


#: What Spark's JSON parser reads of a line; anything it cannot type lands in ``_corrupt``.
_JSONL_SCHEMA = (
    "header string, run string, process long, seq long, kind string, message array<long>, "
    "sender long, dest array<long>, vc map<string,long>, time double, view long, "
    "_corrupt string"
)


def _source(names: dict[str, str], uri: str) -> str:
    """The path the user gave for a file Spark names by URI."""
    from urllib.parse import unquote, urlparse

    if uri in names:
        return names[uri]
    local = unquote(urlparse(uri).path)
    return next((p for u, p in names.items() if unquote(urlparse(u).path) == local), uri)


def read_jsonl_frame(spark: Any, paths: Sequence[str]) -> Loaded:
    """JSON Lines files as Spark tables: Spark's JSON parser, Python only for odd lines."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    text = (
        spark.read.text([str(p) for p in paths])
        .withColumn("_file", F.input_file_name())
        .withColumn("_block", F.input_file_block_start())
        .withColumn("_id", F.monotonically_increasing_id())
    )
    parsed = text.withColumn(
        "j",
        F.from_json(
            "value", _JSONL_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": "_corrupt"}
        ),
    )
    plain = F.expr(
        f"""j IS NOT NULL AND j._corrupt IS NULL AND j.header IS NULL
        AND value RLIKE '"run"\\s*:\\s*"'
        AND j.run IS NOT NULL AND j.process >= 0 AND j.seq >= 0 AND j.kind IN ({_KIND_LIST})
        AND size(j.message) = 2 AND j.message[0] >= 0 AND j.message[1] >= 0
        AND j.sender >= 0 AND j.dest IS NOT NULL AND forall(j.dest, d -> d >= 0)
        AND (j.vc IS NULL OR forall(map_entries(j.vc), e -> e.key RLIKE '^(0|[1-9][0-9]{{0,17}})$'
             AND e.value >= 0))
        AND (j.view IS NULL OR j.view >= 0) AND (j.kind != 'view' OR j.view IS NOT NULL)"""
    )
    # (a line that escapes a UTF-16 surrogate may hold a lone one: Python says why)
    plain = plain & ~F.col("value").rlike(r"\\u[dD][89a-fA-F]")
    blank = F.expr("trim(value) = ''")
    tagged = parsed.withColumn("_plain", F.coalesce(plain, F.lit(False)))
    events = tagged.where("_plain").select(
        *_event_columns(
            "j",
            F.col("j.message")[0],
            F.col("j.message")[1],
            F.expr("transform_keys(j.vc, (k, v) -> coalesce(try_cast(k AS long), -1L))"),
        )
    )
    odd = tagged.where(~F.col("_plain") & ~blank & F.expr("j.header IS NULL OR j IS NULL"))
    # the line number of an odd line: lines of the file's earlier blocks, plus its place
    # in its own block (ids are consecutive within a block)
    blocks = text.groupBy("_file", "_block").agg(
        F.count(F.lit(1)).alias("_rows"), F.min("_id").alias("_first")
    )
    before = (
        Window.partitionBy("_file").orderBy("_block").rowsBetween(Window.unboundedPreceding, -1)
    )
    blocks = blocks.withColumn("_skip", F.coalesce(F.sum("_rows").over(before), F.lit(0)))
    numbered = odd.join(blocks, ["_file", "_block"]).select(
        F.col("_file").alias("file"),
        "value",
        (F.col("_skip") + F.col("_id") - F.col("_first")).alias("line_index"),
    )
    names = {Path(p).resolve().as_uri(): str(p) for p in paths}
    odd_rows = (
        numbered.rdd.map(lambda r: ((_source(names, r.file), r.value), int(r.line_index)))
        .flatMap(_parse_line)
        .cache()
    )
    fixed = spark.createDataFrame(
        odd_rows.filter(lambda x: x[0] == "ok").map(lambda x: x[1]), EVENT_DDL
    )
    invalid = spark.createDataFrame(
        odd_rows.filter(lambda x: x[0] == "bad").map(lambda x: x[1]), INVALID_DDL
    )
    return Loaded(events.unionByName(fixed), invalid)


#: The Parquet trace's columns (``mailroom.trace.parquet``) as Spark types: a file
#: without one of them reads it as null.
_PARQUET_TYPES = {
    "run": "string",
    "process": "long",
    "seq": "long",
    "kind": "string",
    "message": "struct<origin:long,seq:long>",
    "sender": "long",
    "dest": "array<long>",
    "vc": "map<long,long>",
    "time": "double",
    "view": "long",
}

#: Why a Parquet row cannot be an event (the reference reader's words), or NULL.
_PARQUET_REASON = f"""CASE
    WHEN run IS NULL THEN "missing field 'run'"
    WHEN process IS NULL THEN "missing field 'process'"
    WHEN seq IS NULL THEN "missing field 'seq'"
    WHEN kind IS NULL THEN "missing field 'kind'"
    WHEN message IS NULL OR message.origin IS NULL OR message.seq IS NULL
        THEN "missing field 'message'"
    WHEN sender IS NULL THEN "missing field 'sender'"
    WHEN dest IS NULL THEN "missing field 'dest'"
    WHEN kind NOT IN ({_KIND_LIST}) THEN concat("unknown kind '", kind, "'")
    WHEN process < 0 THEN "field 'process' must be a non-negative integer"
    WHEN seq < 0 THEN "field 'seq' must be a non-negative integer"
    WHEN sender < 0 THEN "field 'sender' must be a non-negative integer"
    WHEN message.origin < 0 OR message.seq < 0 THEN "field 'message' must be [origin, seq]"
    WHEN exists(dest, d -> d IS NULL OR d < 0)
        THEN "field 'dest' must be a pid or a list of pids"
    WHEN view < 0 THEN "field 'view' must be a non-negative integer"
    WHEN kind = 'view' AND view IS NULL
        THEN "a 'view' event needs field 'view' (the view id)"
    END"""
#: A clock the checks cannot use (the row is kept without it).
_PARQUET_BAD_VC = (
    "vc IS NOT NULL AND exists(map_entries(vc), x -> x.key < 0 OR x.value IS NULL OR x.value < 0)"
)


def _event_columns(prefix: str, mo: Any, ms: Any, vc: Any) -> list[Any]:
    """The event table's columns, in order, from a table with the trace's field names
    under ``prefix`` and the given message id and clock columns."""
    from pyspark.sql import functions as F

    given = {"mo": mo, "ms": ms, "vc": vc}
    at = f"{prefix}." if prefix else ""
    return [given[n].alias(n) if n in given else F.col(at + n) for n in EVENT_DDL_COLUMNS]


def _parquet_events(rows: Any) -> Any:
    """The events of the tagged Parquet rows (those with no reason), bad clocks dropped."""
    from pyspark.sql import functions as F

    return rows.where("_reason IS NULL").select(
        *_event_columns(
            "",
            F.col("message.origin"),
            F.col("message.seq"),
            F.expr("CASE WHEN _badvc THEN NULL ELSE vc END"),
        )
    )


def read_parquet_frame(spark: Any, paths: Sequence[str]) -> Loaded:
    """Parquet traces (``mailroom.trace.parquet`` schema) as Spark tables, validated in SQL."""
    from pyspark.sql import functions as F

    raw = spark.read.parquet(*[str(p) for p in paths])
    for name, kind in _PARQUET_TYPES.items():
        if name not in raw.columns:
            raw = raw.withColumn(name, F.lit(None).cast(kind))
    tagged = (
        raw.withColumn("_line", F.monotonically_increasing_id() + 1)
        .withColumn("_source", F.input_file_name())
        .withColumn("_reason", F.expr(_PARQUET_REASON))
        .withColumn("_badvc", F.expr(_PARQUET_BAD_VC))
    )
    # one filter, so that Spark reads the files once for every invalid row
    invalid = tagged.where("_reason IS NOT NULL OR _badvc").select(
        F.col("_source").alias("source"),
        F.col("_line").alias("line"),
        "run",
        "process",
        "seq",
        F.coalesce(
            "_reason",
            F.lit("malformed clock: field 'vc' must map pids to non-negative counters"),
        ).alias("reason"),
    )
    split = Split(
        tagged,
        "_reason IS NULL",
        "_reason IS NOT NULL OR _badvc",
        _parquet_events,
        "vc IS NULL OR _badvc",
    )
    return Loaded(_parquet_events(tagged), invalid, split)


def has_views(loaded: Loaded) -> bool:
    """Whether the trace has a view event (group membership): one small action that
    stops at the first one."""
    return bool(loaded.events.where("kind = 'view'").select("kind").limit(1).collect())


def load_trace(spark: Any, paths: Sequence[str], fmt: str = "jsonl") -> Loaded:
    """Load trace files of format ``jsonl`` or ``parquet`` (ShiViz: ``mailroom.spark.shiviz``).

    A local path is made absolute here: Spark would resolve a relative one against the
    JVM's working directory, not the caller's."""
    paths = [p if "://" in p else str(Path(p).resolve()) for p in paths]
    if fmt == "jsonl":
        return read_jsonl_frame(spark, paths)
    if fmt == "parquet":
        return read_parquet_frame(spark, paths)
    raise ValueError(f"unknown format {fmt!r}; choose from {list(FORMATS)}")


__all__ = [
    "EVENT_COLUMNS",
    "EVENT_DDL",
    "EVENT_DDL_COLUMNS",
    "FORMATS",
    "INVALID_DDL",
    "Loaded",
    "Split",
    "event_tuple",
    "events_frame",
    "has_views",
    "load_trace",
    "read_jsonl_frame",
    "read_parquet_frame",
]
