"""Parquet traces: the trace schema as columns (needs the ``spark`` extra's pyarrow).

Columns: ``run`` string, ``process``/``seq``/``sender`` int64, ``kind`` string,
``message`` struct<origin int64, seq int64>, ``dest`` list<int64>, ``vc``
map<int64, int64> (sparse, null when absent), ``time`` float64 (nullable),
``payload`` string holding the payload as JSON (nullable), ``view`` int64
(nullable: the view of a membership run; a file without the column reads as
null everywhere). A trace's header
(``mailroom.trace.header``) is kept as JSON in the schema metadata under
``mailroom.header``. pyarrow is imported inside the functions, so
``mailroom.trace`` imports without it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from mailroom.core.extras import need
from mailroom.core.messages import MessageId
from mailroom.core.wire import plain
from mailroom.trace.events import Event, TraceError
from mailroom.trace.header import PARQUET_KEY, TraceHeader, read_header


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
            ("view", i64),
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
        "payload": None if e.payload is None else json.dumps(plain(e.payload)),
        "view": e.view,
    }


def write_parquet(
    events: Iterable[Event] | Iterable[dict[str, Any]],
    path: str | Path,
    batch: int = 100_000,
    *,
    header: TraceHeader | None = None,
) -> int:
    """Write events (or rows already in schema form) to one Parquet file; return the count.

    A ``header`` is stored in the schema metadata (``read_header`` reads it back).
    """
    pa = need("pyarrow", "writing a Parquet trace")
    import pyarrow.parquet as pq

    schema = parquet_schema()
    if header is not None:
        schema = schema.with_metadata({PARQUET_KEY: json.dumps(header.to_dict())})
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


def _batch_is_clean(batch: Any) -> bool:
    """Whether every row of a record batch passes ``Event.from_dict`` (checked column-wise)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from mailroom.trace.events import KINDS

    names = set(batch.schema.names)
    if not {"run", "process", "seq", "kind", "message", "sender", "dest"} <= names:
        return False
    col = batch.column

    def nonneg_ints(a: Any) -> bool:
        return bool(
            pa.types.is_integer(a.type)
            and a.null_count == 0
            and (len(a) == 0 or pc.min(a).as_py() >= 0)
        )

    message = col("message")
    if not pa.types.is_struct(message.type) or message.null_count:
        return False
    if {message.type.field(i).name for i in range(message.type.num_fields)} != {"origin", "seq"}:
        return False
    dest, kind = col("dest"), col("kind")
    ok = (
        col("run").null_count == 0
        and all(nonneg_ints(col(n)) for n in ("process", "seq", "sender"))
        and all(nonneg_ints(message.field(n)) for n in ("origin", "seq"))
        and pa.types.is_list(dest.type)
        and dest.null_count == 0
        and nonneg_ints(dest.values)
        and pa.types.is_string(kind.type)
        and kind.null_count == 0
        and bool(pc.all(pc.is_in(kind, value_set=pa.array(KINDS))).as_py())
    )
    if ok and "vc" in names:
        vc = col("vc")
        ok = pa.types.is_map(vc.type) and nonneg_ints(vc.keys) and nonneg_ints(vc.items)
    if ok and "time" in names:
        ok = pa.types.is_floating(col("time").type) or pa.types.is_integer(col("time").type)
    if ok:
        is_view = pc.equal(kind, "view")
        if "view" in names:
            view = col("view")
            valid = view.drop_null()
            ok = (
                pa.types.is_integer(view.type)
                and (len(valid) == 0 or pc.min(valid).as_py() >= 0)
                and not bool(pc.any(pc.and_(is_view, pc.is_null(view))).as_py())
            )
        else:
            ok = not bool(pc.any(is_view).as_py())
    return ok


def _clean_events(batch: Any) -> Iterator[Event]:
    """The events of a batch that ``_batch_is_clean`` passed, built column-wise."""
    names = set(batch.schema.names)
    n = batch.num_rows

    def values(name: str) -> list[Any]:
        return batch.column(name).to_pylist() if name in names else [None] * n

    message = batch.column("message")
    columns = zip(
        values("run"),
        values("process"),
        values("seq"),
        values("kind"),
        message.field("origin").to_pylist(),
        message.field("seq").to_pylist(),
        values("sender"),
        values("dest"),
        values("vc"),
        values("time"),
        values("payload"),
        values("view"),
        strict=True,
    )
    for run, process, seq, kind, origin, mseq, sender, dest, vc, time, payload, view in columns:
        yield Event(
            run=str(run),
            process=process,
            seq=seq,
            kind=kind,
            message=MessageId(origin, mseq),
            sender=sender,
            dest=dest,
            vc=None if vc is None else dict(vc),
            time=None if time is None else float(time),
            payload=None if payload is None else json.loads(payload),
            view=view,
        )


def iter_parquet(path: str | Path) -> Iterator[Event]:
    """Events of a Parquet trace in file order; TraceError names the first bad row.

    A batch whose columns pass the row checks as a whole (the usual case) is
    converted column by column; any other batch goes row by row through
    ``Event.from_dict``, so the error names the first bad row as before.
    """
    pq = need("pyarrow.parquet", "reading a Parquet trace")
    index = 0
    for batch in pq.ParquetFile(str(path)).iter_batches():
        if _batch_is_clean(batch):
            yield from _clean_events(batch)
            index += batch.num_rows
            continue
        for row in batch.to_pylist():
            index += 1
            try:
                yield Event.from_dict(_to_dict(row))
            except (TraceError, ValueError) as exc:
                raise TraceError(f"{path}: row {index}: {exc}") from None


def read_parquet(path: str | Path) -> list[Event]:
    """Read a whole Parquet trace into memory (use Spark for large ones)."""
    return list(iter_parquet(path))


def read_parquet_trace(path: str | Path) -> tuple[TraceHeader | None, list[Event]]:
    """The header (from the schema metadata, if any) and the events of a Parquet trace."""
    events = read_parquet(path)
    return read_header(path, "parquet"), events
