"""Traces: the event schema, JSON Lines reading and writing, and the reference checkers."""

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

__all__ = [
    "CHECKERS",
    "KINDS",
    "PROPERTIES",
    "Event",
    "Report",
    "TraceError",
    "Violation",
    "check",
    "check_causal",
    "check_fifo",
    "check_integrity",
    "check_liveness",
    "check_total",
    "happened_before",
    "read_jsonl",
    "send_clocks",
    "write_jsonl",
]
