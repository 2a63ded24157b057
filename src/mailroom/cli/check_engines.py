"""The two engines behind ``mailroom check``: each turns a ``Plan`` into a ``Checked``
(the verdict and how to write its rows) or a one-line reason the input cannot be used.

Both engines check the properties of the registry (``mailroom.trace.properties``) and
give their findings as a ``mailroom.trace.report.Verdict``, which the command prints
and writes with one writer, whatever the engine and the format (ShiViz logs included).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs

from mailroom.cli.check_inputs import (
    bad_row,
    first_line,
    has_rows,
    progress,
    read_events,
    read_logs,
)
from mailroom.trace.events import Event, TraceError
from mailroom.trace.properties import VIEW_PROPERTIES
from mailroom.trace.report import MODE_WORDS, Report, Verdict, reference_verdict, write_rows


@attrs.frozen
class Plan:
    """What to check, decided from the command line and the traces' headers."""

    traces: tuple[str, ...]
    fmt: str
    props: tuple[str, ...]
    not_promised: tuple[str, ...] = ()
    protocol: str | None = None
    #: no header and no --properties: the view properties too if the trace has view events
    views_by_default: bool = False
    mode: str = "summary"
    in_flight: float | None = None
    witnesses: int = 3
    master: str = "local[*]"
    propagation: str = "sequential"
    parser: str | None = None
    delimiter: str | None = None
    send_regex: str | None = None
    deliver_regex: str | None = None

    @property
    def shared(self) -> dict[str, Any]:
        """The options both engines' checks take."""
        return {"mode": self.mode, "in_flight": self.in_flight}


@attrs.frozen
class Checked:
    """What an engine found: the verdict, and how to write its rows to a report directory."""

    verdict: Verdict
    write_rows: Callable[[Path], None]


def _read(plan: Plan) -> list[Event] | str:
    """Every event of the plan's traces (reference readers), or a one-line error."""
    events: list[Event] = []
    for path in plan.traces:
        if Path(path).is_dir():
            return f"cannot read {path}: a Parquet directory needs --engine spark"
        progress(f"reading {path}")
        try:
            events += read_events(path, plan.fmt)
        except OSError as exc:
            return f"cannot read {path}: {exc.strerror or exc}"
        except ImportError:
            return "reading Parquet needs pyarrow (pip install 'mailroom[spark]')"
        except TraceError as exc:
            return first_line(exc)
        except Exception as exc:  # pyarrow reports an unreadable file as its own errors
            return f"cannot load {path} as {plan.fmt}: {first_line(exc)}"
    return events or f"no usable events in {', '.join(plan.traces)}"


def run_reference(plan: Plan) -> Checked | str:
    """The reference checkers, in memory."""
    from mailroom.trace.checkers import check

    if plan.fmt == "shiviz":
        return _reference_shiviz(plan)
    events = _read(plan)
    if isinstance(events, str):
        return events
    props = plan.props
    if plan.views_by_default and any(e.kind == "view" for e in events):
        props = (*props, *VIEW_PROPERTIES)
    progress(f"checking {len(events)} events")
    promised: dict[str, Any] = {"not_promised": plan.not_promised, "protocol": plan.protocol}
    report = check(events, props, **plan.shared, **promised)
    runs = len({e.run for e in events})
    head = (
        f"checked {len(events)} events in {runs} run(s) with the reference engine "
        f"({MODE_WORDS[plan.mode]})",
    )
    verdict = reference_verdict(report, len(events), runs, k=plan.witnesses, head=head)
    found = [v for p in report.checked for v in report.violations[p]]
    return Checked(verdict, partial(write_rows, violations=found, invalid=report.invalid))


def _reference_shiviz(plan: Plan) -> Checked | str:
    """ShiViz logs on the reference engine: the same checks and verdicts as on Spark."""
    from mailroom.trace.checkers import check
    from mailroom.trace.shiviz import clock_violations, log_events

    logs = read_logs(plan.traces, plan.parser, plan.delimiter)
    if isinstance(logs, str):
        return logs
    found = {"clock": clock_violations(logs.log)}
    unusable = list(logs.log.invalid)
    if plan.send_regex and plan.deliver_regex:
        try:
            named = log_events(logs.log, plan.send_regex, plan.deliver_regex)
        except TraceError as exc:
            return str(exc)
        for prop, vs in check(named.events, ("fifo", "causal")).violations.items():
            found[prop] = [attrs.evolve(v, reason=named.names.rename(v.run, v.reason)) for v in vs]
        unusable += named.unmatched
    report = Report(tuple(found), found, "full")
    invalid = logs.invalid(unusable)
    head = logs.head("the reference engine", report.checked)
    log = logs.log
    verdict = reference_verdict(
        report, len(log.events), len(log.executions), k=plan.witnesses, invalid=invalid, head=head
    )
    rows = [v for vs in found.values() for v in vs]
    return Checked(verdict, partial(write_rows, violations=rows, invalid=invalid))


def _session(plan: Plan) -> Any:
    """The SparkSession of the plan's master, or a one-line reason it cannot start."""
    from mailroom.spark import get_session
    from mailroom.spark.session import describe_error

    progress(f"starting Spark ({plan.master})")
    try:
        return get_session(plan.master)
    except Exception as exc:  # no Java, a bad master URL...
        return f"cannot start Spark at {plan.master}: {describe_error(exc)}"


def run_spark(plan: Plan) -> Checked | str:
    """The Spark engine (a local master or a cluster)."""
    from mailroom.spark import check_trace, load_trace
    from mailroom.spark.load import has_views
    from mailroom.spark.session import describe_error

    if plan.fmt == "shiviz":
        return _spark_shiviz(plan)
    if plan.fmt == "jsonl" and not any(has_rows(p) for p in plan.traces):
        return f"no usable events in {', '.join(plan.traces)}"
    start = time.perf_counter()
    spark = _session(plan)
    if isinstance(spark, str):
        return spark
    props = plan.props
    progress(f"checking {', '.join(plan.traces)}")
    try:  # the reader drops header lines; one action computes counts, witnesses, sizes
        loaded = load_trace(spark, list(plan.traces), plan.fmt)
        if plan.views_by_default and has_views(loaded):
            props = (*props, *VIEW_PROPERTIES)
        how: dict[str, Any] = {"propagation": plan.propagation, "witnesses": plan.witnesses}
        report = check_trace(spark, loaded, props, **plan.shared, **how)
    except Exception as exc:  # Spark reports unreadable input as assorted JVM errors
        return f"cannot load {', '.join(plan.traces)} as {plan.fmt}: {describe_error(exc)}"
    found = report.found
    assert found is not None  # check_trace always computes its digest
    if found.rejected_first:  # a row the reader rejects is exit 2, as in the reference
        return bad_row(*found.rejected_first[0], plan.traces, plan.fmt)
    if not found.events:
        return f"no usable events in {', '.join(plan.traces)}"
    head = (
        f"checked {found.events} events in {found.runs} run(s) on Spark {plan.master} "
        f"({MODE_WORDS[plan.mode]}) in {time.perf_counter() - start:.1f} s",
    )
    verdict = report.verdict(
        plan.witnesses, head=head, not_promised=plan.not_promised, protocol=plan.protocol
    )
    return Checked(verdict, report.write_rows)


def _spark_shiviz(plan: Plan) -> Checked | str:
    """ShiViz logs on Spark."""
    from mailroom.spark.shiviz import check_shiviz

    logs = read_logs(plan.traces, plan.parser, plan.delimiter)
    if isinstance(logs, str):
        return logs
    spark = _session(plan)
    if isinstance(spark, str):
        return spark
    try:
        report = check_shiviz(
            spark,
            logs.log,
            source=logs.source,
            sources=logs.sources,
            send_regex=plan.send_regex,
            deliver_regex=plan.deliver_regex,
        )
    except TraceError as exc:
        return str(exc)
    head = logs.head(f"Spark {plan.master}", report.checked)
    return Checked(report.verdict(plan.witnesses, head=head), report.write_rows)
