"""What produced a trace: the header a JSON Lines or Parquet trace may carry.

A JSON Lines trace's first line may be ``{"header": {...}}`` (a row with a
"header" key is never an event); a Parquet trace keeps the same JSON in its
schema metadata under ``mailroom.header``; ShiViz logs have none. The header
names the producer, the protocol, the properties that protocol promises, the
number of processes and the simulator's settings, so that ``mailroom check``
checks what the protocol promises and nothing else.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from mailroom.trace.events import TraceError, lone_surrogate

#: The key of the Parquet schema metadata that holds the header's JSON.
PARQUET_KEY = b"mailroom.header"
#: A header line longer than this is not read (a header is a few hundred bytes).
MAX_HEADER_BYTES = 1 << 16


def _promises(value: Any) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen
class TraceHeader:
    """Who wrote a trace, of which protocol, promising what, for how many processes."""

    producer: str
    protocol: str | None = None
    promises: tuple[str, ...] = attrs.field(default=(), converter=_promises)
    n: int | None = None
    settings: dict[str, Any] = attrs.field(factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "producer": self.producer,
            "protocol": self.protocol,
            "promises": list(self.promises),
            "n": self.n,
            "settings": dict(self.settings),
        }

    def to_line(self) -> str:
        """The header as the first line of a JSON Lines trace (without the newline)."""
        return json.dumps({"header": self.to_dict()}, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_dict(cls, data: object) -> TraceHeader:
        """Parse a header object; TraceError says what is wrong."""
        if not isinstance(data, dict):
            raise TraceError("the header must be an object")
        producer = data.get("producer")
        if not isinstance(producer, str):
            raise TraceError("header field 'producer' must be a string")
        protocol = data.get("protocol")
        if protocol is not None and not isinstance(protocol, str):
            raise TraceError("header field 'protocol' must be a string or null")
        promises = data.get("promises", [])
        if not isinstance(promises, list) or not all(isinstance(p, str) for p in promises):
            raise TraceError("header field 'promises' must be a list of property names")
        n = data.get("n")
        if n is not None and (type(n) is not int or n < 1):
            raise TraceError("header field 'n' must be a positive integer or null")
        settings = data.get("settings", {})
        if not isinstance(settings, dict):
            raise TraceError("header field 'settings' must be an object")
        if any(lone_surrogate(t) for t in (producer, protocol or "", *promises)):
            raise TraceError("the header is not text (it holds a lone surrogate)")
        return cls(producer, protocol, tuple(promises), n, settings)


def header_of_row(row: object) -> TraceHeader | None:
    """The header if ``row`` (one parsed JSON line) is a header line, else None."""
    if isinstance(row, dict) and "header" in row:
        return TraceHeader.from_dict(row["header"])
    return None


def _jsonl_header(path: Path) -> TraceHeader | None:
    with open(path, "rb") as src:
        while True:
            line = src.readline(MAX_HEADER_BYTES)
            if not line or len(line) >= MAX_HEADER_BYTES:
                return None
            if line.strip():
                break
    if b'"header"' not in line:
        return None
    try:
        return header_of_row(json.loads(line))
    except (ValueError, RecursionError):
        return None


def _parquet_header(path: Path) -> TraceHeader | None:
    import pyarrow.parquet as pq

    try:
        meta = pq.read_schema(str(path)).metadata or {}
    except Exception:  # not a Parquet file: the reader will say so
        return None
    raw = meta.get(PARQUET_KEY)
    if raw is None:
        return None
    try:
        return TraceHeader.from_dict(json.loads(raw))
    except (ValueError, TraceError):
        return None


def read_header(path: str | Path, fmt: str | None = None) -> TraceHeader | None:
    """The header of a trace file, read cheaply (first line or Parquet metadata), or None.

    ``fmt`` is "jsonl", "parquet" or "shiviz"; without it a ``.parquet`` file is
    read as Parquet (needs pyarrow), a ``.log`` (ShiViz) has none, anything else
    is read as JSON Lines. A malformed header reads as None: the trace's readers
    report it with its line.
    """
    p = Path(path)
    if fmt is None:
        fmt = {".parquet": "parquet", ".log": "shiviz"}.get(p.suffix, "jsonl")
    if fmt == "shiviz" or not p.is_file():
        return None
    if fmt == "parquet":
        try:
            return _parquet_header(p)
        except ImportError:
            return None
    try:
        return _jsonl_header(p)
    except OSError:
        return None
