"""The tables every Spark check shares: violation rows, invalid rows and their columns.

The columns are declared once, in ``mailroom.trace.report`` (``VIOLATION_COLUMNS``,
``INVALID_COLUMNS``); the DDL strings here are derived from them, so the reference
engine's Parquet files and Spark's have one schema.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from mailroom.trace.report import INVALID_COLUMNS, VIOLATION_COLUMNS, ddl

VIOLATION_DDL = ddl(VIOLATION_COLUMNS)
INVALID_DDL = ddl(INVALID_COLUMNS)

_MSG = "format_string('P%d#%d', {0}, {1})"


def message_name(origin: str, seq: str) -> str:
    """SQL naming a message as the reference words it (``P0#2``), from two columns."""
    return _MSG.format(origin, seq)


def violation_rows(
    df: Any,
    prop: str,
    processes: str,
    messages: Sequence[tuple[str, str]],
    positions: str,
    reason: str,
) -> Any:
    """``df`` as violation rows of ``prop``: SQL for the processes and positions (arrays),
    the messages ((origin, seq) column pairs) and the reason."""
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


def renamed(df: Any, keep: Sequence[str], names: Mapping[str, str]) -> Any:
    """``df``'s columns ``keep`` as they are and ``names`` (new name -> column) renamed:
    one side of a self-join."""
    from pyspark.sql import functions as F

    return df.select(*keep, *(F.col(old).alias(new) for new, old in names.items()))


def union_all(parts: Sequence[Any]) -> Any:
    """The union (by column name) of one or more tables."""
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def empty_violations(spark: Any) -> Any:
    return spark.createDataFrame([], VIOLATION_DDL)


def empty_invalid(spark: Any) -> Any:
    return spark.createDataFrame([], INVALID_DDL)
