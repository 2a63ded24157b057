"""Traces: the event schema, JSON Lines, Parquet and ShiViz reading and writing, and the
reference checkers."""

from mailroom.trace.checkers import (
    ALL_PROPERTIES,
    CHECKERS,
    PROPERTIES,
    VIEW_PROPERTIES,
    Report,
    Violation,
    check,
    check_causal,
    check_fifo,
    check_integrity,
    check_liveness,
    check_same_view,
    check_self_inclusion,
    check_total,
    check_view_agreement,
    check_virtual_synchrony,
    happened_before,
    send_clocks,
)
from mailroom.trace.events import KINDS, Event, TraceError
from mailroom.trace.header import TraceHeader, read_header
from mailroom.trace.jsonl import read_jsonl, read_jsonl_trace, write_jsonl
from mailroom.trace.parquet import read_parquet, read_parquet_trace, write_parquet
from mailroom.trace.shiviz import (
    ShivizEvent,
    ShivizLog,
    neighbourhood,
    parse_shiviz,
    read_shiviz,
    write_shiviz,
)

__all__ = [
    "ALL_PROPERTIES",
    "CHECKERS",
    "KINDS",
    "PROPERTIES",
    "VIEW_PROPERTIES",
    "Event",
    "Report",
    "ShivizEvent",
    "ShivizLog",
    "TraceError",
    "TraceHeader",
    "Violation",
    "check",
    "check_causal",
    "check_fifo",
    "check_integrity",
    "check_liveness",
    "check_same_view",
    "check_self_inclusion",
    "check_total",
    "check_view_agreement",
    "check_virtual_synchrony",
    "happened_before",
    "neighbourhood",
    "parse_shiviz",
    "read_header",
    "read_jsonl",
    "read_jsonl_trace",
    "read_parquet",
    "read_parquet_trace",
    "read_shiviz",
    "send_clocks",
    "write_jsonl",
    "write_parquet",
    "write_shiviz",
]
