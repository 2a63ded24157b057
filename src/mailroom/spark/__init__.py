"""The trace pipeline on Apache Spark: load traces, compute or validate happens-before,
check every property of the registry (``mailroom.trace.properties``) at scale.

pyspark is imported only inside this package (and lazily, inside functions).
"""

from mailroom.spark.checks import (
    HB_MODES,
    MODES,
    PROPAGATIONS,
    SPARK_PROPERTIES,
    VIOLATION_DDL,
    SparkReport,
    check_trace,
    iterative_clocks,
    with_clocks,
)
from mailroom.spark.load import (
    EVENT_DDL,
    FORMATS,
    INVALID_DDL,
    Loaded,
    events_frame,
    load_trace,
    read_jsonl_frame,
    read_parquet_frame,
)
from mailroom.spark.session import get_session

__all__ = [
    "EVENT_DDL",
    "FORMATS",
    "HB_MODES",
    "INVALID_DDL",
    "MODES",
    "PROPAGATIONS",
    "SPARK_PROPERTIES",
    "VIOLATION_DDL",
    "Loaded",
    "SparkReport",
    "check_trace",
    "events_frame",
    "get_session",
    "iterative_clocks",
    "load_trace",
    "read_jsonl_frame",
    "read_parquet_frame",
    "with_clocks",
]
