"""ShiViz logs on Spark: the checks their clocks allow.

ShiViz logs have no message ids, so FIFO, total order, integrity and liveness
cannot be checked on them. What can be (property ``clock``), per execution:

- every record's clock has an entry for its own host;
- ordered by that entry (as ShiViz orders a host's events), a host's own entry
  steps by exactly one from 1;
- no entry goes down from one of a host's events to its next;
- an entry ``h: v`` for another host names an event that is in the log (h's
  event with own entry v), and that event's whole clock is entrywise at most
  this one (what it knew, this event knows: happens-before is transitive).

With ``send_regex`` and ``deliver_regex`` naming the message in a record's text
(``mailroom.trace.shiviz.to_events``), FIFO and causal delivery are checked too,
in full mode with the log's own clocks as happens-before; deliveries whose send
the regexes did not find are ``invalid`` rows. Verdicts use the log's names
(host ``node2``, message ``DataMessage(3)``), never mailroom's pids.
``SparkReport.checked`` says which properties were checked. The log is parsed
on the driver (ShiViz logs are small); the checks run in Spark, and the
violations, few by nature, are renamed on the driver.
"""

from __future__ import annotations

from typing import Any

import attrs

from mailroom.spark.checks import check_trace
from mailroom.spark.load import events_frame
from mailroom.spark.report import SparkReport, digest
from mailroom.spark.rows import INVALID_DDL, VIOLATION_DDL, union_all, violation_rows
from mailroom.trace.shiviz import LogNames, ShivizLog, log_events

SHIVIZ_DDL = "run string, host string, pid long, clock map<string,long>, line long"
#: Some entry of clock ``{0}`` is above the same entry of ``clock``.
_ABOVE = "exists(map_keys({0}), k -> {0}[k] > coalesce(try_element_at(clock, k), 0))"


def shiviz_frame(spark: Any, log: ShivizLog) -> Any:
    pids = {h: i for i, h in enumerate(log.hosts())}
    rows = [(e.execution, e.host, pids[e.host], dict(e.clock), e.line) for e in log.events]
    return spark.createDataFrame(rows, SHIVIZ_DDL)


def _clock_problems(spark: Any, log: ShivizLog) -> list[tuple[Any, str]]:
    """(the records with a problem, why in SQL), one pair per rule of the header."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ev = shiviz_frame(spark, log).withColumn("own", F.expr("try_element_at(clock, host)"))
    ev = ev.persist()
    w = Window.partitionBy("run", "host").orderBy("own", "line")
    seq = ev.where("own IS NOT NULL").withColumns(
        {"prev": F.lag("own").over(w), "pclock": F.lag("clock").over(w)}
    )
    refs = ev.select(
        "run", "host", "pid", "line", "clock", F.explode("clock").alias("h", "v")
    ).where("h != host")
    other = ev.select(
        "run",
        F.col("host").alias("h"),
        F.col("own").alias("v"),
        F.col("clock").alias("hclock"),
    )
    joined = refs.join(other, ["run", "h", "v"], "left")
    return [
        (ev.where("own IS NULL"), "'line %d: %s has no entry of its own in its clock', line, host"),
        (
            seq.where("own != coalesce(prev, 0) + 1"),
            "'line %d: %s''s own entry steps from %d to %d', line, host, coalesce(prev, 0), own",
        ),
        (
            seq.where(f"pclock IS NOT NULL AND {_ABOVE.format('pclock')}"),
            "'line %d: an entry of %s''s clock goes down', line, host",
        ),
        (
            joined.where("hclock IS NULL"),
            "'line %d: %s''s clock names event %d of %s, which is not in the log', "
            "line, host, v, h",
        ),
        (
            joined.where(f"hclock IS NOT NULL AND {_ABOVE.format('hclock')}"),
            "'line %d: %s knows event %d of %s but not all that it knew', line, host, v, h",
        ),
    ]


def clock_violations(spark: Any, log: ShivizLog) -> Any:
    """Violation rows (property ``clock``) of the log's vector clocks."""
    return union_all(
        [
            violation_rows(df, "clock", "array(pid)", [], "array(line)", f"format_string({why})")
            for df, why in _clock_problems(spark, log)
        ]
    )


def _renamed(spark: Any, violations: Any, names: LogNames) -> Any:
    """``violations`` with the log's host and message names in their reasons."""
    rows = [
        (r.property, r.run, r.processes, r.messages, r.positions, names.rename(r.run, r.reason))
        for r in violations.collect()
    ]
    return spark.createDataFrame(rows, VIOLATION_DDL)


def check_shiviz(
    spark: Any,
    log: ShivizLog,
    *,
    source: str = "log",
    send_regex: str | None = None,
    deliver_regex: str | None = None,
    sources: dict[str, str] | None = None,
) -> SparkReport:
    """Check a ShiViz log: its clocks, and FIFO and causal delivery when regexes name messages.

    An invalid row's source is ``source``, or ``sources[execution]`` when given (the file
    each execution came from, when several logs are checked together)."""
    violations = clock_violations(spark, log)
    checked: tuple[str, ...] = ("clock",)
    bad = list(log.invalid)
    if send_regex and deliver_regex:
        found = log_events(log, send_regex, deliver_regex)
        order = check_trace(
            spark, events_frame(spark, found.events), ("fifo", "causal"), mode="full", hb="given"
        )
        violations = violations.unionByName(_renamed(spark, order.violations, found.names))
        checked = ("clock", "fifo", "causal")
        bad += found.unmatched
    where = sources or {}
    invalid_rows = [
        (where.get(r.execution, source), r.line, r.execution, None, None, r.reason) for r in bad
    ]
    invalid = spark.createDataFrame(invalid_rows, INVALID_DDL).persist()
    violations = violations.persist()
    # a record is an event, an execution a run
    got = attrs.evolve(
        digest(violations, invalid), events=len(log.events), runs=len(log.executions)
    )
    counts = {p: got.counts.get(p, 0) for p in checked}
    return SparkReport(checked, violations, invalid, counts, got.invalid_count, "full", got)


__all__ = ["SHIVIZ_DDL", "VIOLATION_DDL", "check_shiviz", "clock_violations", "shiviz_frame"]
