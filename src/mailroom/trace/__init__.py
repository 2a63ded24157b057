"""Traces: the event schema, JSON Lines, Parquet and ShiViz reading and writing, and the
reference checkers."""

from mailroom.trace.checkers import (
    CHECKERS,
    PROPERTIES,
    Report,
    Violation,
    check,
    check_causal,
    check_fifo,
    check_integrity,
    check_liveness,
    check_total,
    happened_before,
    send_clocks,
)
from mailroom.trace.events import KINDS, Event, TraceError
from mailroom.trace.jsonl import read_jsonl, write_jsonl
from mailroom.trace.parquet import read_parquet, write_parquet
from mailroom.trace.shiviz import (
    ShivizEvent,
    ShivizLog,
    neighbourhood,
    parse_shiviz,
    read_shiviz,
    write_shiviz,
)

__all__ = [
    "CHECKERS",
    "KINDS",
    "PROPERTIES",
    "Event",
    "Report",
    "ShivizEvent",
    "ShivizLog",
    "TraceError",
    "Violation",
    "check",
    "check_causal",
    "check_fifo",
    "check_integrity",
    "check_liveness",
    "check_total",
    "happened_before",
    "neighbourhood",
    "parse_shiviz",
    "read_jsonl",
    "read_parquet",
    "read_shiviz",
    "send_clocks",
    "write_jsonl",
    "write_parquet",
    "write_shiviz",
]
