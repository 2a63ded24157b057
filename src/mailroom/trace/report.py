"""Reports: the reference engine's ``Report``, and the one report writer both engines use.

A ``Verdict`` is what a check found, whichever engine found it: the counts per
property, the first witnesses in ``witness_key`` order, the invalid rows, the
events and runs. ``Verdict.lines`` words it (the lines ``mailroom check``
prints), ``write_report`` writes it to a report directory: ``summary.json``,
``summary.txt``, and ``violations/`` and ``invalid/`` (written by the engine:
Parquet from pyarrow or Spark, with the columns ``VIOLATION_COLUMNS`` and
``INVALID_COLUMNS`` declared here once).

An invalid row (``mailroom.trace.records.InvalidRow``) is a row the checks could
not use, or an event the trace records wrongly: (source, line, run, process, seq,
reason). ``where`` words its place: ``FILE:LINE`` for a row of a file, ``run R``
for an event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.trace.properties import count_words
from mailroom.trace.records import InvalidRow
from mailroom.trace.violation import Violation, witness_key

#: The violation table's columns (Spark types), on both engines.
VIOLATION_COLUMNS = (
    ("property", "string"),
    ("run", "string"),
    ("processes", "array<long>"),
    ("messages", "array<struct<origin:long,seq:long>>"),
    ("positions", "array<long>"),
    ("reason", "string"),
)
#: The invalid table's columns (Spark types), on both engines.
INVALID_COLUMNS = (
    ("source", "string"),
    ("line", "long"),
    ("run", "string"),
    ("process", "long"),
    ("seq", "long"),
    ("reason", "string"),
)
#: The columns invalid rows are listed by (nulls first, as Spark sorts them).
INVALID_ORDER = ("source", "line", "run", "process", "seq", "reason")
#: How each mode is named in a report's first line.
MODE_WORDS = {
    "summary": "summary mode: one row per violating delivery",
    "full": "full mode: every violating pair",
}


def ddl(columns: Sequence[tuple[str, str]]) -> str:
    """Columns as a Spark DDL schema string."""
    return ", ".join(f"{name} {kind}" for name, kind in columns)


def arrow_schema(columns: Sequence[tuple[str, str]]) -> Any:
    """Columns as a pyarrow schema (needs pyarrow)."""
    import pyarrow as pa

    i64 = pa.int64()
    types = {
        "string": pa.string(),
        "long": i64,
        "array<long>": pa.list_(i64),
        "array<struct<origin:long,seq:long>>": pa.list_(pa.struct([("origin", i64), ("seq", i64)])),
    }
    return pa.schema([(name, types[kind]) for name, kind in columns])


def violation_row(v: Violation) -> dict[str, Any]:
    """A violation as a row of ``VIOLATION_COLUMNS``."""
    return {
        "property": v.property,
        "run": v.run,
        "processes": list(v.processes),
        "messages": [{"origin": m.origin, "seq": m.seq} for m in v.messages],
        "positions": list(v.positions),
        "reason": v.reason,
    }


def not_promised_lines(props: Iterable[str], protocol: str | None) -> list[str]:
    """The lines naming properties that were not checked because nothing promised them."""
    by = f" by {protocol}" if protocol else ""
    return [f"{prop:10s} not promised{by} (not checked)" for prop in props]


def property_lines(
    checked: Sequence[str], counts: dict[str, int], mode: str, witnesses: dict[str, list[str]]
) -> list[str]:
    """One line per property (its count in words, or "ok"), each followed by its witnesses."""
    lines = []
    for prop in checked:
        lines.append(f"{prop:10s} {count_words(prop, mode, counts.get(prop, 0))}")
        lines.extend(f"    {w}" for w in witnesses.get(prop, []))
    return lines


@attrs.frozen
class Report:
    """Violations per property for the properties that were checked (reference engine).

    ``mode`` says what a count counts (see ``count_words``); ``not_promised``
    lists properties left unchecked because the trace's protocol does not
    promise them (shown, never a failure); ``protocol`` names that protocol.
    ``invalid`` holds the events the trace records wrongly (``mailroom.trace.records``:
    deliveries of messages never sent, views that the installations contradict),
    which ``mailroom check`` reports; ``ok`` speaks of the violations alone.
    """

    checked: tuple[str, ...]
    violations: dict[str, list[Violation]]
    mode: str = "full"
    not_promised: tuple[str, ...] = ()
    protocol: str | None = None
    invalid: tuple[InvalidRow, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())

    def count(self, prop: str) -> int:
        return len(self.violations.get(prop, []))

    def first(self, prop: str, k: int = 3) -> list[Violation]:
        """The first ``k`` violations of ``prop`` in ``witness_key`` order."""
        return sorted(self.violations.get(prop, []), key=witness_key)[: max(0, k)]

    def summary(self, k: int = 3) -> str:
        """One line per property (its count in words, or "ok"), with up to ``k`` witnesses."""
        counts = {p: self.count(p) for p in self.checked}
        witnesses = {p: [v.reason for v in self.first(p, k)] for p in self.checked}
        lines = property_lines(self.checked, counts, self.mode, witnesses)
        lines.extend(not_promised_lines(self.not_promised, self.protocol))
        return "\n".join(lines)


@attrs.frozen
class Verdict:
    """What a check found, whichever engine found it: what ``mailroom check`` prints and
    writes. ``witnesses`` holds each property's first (run, reason) pairs and
    ``invalid_first`` the first (where, reason) pairs, in the reports' order."""

    engine: str
    mode: str
    checked: tuple[str, ...]
    counts: dict[str, int]
    witnesses: dict[str, list[tuple[str, str]]]
    invalid: int
    invalid_first: list[tuple[str, str]]
    events: int
    runs: int
    not_promised: tuple[str, ...] = ()
    protocol: str | None = None
    #: the lines printed before the verdict (what was checked, where)
    head: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not any(self.counts.values()) and not self.invalid

    def lines(self, k: int = 3) -> list[str]:
        """The verdict in words, ``k`` witnesses per property and invalid rows at most."""
        k = max(0, k)
        witnesses = {p: [f"run {r}: {why}" for r, why in w[:k]] for p, w in self.witnesses.items()}
        lines = property_lines(self.checked, self.counts, self.mode, witnesses)
        lines.extend(not_promised_lines(self.not_promised, self.protocol))
        lines.append(f"{'invalid':10s} {self.invalid} row(s)")
        lines.extend(f"    {where}: {why}" for where, why in self.invalid_first[:k])
        return lines

    def summary(self) -> dict[str, Any]:
        """``summary.json``."""
        return {
            "engine": self.engine,
            "mode": self.mode,
            "checked": list(self.checked),
            "violations": {p: self.counts.get(p, 0) for p in self.checked},
            "invalid": self.invalid,
            "not_promised": list(self.not_promised),
            "protocol": self.protocol,
            "events": self.events,
            "runs": self.runs,
        }


def reference_verdict(
    report: Report,
    events: int,
    runs: int,
    *,
    k: int,
    invalid: Sequence[InvalidRow] | None = None,
    head: Sequence[str] = (),
) -> Verdict:
    """The verdict of a reference ``Report`` (and its invalid rows, unless others are given)."""
    invalid = report.invalid if invalid is None else invalid
    return Verdict(
        "reference",
        report.mode,
        report.checked,
        {p: report.count(p) for p in report.checked},
        {p: [(v.run, v.reason) for v in report.first(p, k)] for p in report.checked},
        len(invalid),
        [(r.where(), r.reason) for r in sorted(invalid, key=InvalidRow.key)[: max(0, k)]],
        events,
        runs,
        report.not_promised,
        report.protocol,
        tuple(head),
    )


def write_report(
    out: str | Path, verdict: Verdict, write_rows: Callable[[Path], None], k: int = 3
) -> None:
    """Write ``verdict`` to the directory ``out``: ``summary.json``, ``summary.txt`` (its
    head and lines, ``k`` witnesses each), and the rows ``write_rows(out)`` writes
    (``violations/`` and ``invalid/``). Raises what the file system or the engine does."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out)
    (out / "summary.json").write_text(json.dumps(verdict.summary(), indent=2) + "\n")
    text = [*verdict.head, *verdict.lines(k)]
    (out / "summary.txt").write_text("\n".join(text) + "\n", encoding="utf-8")


def write_rows(out: Path, violations: Iterable[Violation], invalid: Iterable[InvalidRow]) -> None:
    """``violations/`` and ``invalid/`` of a reference check as Parquet, or as JSON Lines
    files when pyarrow is not installed."""
    tables = {
        "violations": (VIOLATION_COLUMNS, [violation_row(v) for v in violations]),
        "invalid": (INVALID_COLUMNS, [attrs.asdict(r) for r in invalid]),
    }
    for name in tables:
        (out / name).mkdir(parents=True, exist_ok=True)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        for name, (_, rows) in tables.items():
            with open(out / name / "part-00000.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        return
    for name, (columns, rows) in tables.items():
        table = pa.Table.from_pylist(rows, schema=arrow_schema(columns))
        pq.write_table(table, out / name / "part-00000.parquet")
