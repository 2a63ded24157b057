"""``mailroom check TRACE...``: check traces with the reference checkers or on Spark.

What is checked: ``--properties`` if given; else what the trace's header says
its protocol promises (``mailroom.trace.header``); else the five ordering
properties, plus the four view properties (group membership) when the trace has
view events. The properties a header's protocol does not promise are shown as
"not promised" and never fail the check (the view properties only when the
header promises some: a trace of a run without membership does not list them).

Engines: ``reference`` (pure Python, in memory), ``spark`` (local or a cluster)
and ``auto`` (the default): the reference engine for JSON Lines and Parquet
traces up to ``AUTO_LIMIT_BYTES`` in all, Spark for larger traces, ShiViz logs
and the ``clock`` property. Both engines print the same lines, counts and exit
codes for the same trace and mode, and write the same report files with ``--out``
(no report directory is written without it).

Exit codes: 0 when no checked property is violated and no row is invalid, 1
when there are violations, 2 when the input cannot be used (a file that does not
exist or cannot be read, a malformed row, named with its line, a bad regex, no
event at all), with a one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mailroom.trace.checkers import (
    ALL_PROPERTIES as TRACE_PROPERTIES,
)
from mailroom.trace.checkers import (
    PROPERTIES,
    VIEW_PROPERTIES,
    Report,
    count_words,
    not_promised_lines,
)
from mailroom.trace.events import TraceError
from mailroom.trace.header import TraceHeader, read_header

FORMATS = ("auto", "jsonl", "parquet", "shiviz")
ALL_PROPERTIES = (*TRACE_PROPERTIES, "clock")
ENGINES = ("auto", "reference", "spark")
#: ``--engine auto`` checks traces up to this many bytes (all files together) with the
#: reference engine, Spark beyond. Measured on the project's 2-core machine (see
#: docs/getting-started.md, "Checking a trace"): the reference engine checked an
#: 18 MB trace (96,000 events) in 7.7 s where Spark took 124 s, and a 65 MB trace
#: (336,000 events) in 86 s with 334 MB of memory; so below this size the reference
#: is the faster engine, and the limit bounds its memory (about 5 bytes per byte).
AUTO_LIMIT_BYTES = 64 * 1024 * 1024
MODE_WORDS = {
    "summary": "summary mode: one row per violating delivery",
    "full": "full mode: every violating pair",
}


def add_check_parser(sub: Any) -> argparse.ArgumentParser:
    chk: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="check traces for the properties their protocol promises",
        description="Check traces for integrity, FIFO, causal and total order, liveness "
        "(and vector clocks on Spark), and for group membership runs view agreement, "
        "self-inclusion, same-view delivery and virtual synchrony. By default the "
        "properties the trace's header says its protocol promises are checked; the "
        "others are shown as 'not "
        "promised'. --engine auto (the default) uses the reference checkers for "
        f"traces up to {AUTO_LIMIT_BYTES >> 20} MB and Spark beyond (measured: the "
        "reference engine is faster below that size; the limit bounds its memory, "
        "about 5 bytes per byte of trace; see docs/getting-started.md).",
    )
    chk.add_argument("traces", nargs="+", help="trace files (JSON Lines, Parquet or ShiViz logs)")
    chk.add_argument(
        "--format",
        choices=FORMATS,
        default="auto",
        help="input format (auto: .parquet is Parquet, .log is ShiViz, anything else JSON Lines)",
    )
    chk.add_argument(
        "--properties",
        type=str.lower,
        default=None,
        help="comma-separated properties to check, from "
        f"{', '.join(ALL_PROPERTIES)} (default: what the trace's protocol promises, "
        "or the five ordering properties when the trace has no header, plus the four "
        "view properties if it has view events)",
    )
    chk.add_argument(
        "--engine",
        type=str.lower,
        choices=ENGINES,
        default="auto",
        help=f"auto (default): reference up to {AUTO_LIMIT_BYTES >> 20} MB of JSON Lines "
        "or Parquet, Spark for more, for ShiViz logs and for 'clock' (reference for "
        "everything it reads when pyspark is not installed)",
    )
    chk.add_argument(
        "--master",
        default=None,
        help="Spark master URL (default local[*]); naming one makes --engine auto use Spark",
    )
    chk.add_argument(
        "--mode",
        type=str.lower,
        choices=("summary", "full"),
        default="summary",
        help="summary (default): one row per violating delivery, with one witness; "
        "full: every violating pair",
    )
    chk.add_argument(
        "--propagation",
        choices=("sequential", "iterative"),
        default="sequential",
        help="Spark: how clocks are computed when a trace has none (sequential is faster)",
    )
    chk.add_argument(
        "--in-flight",
        type=float,
        default=None,
        metavar="T",
        help="liveness: messages sent less than T before a run's last event are in flight",
    )
    chk.add_argument(
        "--out",
        default=None,
        help="write a report directory (summary.json, summary.txt, violations/, invalid/); "
        "none without it",
    )
    chk.add_argument("--parser", help="ShiViz parser regex (JavaScript named groups accepted)")
    chk.add_argument("--delimiter", help="ShiViz execution delimiter regex")
    chk.add_argument("--send-regex", help="ShiViz: regex naming the sent message (group 'message')")
    chk.add_argument(
        "--deliver-regex", help="ShiViz: regex naming the delivered message (group 'message')"
    )
    chk.add_argument("--witnesses", type=int, default=3, help="witnesses to print per property")
    chk.set_defaults(subparser=chk)
    return chk


def _fail(reason: str) -> int:
    print(f"mailroom check: {reason}", file=sys.stderr)
    return 2


def _format_of(path: str, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    if path.endswith(".parquet") or Path(path).is_dir():
        return "parquet"
    if path.endswith(".log"):
        return "shiviz"
    return "jsonl"


def _shiviz_spec(path: Path, parser: str | None, delimiter: str | None) -> tuple[Any, Any]:
    """The parser and delimiter for ``path``: the options, else parsers.json beside it."""
    if parser is not None:
        return parser, delimiter
    spec_file = path.parent / "parsers.json"
    if spec_file.is_file():
        try:
            spec = json.loads(spec_file.read_text(encoding="utf-8")).get(path.name)
        except (json.JSONDecodeError, AttributeError, OSError, UnicodeDecodeError):
            spec = None
        if isinstance(spec, dict) and "parser" in spec:
            return spec["parser"], delimiter or spec.get("delimiter")
    return None, delimiter  # GoVector: the first line is the parser


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _unreadable(path: str, fmt: str) -> str | None:
    """Why ``path`` cannot be a trace of format ``fmt``, or None."""
    p = Path(path)
    try:
        if not p.exists():
            return f"cannot read {path}: no such file"
        if p.is_dir():
            if fmt == "parquet":
                return None  # a Parquet dataset directory, for Spark
            return f"cannot read {path}: it is a directory"
        if not p.is_file():
            return f"cannot read {path}: not a regular file"
        with open(p, "rb"):
            pass
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    return None


def _size(paths: Sequence[str]) -> int:
    total = 0
    for path in map(Path, paths):
        files = path.rglob("*") if path.is_dir() else [path]
        total += sum(f.stat().st_size for f in files if f.is_file())
    return total


def _choose(
    args: argparse.Namespace, headers: list[TraceHeader | None]
) -> tuple[list[str], tuple[str, ...], str | None]:
    """The properties to check, those not promised, and the protocol that promised them."""
    if args.properties is not None:
        props = [p.strip() for p in args.properties.split(",") if p.strip()]
        return props, (), None
    if headers and all(h is not None and h.promises for h in headers):
        known = [h for h in headers if h is not None]
        promised = {p for h in known for p in h.promises}
        props = [p for p in TRACE_PROPERTIES if p in promised]
        protocols = sorted({h.protocol for h in known if h.protocol})
        protocol = ", ".join(protocols) or None
        # a run without membership promises no view property: they are not listed
        listed = TRACE_PROPERTIES if promised & set(VIEW_PROPERTIES) else PROPERTIES
        return props, tuple(p for p in listed if p not in promised), protocol
    return list(PROPERTIES), (), None


def _by_default(args: argparse.Namespace, headers: list[TraceHeader | None]) -> bool:
    """Whether the properties are the no-header default (view ones added if there are views)."""
    return args.properties is None and not (
        headers and all(h is not None and h.promises for h in headers)
    )


def _engine(args: argparse.Namespace, fmt: str, props: list[str]) -> str:
    if args.engine != "auto":
        return str(args.engine)
    if args.master is not None:  # a cluster was named: the user wants Spark
        return "spark"
    if "clock" in props and fmt != "shiviz":
        return "spark"
    if importlib.util.find_spec("pyspark") is None:
        return "reference"
    if any(Path(p).is_dir() for p in args.traces):
        return "spark"
    return "reference" if _size(args.traces) <= AUTO_LIMIT_BYTES else "spark"


def _progress(text: str) -> None:
    """A phase of the check, on stderr when it is a terminal (silent otherwise)."""
    if sys.stderr.isatty():
        print(f"mailroom check: {text}", file=sys.stderr, flush=True)


def run_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.properties is not None:
        named = [p.strip() for p in args.properties.split(",") if p.strip()]
        unknown = [p for p in named if p not in ALL_PROPERTIES]
        if unknown:
            return _fail(f"unknown properties {unknown}; choose from {list(ALL_PROPERTIES)}")
    formats = {_format_of(p, args.format) for p in args.traces}
    if len(formats) > 1:
        return _fail(f"mixed formats {sorted(formats)}; check them separately or pass --format")
    fmt = formats.pop()
    for path in args.traces:
        why = _unreadable(path, fmt)
        if why:
            return _fail(why)
    headers = [read_header(p, fmt) for p in args.traces]
    props, not_promised, protocol = _choose(args, headers)
    unknown = [p for p in props if p not in ALL_PROPERTIES]
    if unknown:
        return _fail(f"unknown properties {unknown}; choose from {list(ALL_PROPERTIES)}")
    if not props:
        return _fail("no property to check; name some with --properties")
    if args.witnesses < 0:
        parser.error("--witnesses must not be negative")
    engine = _engine(args, fmt, props)
    args.master = args.master or "local[*]"
    if protocol is not None:
        producer = headers[0].producer if headers[0] is not None else "?"
        print(f"trace of {protocol} ({producer}); it promises {', '.join(props)}")
    args.views_by_default = _by_default(args, headers)
    if engine == "reference":
        return _run_reference(args, props, fmt, not_promised, protocol)
    if importlib.util.find_spec("pyspark") is None:
        return _fail(
            "pyspark is not installed (pip install 'mailroom[spark]'), or use --engine reference"
        )
    if fmt == "shiviz":
        return _run_shiviz(args)
    if fmt == "jsonl" and not any(_has_rows(p) for p in args.traces):
        return _fail(f"no usable events in {', '.join(args.traces)}")
    return _run_spark(args, props, fmt, not_promised, protocol)


def _has_rows(path: str) -> bool:
    """Whether a JSON Lines file has a line that is neither blank nor the header."""
    try:
        with open(path, "rb") as src:
            for raw in iter(lambda: src.readline(1 << 16), b""):
                if raw.strip() and not raw.lstrip().startswith(b'{"header"'):
                    return True
    except OSError:
        return True  # the reader will say what is wrong
    return False


def _verdict_lines(
    checked: Sequence[str],
    counts: dict[str, int],
    mode: str,
    witnesses: dict[str, list[str]],
    not_promised: Sequence[str],
    protocol: str | None,
    invalid: int,
    invalid_lines: Sequence[str],
) -> list[str]:
    """The report in words, the same for both engines."""
    lines = []
    for prop in checked:
        lines.append(f"{prop:10s} {count_words(prop, mode, counts.get(prop, 0))}")
        lines.extend(f"    {w}" for w in witnesses.get(prop, []))
    lines.extend(not_promised_lines(not_promised, protocol))
    lines.append(f"{'invalid':10s} {invalid} row(s)")
    lines.extend(f"    {w}" for w in invalid_lines)
    return lines


def _finish(
    args: argparse.Namespace,
    head: str,
    lines: list[str],
    summary: dict[str, Any],
    write_rows: Any,
) -> int:
    print(head)
    print("\n".join(lines))
    if args.out is not None:
        out = Path(args.out)
        try:
            write_rows(out)
            (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
            (out / "summary.txt").write_text(head + "\n" + "\n".join(lines) + "\n")
        except OSError as exc:
            return _fail(f"cannot write the report to {out}: {exc.strerror or exc}")
        except Exception as exc:  # Spark reports an unwritable directory as a JVM error
            return _fail(f"cannot write the report to {out}: {_first_line(exc)}")
        print(f"report written to {out}/ (summary.json, summary.txt, violations/, invalid/)")
    bad = any(summary["violations"].values()) or summary["invalid"]
    return 1 if bad else 0


def _summary(
    engine: str,
    mode: str,
    checked: Sequence[str],
    counts: dict[str, int],
    invalid: int,
    not_promised: Sequence[str],
    protocol: str | None,
    events: int,
    runs: int,
) -> dict[str, Any]:
    return {
        "engine": engine,
        "mode": mode,
        "checked": list(checked),
        "violations": {p: counts.get(p, 0) for p in checked},
        "invalid": invalid,
        "not_promised": list(not_promised),
        "protocol": protocol,
        "events": events,
        "runs": runs,
    }


def _read_reference(path: str, fmt: str) -> list[Any]:
    if fmt == "parquet":
        from mailroom.trace.parquet import read_parquet

        return read_parquet(path)
    from mailroom.trace.jsonl import read_jsonl

    return read_jsonl(path)


def _run_reference(
    args: argparse.Namespace,
    props: list[str],
    fmt: str,
    not_promised: tuple[str, ...],
    protocol: str | None,
) -> int:
    from mailroom.trace.checkers import check

    if fmt == "shiviz":
        return _run_reference_shiviz(args)
    if "clock" in props:
        return _fail("the reference engine checks 'clock' on ShiViz logs only; use --engine spark")
    events = []
    for path in args.traces:
        if Path(path).is_dir():
            return _fail(f"cannot read {path}: a Parquet directory needs --engine spark")
        _progress(f"reading {path}")
        try:
            events += _read_reference(path, fmt)
        except OSError as exc:
            return _fail(f"cannot read {path}: {exc.strerror or exc}")
        except ImportError:
            return _fail("reading Parquet needs pyarrow (pip install 'mailroom[spark]')")
        except TraceError as exc:
            return _fail(_first_line(exc))
        except Exception as exc:  # pyarrow reports an unreadable file as its own errors
            return _fail(f"cannot load {path} as {fmt}: {_first_line(exc)}")
    if not events:
        return _fail(f"no usable events in {', '.join(args.traces)}")
    if getattr(args, "views_by_default", False) and any(e.kind == "view" for e in events):
        props = [*props, *VIEW_PROPERTIES]
    _progress(f"checking {len(events)} events")
    report = check(
        events,
        props,
        mode=args.mode,
        in_flight=args.in_flight,
        not_promised=not_promised,
        protocol=protocol,
    )
    sent = {e.message for e in events if e.kind == "send"}
    never_sent = [e for e in events if e.kind == "deliver" and e.message not in sent]
    runs = len({e.run for e in events})
    counts = {p: report.count(p) for p in props}
    witnesses = {
        p: [f"run {v.run}: {v.reason}" for v in sorted(report.violations[p], key=_spark_order)]
        for p in props
    }
    witnesses = {p: w[: args.witnesses] for p, w in witnesses.items()}
    never_sent.sort(key=lambda e: (e.run, e.process, e.seq))
    invalid_lines = [
        f"run {e.run}: delivery of {e.message}, which was never sent"
        for e in never_sent[: args.witnesses]
    ]
    lines = _verdict_lines(
        props,
        counts,
        args.mode,
        witnesses,
        not_promised,
        protocol,
        len(never_sent),
        invalid_lines,
    )
    head = (
        f"checked {len(events)} events in {runs} run(s) with the reference engine "
        f"({MODE_WORDS[args.mode]})"
    )
    summary = _summary(
        "reference",
        args.mode,
        props,
        counts,
        len(never_sent),
        not_promised,
        protocol,
        len(events),
        runs,
    )
    return _finish(args, head, lines, summary, lambda out: _write_rows(out, report, never_sent))


def _spark_order(v: Any) -> tuple[Any, ...]:
    """The order Spark lists witnesses in (``SparkReport.first``)."""
    return v.run, v.positions, v.processes


def _write_rows(out: Path, report: Report, never_sent: list[Any]) -> None:
    """``violations/`` and ``invalid/`` as Parquet (the Spark report's columns), or JSON
    Lines files when pyarrow is not installed."""
    violations = [
        {
            "property": v.property,
            "run": v.run,
            "processes": list(v.processes),
            "messages": [{"origin": m.origin, "seq": m.seq} for m in v.messages],
            "positions": list(v.positions),
            "reason": v.reason,
        }
        for prop in report.checked
        for v in report.violations[prop]
    ]
    invalid = [
        {
            "source": "trace",
            "line": None,
            "run": e.run,
            "process": e.process,
            "seq": e.seq,
            "reason": f"delivery of {e.message}, which was never sent",
        }
        for e in never_sent
    ]
    for name in ("violations", "invalid"):
        (out / name).mkdir(parents=True, exist_ok=True)
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        for name, rows in (("violations", violations), ("invalid", invalid)):
            with open(out / name / "part-00000.jsonl", "w", encoding="utf-8") as f:
                f.writelines(json.dumps(r) + "\n" for r in rows)
        return
    i64 = pa.int64()
    vschema = pa.schema(
        [
            ("property", pa.string()),
            ("run", pa.string()),
            ("processes", pa.list_(i64)),
            ("messages", pa.list_(pa.struct([("origin", i64), ("seq", i64)]))),
            ("positions", pa.list_(i64)),
            ("reason", pa.string()),
        ]
    )
    ischema = pa.schema(
        [
            ("source", pa.string()),
            ("line", i64),
            ("run", pa.string()),
            ("process", i64),
            ("seq", i64),
            ("reason", pa.string()),
        ]
    )
    pq.write_table(
        pa.Table.from_pylist(violations, schema=vschema), out / "violations" / "part-00000.parquet"
    )
    pq.write_table(
        pa.Table.from_pylist(invalid, schema=ischema), out / "invalid" / "part-00000.parquet"
    )


def _run_spark(
    args: argparse.Namespace,
    props: list[str],
    fmt: str,
    not_promised: tuple[str, ...],
    protocol: str | None,
) -> int:
    from mailroom.spark import check_trace, get_session, load_trace
    from mailroom.spark.load import has_views
    from mailroom.spark.session import describe_error

    props = [p for p in props if p != "clock"] + (["clock"] if "clock" in props else [])

    _progress(f"starting Spark ({args.master})")
    start = time.perf_counter()
    try:
        spark = get_session(args.master)
    except Exception as exc:  # no Java, a bad master URL...
        return _fail(f"cannot start Spark at {args.master}: {describe_error(exc)}")
    _progress(f"checking {', '.join(args.traces)} for {', '.join(props)}")
    # Spark resolves relative paths against the JVM's directory: give it absolute ones
    paths = [str(Path(p).resolve()) for p in args.traces]
    try:  # the reader drops header lines; one action computes counts, witnesses, sizes
        loaded = load_trace(spark, paths, fmt)
        if getattr(args, "views_by_default", False) and has_views(loaded):
            props = [*props, *VIEW_PROPERTIES]  # no header and no --properties: no 'clock'
        report = check_trace(
            spark,
            loaded,
            props,
            mode=args.mode,
            in_flight=args.in_flight,
            propagation=args.propagation,
        )
    except Exception as exc:  # Spark reports unreadable input as assorted JVM errors
        return _fail(f"cannot load {', '.join(args.traces)} as {fmt}: {describe_error(exc)}")
    found = report.found
    assert found is not None  # check_trace always computes its digest
    if found.invalid_first:  # bad input is exit 2 with the first bad row, as in the reference
        where, reason = found.invalid_first[0]
        return _fail(_bad_row(where, reason, args.traces, fmt))
    events, runs = found.events or 0, found.runs or 0
    if events == 0:
        return _fail(f"no usable events in {', '.join(args.traces)}")
    k = args.witnesses
    witnesses = {p: [f"run {r}: {why}" for r, why in found.witnesses.get(p, [])[:k]] for p in props}
    lines = _verdict_lines(
        props, report.counts, args.mode, witnesses, not_promised, protocol, 0, []
    )
    head = (
        f"checked {events} events in {runs} run(s) on Spark {args.master} "
        f"({MODE_WORDS[args.mode]}) in {time.perf_counter() - start:.1f} s"
    )
    summary = _summary(
        "spark", args.mode, props, report.counts, 0, not_promised, protocol, events, runs
    )
    return _finish(args, head, lines, summary, report.write)


def _bad_row(where: str, reason: str, paths: Sequence[str], fmt: str) -> str:
    """The first invalid row (``SOURCE:LINE`` from Spark) as the reference reader words
    it: FILE:LINE: reason, with the file named as the user named it."""
    reason = reason.removeprefix("malformed clock: ")
    source, _, line = where.rpartition(":")
    if not source or not line.isdigit():
        return f"{where}: {reason}"
    for path in paths:  # Spark saw the path absolute, or as a URI
        if source.endswith(str(Path(path).resolve())):
            source = path
            break
    if fmt == "parquet":
        return f"{source}: row {line}: {reason}"
    return f"{source}:{line}: {reason}"


def _read_logs(args: argparse.Namespace) -> Any:
    """All ShiViz logs of ``args.traces`` as one ShivizLog, or a one-line error (str)."""
    from mailroom.trace.shiviz import ShivizLog, read_shiviz

    events = []
    invalid = []
    executions: list[str] = []
    many = len(args.traces) > 1
    for path in map(Path, args.traces):
        parser, delimiter = _shiviz_spec(path, args.parser, args.delimiter)
        try:
            log = read_shiviz(path, parser, delimiter)
        except (TraceError, OSError, UnicodeDecodeError) as exc:
            return f"cannot read {path}: {exc}"
        prefix = f"{path.name}:" if many else ""
        events += [
            e.__class__(**{**_fields(e), "execution": prefix + e.execution}) for e in log.events
        ]
        invalid += [
            r.__class__(**{**_fields(r), "execution": prefix + r.execution}) for r in log.invalid
        ]
        executions += [prefix + x for x in log.executions]
    if not events and not invalid:
        return f"the parser matched no record in {', '.join(args.traces)}"
    return ShivizLog(events, invalid, tuple(executions))


def _shiviz_note(checked: tuple[str, ...]) -> str:
    return (
        f"checked: {', '.join(checked)} (ShiViz logs have no message ids; "
        "total, integrity and liveness need them"
        + ("" if "causal" in checked else "; fifo and causal need --send-regex/--deliver-regex")
        + ")"
    )


def _run_shiviz(args: argparse.Namespace) -> int:
    from mailroom.spark import get_session
    from mailroom.spark.shiviz import check_shiviz

    log = _read_logs(args)
    if isinstance(log, str):
        return _fail(log)
    try:
        spark = get_session(args.master)
    except Exception as exc:  # no Java, a bad master URL...
        return _fail(f"cannot start Spark at {args.master}: {_first_line(exc)}")
    try:
        report = check_shiviz(
            spark,
            log,
            source=",".join(args.traces),
            send_regex=args.send_regex,
            deliver_regex=args.deliver_regex,
        )
    except TraceError as exc:
        return _fail(str(exc))
    print(
        f"checked {len(log.events)} ShiViz records in {len(log.executions)} execution(s), "
        f"{len(log.hosts())} hosts, on Spark {args.master}"
    )
    print(_shiviz_note(report.checked))
    print(report.summary(args.witnesses))
    if args.out is not None:
        out = Path(args.out)
        report.write(out)
        print(f"report written to {out}/ (violations/, invalid/, summary.json)")
    return 0 if report.ok and report.invalid_count == 0 else 1


def _run_reference_shiviz(args: argparse.Namespace) -> int:
    """ShiViz logs on the reference engine: the same checks and verdicts as on Spark."""
    from mailroom.trace.checkers import check
    from mailroom.trace.shiviz import clock_violations, log_events

    log = _read_logs(args)
    if isinstance(log, str):
        return _fail(log)
    found = {"clock": clock_violations(log)}
    invalid = [(r.line, r.reason) for r in log.invalid]
    if args.send_regex and args.deliver_regex:
        try:
            events = log_events(log, args.send_regex, args.deliver_regex)
        except TraceError as exc:
            return _fail(str(exc))
        report = check(events.events, ("fifo", "causal"))
        for prop, vs in report.violations.items():
            found[prop] = [
                v.__class__(**{**_fields(v), "reason": events.names.rename(v.run, v.reason)})
                for v in vs
            ]
        invalid += [(r.line, r.reason) for r in events.unmatched]
    print(
        f"checked {len(log.events)} ShiViz records in {len(log.executions)} execution(s), "
        f"{len(log.hosts())} hosts, on the reference engine"
    )
    print(_shiviz_note(tuple(found)))
    for prop, vs in found.items():
        print(f"{prop:10s} {'ok' if not vs else f'{len(vs)} violation(s)'}")
        for v in vs[: args.witnesses]:
            print(f"    run {v.run}: {v.reason}")
    print(f"{'invalid':10s} {len(invalid)} row(s)")
    for line, reason in sorted(invalid)[: args.witnesses]:
        print(f"    line {line}: {reason}")
    return 0 if not any(found.values()) and not invalid else 1


def _fields(e: Any) -> dict[str, Any]:
    import attrs

    return attrs.asdict(e, recurse=False)
