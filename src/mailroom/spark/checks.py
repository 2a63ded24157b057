"""The properties of ``mailroom.trace.properties`` checked on Spark, row for row like the
reference checkers.

``check_trace`` reads the registry: each property's Spark check (``mailroom.spark.rules``)
runs on one persisted table (``mailroom.spark.tables``), and ``mode="full"`` gives
exactly the reference's violation sets. Happens-before (``hb``): a run whose send and
deliver events all carry ``vc`` uses those clocks; any other run gets them computed
(``mailroom.spark.clocks``). Events the trace records wrongly (deliveries of messages
never sent, views the installations contradict) are rows of ``invalid``, as the rows
the loader rejected are.

Plan: two shuffles (by message, then by process) build the table that every property
reads, persisted once; total order shuffles the first deliveries of messages that two
or more processes delivered once more, for its pairs. One action (``digest``) computes
every property's rows and brings back the counts and first witnesses; nothing else is
collected to the driver. The trace is read once: the events, runs and rejected rows are
counted by an ``Observation`` as the first shuffle reads them (``_observe``), and the
rejected rows are read only if there is one. Where clocks are computed (the events are
then read twice) the digest counts them instead.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from mailroom.spark.clocks import HB_MODES, PROPAGATIONS, iterative_clocks, with_clocks
from mailroom.spark.load import EVENT_DDL_COLUMNS, Loaded, Split
from mailroom.spark.report import DIGEST_WITNESSES, Digest, SparkReport, digest
from mailroom.spark.rows import VIOLATION_DDL, empty_invalid, empty_violations, union_all
from mailroom.spark.rules.records import invalid_events
from mailroom.spark.tables import Tables, build_tables
from mailroom.trace.properties import CHECKABLE, PROPERTIES, REGISTRY, unknown

#: Every property the Spark engine checks (the registry's, ``clock`` included).
SPARK_PROPERTIES = CHECKABLE
MODES = ("summary", "full")
#: The rows the checks read: sends and deliveries (with their clocks) and view events.
_KINDS = "kind IN ('send', 'deliver', 'view')"


def spark_check(prop: str) -> Callable[[Tables], Any]:
    """The Spark check the registry names for ``prop``."""
    module, _, name = REGISTRY[prop].spark.partition(":")
    check: Callable[[Tables], Any] = getattr(importlib.import_module(module), name)
    return check


def _validate(properties: Sequence[str], mode: str, hb: str, propagation: str) -> None:
    why = unknown(properties, SPARK_PROPERTIES)
    if why:
        raise ValueError(why)
    for name, value, allowed in (
        ("mode", mode, MODES),
        ("hb", hb, HB_MODES),
        ("propagation", propagation, PROPAGATIONS),
    ):
        if value not in allowed:
            raise ValueError(f"{name} must be one of {list(allowed)}, got {value!r}")


def _clocked(
    spark: Any, loaded: Loaded, properties: Sequence[str], hb: str, propagation: str
) -> Any | None:
    """The rows with clocks computed for the runs that need them, or None when no
    property needs clocks or every run carries its own."""
    if not {"causal", "clock"} & set(properties):
        return None
    rows = loaded.events.where(_KINDS)
    app = rows.where("kind != 'view'")
    # (a Parquet trace is probed for clockless events before its rows are checked,
    # on the two columns that tell, not on every column the checks need)
    probe = None
    if loaded.split is not None:
        clockless = loaded.split.clockless
        probe = loaded.split.rows.where(f"kind IN ('send', 'deliver') AND ({clockless})")
    clocked = with_clocks(spark, app, hb, propagation, probe=probe)
    if clocked is app:
        return None
    return clocked.unionByName(rows.where("kind = 'view'"))


def _observe(split: Split) -> tuple[Any, Any]:
    """``split.rows``, counted by whatever action reads them: the events and runs
    ``split.events`` keeps, and the rows ``invalid`` reports.

    A count of its own would read the whole trace again, and so would the invalid
    rows (each about a tenth of a 1M-event check); Spark's observed metrics count
    the rows as the check's first shuffle reads them.
    """
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    observation = Observation()
    good = F.expr(split.good)
    observed = split.rows.observe(
        observation,
        F.count_if(good).alias("events"),
        F.size(F.collect_set(F.when(good, F.col("run")))).alias("runs"),
        F.count_if(F.expr(split.bad)).alias("invalid"),
    )
    return observed, observation


def _violations(spark: Any, tables: Tables) -> Any:
    """Every checked property's rows, as many partitions in all as one shuffle has."""
    from pyspark import StorageLevel

    if not tables.properties:
        return empty_violations(spark).persist(StorageLevel.MEMORY_AND_DISK)
    parts = [spark_check(p)(tables) for p in tables.properties]
    violations = union_all(parts).coalesce(_partitions(spark))
    return violations.persist(StorageLevel.MEMORY_AND_DISK)


def _counted(
    spark: Any, observation: Any, loaded: Loaded, found: Digest, invalid: Any, events: Any
) -> tuple[Digest, Any]:
    """The digest with the counts the observation made as the check read the trace, and
    the invalid rows with those the loader rejected, read now if there is one.

    The observation is complete: it watched the rows the persisted table was built from,
    which the digest's action read (every property reads that table)."""
    from pyspark import StorageLevel

    got = observation.get
    found = attrs.evolve(found, events=int(got["events"]), runs=int(got["runs"]))
    if not int(got["invalid"]):
        return found, invalid
    invalid.unpersist()
    invalid = loaded.invalid.unionByName(events).persist(StorageLevel.MEMORY_AND_DISK)
    again = digest(empty_violations(spark), invalid, rejected=loaded.invalid)
    return attrs.evolve(
        found,
        invalid_count=again.invalid_count,
        invalid_first=again.invalid_first,
        rejected=again.rejected,
        rejected_first=again.rejected_first,
    ), invalid


def check_trace(
    spark: Any,
    loaded: Loaded,
    properties: Sequence[str] = PROPERTIES,
    *,
    mode: str = "summary",
    hb: str = "auto",
    in_flight: float | None = None,
    propagation: str = "sequential",
    witnesses: int = DIGEST_WITNESSES,
) -> SparkReport:
    """Check ``properties`` (of ``SPARK_PROPERTIES``) on every run of ``loaded``, fetching
    ``witnesses`` witnesses of each with the counts (see the header)."""
    from pyspark import StorageLevel

    _validate(properties, mode, hb, propagation)
    rows = _clocked(spark, loaded, properties, hb, propagation)
    observation = None
    if rows is None and properties:
        # the events and runs are counted as the first shuffle reads them
        split = loaded.split or Split(loaded.events, "true", "false", lambda rows: rows)
        observed, observation = _observe(split)
        rows = split.events(observed).where(_KINDS)
    elif rows is None:
        rows = loaded.events.where(_KINDS)
    tables = build_tables(rows, properties, mode, in_flight, loaded)
    violations = _violations(spark, tables)
    events = invalid_events(tables)
    # the rows the loader rejected, unless they are counted as the check reads the trace
    # (then read only if there is one)
    counted = observation is not None and loaded.split is not None
    invalid = events if counted else loaded.invalid.unionByName(events)
    invalid = invalid.persist(StorageLevel.MEMORY_AND_DISK)
    # the one action: computes (and caches) every property's rows, the invalid rows and
    # the event and run counts, and brings back only the counts and first witnesses
    k = max(witnesses, DIGEST_WITNESSES)
    sizes = loaded.events if observation is None else None
    found = digest(violations, invalid, sizes, k, rejected=None if counted else loaded.invalid)
    if observation is not None:
        found, invalid = _counted(spark, observation, loaded, found, invalid, events)
    tables.table.unpersist()
    counts = {p: found.counts.get(p, 0) for p in properties}
    return SparkReport(
        tuple(properties), violations, invalid, counts, found.invalid_count, mode, found
    )


def _partitions(spark: Any) -> int:
    return max(1, int(spark.conf.get("spark.sql.shuffle.partitions")))


__all__ = [
    "DIGEST_WITNESSES",
    "EVENT_DDL_COLUMNS",
    "HB_MODES",
    "MODES",
    "PROPAGATIONS",
    "SPARK_PROPERTIES",
    "VIOLATION_DDL",
    "Digest",
    "SparkReport",
    "check_trace",
    "digest",
    "empty_invalid",
    "iterative_clocks",
    "spark_check",
    "with_clocks",
]
