"""Parquet traces: the DESIGN.md schema as columns (needs the ``spark`` extra's pyarrow).

Columns: ``run`` string, ``process``/``seq``/``sender`` int64, ``kind`` string,
``message`` struct<origin int64, seq int64>, ``dest`` list<int64>, ``vc``
map<int64, int64> (sparse, null when absent), ``time`` float64 (nullable),
``payload`` string holding the payload as JSON (nullable). pyarrow is imported
inside the functions, so ``mailroom.trace`` imports without it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mailroom.trace.events import Event, TraceError


def parquet_schema() -> Any:
    """The pyarrow schema of a Parquet trace."""
    import pyarrow as pa

    i64 = pa.int64()
    return pa.schema(
        [
            ("run", pa.string()),
            ("process", i64),
            ("seq", i64),
            ("kind", pa.string()),
            ("message", pa.struct([("origin", i64), ("seq", i64)])),
            ("sender", i64),
            ("dest", pa.list_(i64)),
            ("vc", pa.map_(i64, i64)),
            ("time", pa.float64()),
            ("payload", pa.string()),
        ]
    )


def event_row(e: Event) -> dict[str, Any]:
    """One event as a row of ``parquet_schema()``."""
    return {
        "run": e.run,
        "process": e.process,
        "seq": e.seq,
        "kind": e.kind,
        "message": {"origin": e.message.origin, "seq": e.message.seq},
        "sender": e.sender,
        "dest": list(e.dest),
        "vc": None if e.vc is None else sorted(e.vc.items()),
        "time": e.time,
        "payload": None if e.payload is None else json.dumps(e.payload),
    }


def write_parquet(
    events: Iterable[Event] | Iterable[dict[str, Any]], path: str | Path, batch: int = 100_000
) -> int:
    """Write events (or rows already in schema form) to one Parquet file; return the count."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = parquet_schema()
    count = 0
    with pq.ParquetWriter(str(path), schema) as writer:
        rows: list[dict[str, Any]] = []
        for e in events:
            rows.append(event_row(e) if isinstance(e, Event) else e)
            if len(rows) >= batch:
                writer.write_table(pa.Table.from_pylist(rows, schema=schema))
                count += len(rows)
                rows = []
        if rows or count == 0:
            writer.write_table(pa.Table.from_pylist(rows, schema=schema))
            count += len(rows)
    return count


def _to_dict(row: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in row.items() if v is not None}
    message = row.get("message")
    if isinstance(message, dict):
        out["message"] = [message.get("origin"), message.get("seq")]
    if row.get("vc") is not None:
        out["vc"] = dict(row["vc"])
    if row.get("payload") is not None:
        out["payload"] = json.loads(row["payload"])
    return out


def iter_parquet(path: str | Path) -> Iterator[Event]:
    """Events of a Parquet trace in file order; TraceError names the first bad row."""
    import pyarrow.parquet as pq

    index = 0
    for batch in pq.ParquetFile(str(path)).iter_batches():
        for row in batch.to_pylist():
            index += 1
            try:
                yield Event.from_dict(_to_dict(row))
            except (TraceError, ValueError) as exc:
                raise TraceError(f"{path}: row {index}: {exc}") from None


def read_parquet(path: str | Path) -> list[Event]:
    """Read a whole Parquet trace into memory (use Spark for large ones)."""
    return list(iter_parquet(path))
