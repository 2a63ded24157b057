"""What a Spark check returns: the violation and invalid tables, and what printing and
writing them needs, fetched in one action (``digest``).

Witnesses come in the order of ``mailroom.trace.violation.WITNESS_ORDER`` and invalid
rows in ``mailroom.trace.report.INVALID_ORDER``, the reference engine's orders, so
both engines print the same lines for the same trace. The report directory is written
by ``mailroom.trace.report.write_report``, the one writer of both engines.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from mailroom.trace.report import INVALID_ORDER, Verdict, write_report
from mailroom.trace.violation import WITNESS_ORDER

#: Witnesses per property (and invalid rows) fetched with the counts, in the one action.
DIGEST_WITNESSES = 10
#: The keys of the digest's rows that are not properties.
_INVALID, _REJECTED, _EVENTS = "\u0000invalid", "\u0000rejected", "\u0000events"
#: Where an invalid row is, as the reference words it (``FILE:LINE`` or ``run R``).
_WHERE = "CASE WHEN line IS NOT NULL THEN concat(source, ':', line) ELSE concat('run ', run) END"


@attrs.frozen
class Digest:
    """What the report prints, fetched in one Spark action: counts and first witnesses.

    ``invalid_count`` and ``invalid_first`` cover every invalid row; ``rejected`` and
    ``rejected_first`` the rows the loader rejected (not the events the trace records
    wrongly: deliveries never sent, misrecorded views)."""

    counts: dict[str, int]
    witnesses: dict[str, list[tuple[str, str]]]  # property -> [(run, reason)], in order
    invalid_count: int
    invalid_first: list[tuple[str, str]]  # [(where, reason)], in INVALID_ORDER
    events: int | None = None
    runs: int | None = None
    rejected: int = 0
    rejected_first: list[tuple[str, str]] = attrs.field(factory=list)


def _ranked(df: Any, kind: Any, by: Any, order: Sequence[str], a: Any, b: Any, k: int) -> Any:
    """The first ``k`` rows of each ``by`` group in ``order``, with the group's size."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    window = Window.partitionBy(by)
    return df.select(
        kind.alias("digest_kind"),
        F.count(F.lit(1)).over(window).alias("group_size"),
        F.row_number().over(window.orderBy(*order)).alias("witness_rank"),
        a.alias("field_a"),
        b.alias("field_b"),
        F.lit(None).cast("long").alias("run_count"),
    ).where(f"witness_rank <= {int(k)}")


def _sizes(events: Any) -> Any:
    """The events and runs of ``events``, as one digest row."""
    from pyspark.sql import functions as F

    return events.agg(
        F.lit(_EVENTS).alias("digest_kind"),
        F.count(F.lit(1)).alias("group_size"),
        F.lit(1).alias("witness_rank"),
        F.lit(None).cast("string").alias("field_a"),
        F.lit(None).cast("string").alias("field_b"),
        F.countDistinct("run").alias("run_count"),
    )


def digest(
    violations: Any,
    invalid: Any,
    events: Any | None = None,
    k: int = DIGEST_WITNESSES,
    *,
    rejected: Any | None = None,
) -> Digest:
    """Counts per property, the first ``k`` witnesses of each and of ``invalid``, the
    events and runs of ``events``, and the count and first rows of ``rejected`` (the rows
    of ``invalid`` the loader rejected, when there may be some): one collect."""
    from pyspark.sql import functions as F

    where, why = F.expr(_WHERE), F.col("reason")
    rows = _ranked(
        violations, F.col("property"), "property", WITNESS_ORDER, F.col("run"), why, k
    ).unionByName(_ranked(invalid, F.lit(_INVALID), F.lit(1), INVALID_ORDER, where, why, k))
    if rejected is not None:
        rows = rows.unionByName(
            _ranked(rejected, F.lit(_REJECTED), F.lit(1), INVALID_ORDER, where, why, k)
        )
    if events is not None:
        rows = rows.unionByName(_sizes(events))
    counts: dict[str, int] = {}
    ranked: dict[str, list[tuple[int, str, str]]] = {}
    sizes: tuple[int | None, int | None] = (None, None)
    for r in rows.collect():
        if r.digest_kind == _EVENTS:
            sizes = int(r.group_size), int(r.run_count)
            continue
        counts[r.digest_kind] = int(r.group_size)
        ranked.setdefault(r.digest_kind, []).append((int(r.witness_rank), r.field_a, r.field_b))
    firsts = {kind: [(a, b) for _, a, b in sorted(got)] for kind, got in ranked.items()}
    special = (_INVALID, _REJECTED)
    return Digest(
        {p: n for p, n in counts.items() if p not in special},
        {p: w for p, w in firsts.items() if p not in special},
        counts.get(_INVALID, 0),
        firsts.get(_INVALID, []),
        *sizes,
        counts.get(_REJECTED, 0),
        firsts.get(_REJECTED, []),
    )


@attrs.frozen
class SparkReport:
    """Violation rows (``VIOLATION_DDL``), invalid rows and counts per checked property.

    ``violations`` and ``invalid`` are persisted; ``summary`` and the counts come
    from one action (``digest``), so printing and writing the report never
    recompute the checks.
    """

    checked: tuple[str, ...]
    violations: Any
    invalid: Any
    counts: dict[str, int]
    invalid_count: int
    mode: str
    found: Digest | None = None

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    @property
    def events(self) -> int | None:
        """Events in the checked trace (receives included), counted in the digest's action."""
        return None if self.found is None else self.found.events

    @property
    def runs(self) -> int | None:
        return None if self.found is None else self.found.runs

    def first(self, prop: str, k: int = 3) -> list[Any]:
        """The first ``k`` violations of ``prop`` (in ``WITNESS_ORDER``)."""
        rows = self.violations.where(f"property = '{prop}'").orderBy(*WITNESS_ORDER)
        return list(rows.limit(max(0, k)).collect())

    def digested(self, k: int = 3) -> Digest:
        """The digest, fetched again only when it holds fewer than ``k`` witnesses."""
        if self.found is not None and k <= DIGEST_WITNESSES:
            return self.found
        return digest(self.violations, self.invalid, k=max(k, DIGEST_WITNESSES))

    def verdict(
        self,
        k: int = 3,
        *,
        head: Sequence[str] = (),
        not_promised: Sequence[str] = (),
        protocol: str | None = None,
    ) -> Verdict:
        """The report as ``mailroom.trace.report`` words and writes it (``k`` witnesses)."""
        found = self.digested(k)
        return Verdict(
            "spark",
            self.mode,
            self.checked,
            {p: self.counts.get(p, 0) for p in self.checked},
            {p: found.witnesses.get(p, [])[: max(0, k)] for p in self.checked},
            self.invalid_count,
            found.invalid_first[: max(0, k)],
            found.events or 0,
            found.runs or 0,
            tuple(not_promised),
            protocol,
            tuple(head),
        )

    def summary(self, k: int = 3) -> str:
        return "\n".join(self.verdict(k).lines(k))

    def write_rows(self, out: Path) -> None:
        """``violations/`` and ``invalid/`` (Parquet) in ``out``."""
        self.violations.write.mode("overwrite").parquet(str(out / "violations"))
        self.invalid.write.mode("overwrite").parquet(str(out / "invalid"))

    def write(self, out: str | Path, k: int = 3) -> None:
        """Write ``violations/`` and ``invalid/`` (Parquet), ``summary.json`` and
        ``summary.txt`` (with ``k`` witnesses per property) to ``out``."""
        write_report(out, self.verdict(k), self.write_rows, k)
