"""``mailroom check TRACE...``: check traces on Spark (or with the reference checkers).

Exit codes: 0 when no property is violated and no row is invalid, 1 when there
are violations or invalid rows, 2 when the input cannot be used at all (a file
that does not exist or cannot be parsed, a bad regex, no usable event), with a
one-line reason on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

from mailroom.trace.checkers import PROPERTIES
from mailroom.trace.events import TraceError

FORMATS = ("auto", "jsonl", "parquet", "shiviz")
ALL_PROPERTIES = (*PROPERTIES, "clock")


def add_check_parser(sub: Any) -> argparse.ArgumentParser:
    chk: argparse.ArgumentParser = sub.add_parser(
        "check",
        help="check traces for integrity, FIFO, causal, total order and liveness (Spark)",
        description="Check traces on Spark (local[*] by default) and write a report directory.",
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
        default=",".join(PROPERTIES),
        help=f"comma-separated properties to check, from {', '.join(ALL_PROPERTIES)}",
    )
    chk.add_argument("--engine", choices=("spark", "reference"), default="spark")
    chk.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    chk.add_argument(
        "--mode",
        choices=("summary", "full"),
        default="summary",
        help="summary: one witness per violating delivery (scales); full: every pair",
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
    chk.add_argument("--out", default="mailroom-report", help="report directory to write")
    chk.add_argument("--parser", help="ShiViz parser regex (JavaScript named groups accepted)")
    chk.add_argument("--delimiter", help="ShiViz execution delimiter regex")
    chk.add_argument("--send-regex", help="ShiViz: regex naming the sent message (group 'message')")
    chk.add_argument(
        "--deliver-regex", help="ShiViz: regex naming the delivered message (group 'message')"
    )
    chk.add_argument("--witnesses", type=int, default=3, help="witnesses to print per property")
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
        except (json.JSONDecodeError, AttributeError):
            spec = None
        if isinstance(spec, dict) and "parser" in spec:
            return spec["parser"], delimiter or spec.get("delimiter")
    return None, delimiter  # GoVector: the first line is the parser


def run_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    props = [p.strip() for p in args.properties.split(",") if p.strip()]
    unknown = [p for p in props if p not in ALL_PROPERTIES]
    if unknown:
        return _fail(f"unknown properties {unknown}; choose from {list(ALL_PROPERTIES)}")
    for path in args.traces:
        if not Path(path).exists():
            return _fail(f"cannot read {path}: no such file")
    formats = {_format_of(p, args.format) for p in args.traces}
    if len(formats) > 1:
        return _fail(f"mixed formats {sorted(formats)}; check them separately or pass --format")
    fmt = formats.pop()
    if args.engine == "reference":
        return _run_reference(args, props, fmt)
    from mailroom.spark import check_trace, get_session, load_trace

    if importlib.util.find_spec("pyspark") is None:
        return _fail(
            "pyspark is not installed (pip install 'mailroom[spark]'), or use --engine reference"
        )
    if fmt == "shiviz":
        return _run_shiviz(args)
    props = [p for p in props if p != "clock"] + (["clock"] if "clock" in props else [])
    from mailroom.spark.session import describe_error, progress

    progress(f"starting Spark ({args.master})")
    try:
        spark = get_session(args.master)
    except Exception as exc:  # no Java, a bad master URL...
        return _fail(f"cannot start Spark at {args.master}: {describe_error(exc)}")
    progress(f"checking {', '.join(args.traces)}")
    try:
        loaded = load_trace(spark, list(args.traces), fmt)
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
    events, runs = report.events, report.runs
    if not events:
        first = report.found.invalid_first if report.found else []
        why = f" (first invalid row: {first[0][1]})" if first else ""
        return _fail(f"no usable events in {', '.join(args.traces)}{why}")
    progress(f"writing the report to {args.out}/")
    report.write(args.out, args.witnesses)
    print(f"checked {events} events in {runs} run(s) on Spark {args.master} ({args.mode} mode)")
    print(report.summary(args.witnesses))
    print(f"report written to {args.out}/ (violations/, invalid/, summary.json)")
    return 0 if report.ok and report.invalid_count == 0 else 1


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


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
    report.write(args.out)
    print(
        f"checked {len(log.events)} ShiViz records in {len(log.executions)} execution(s), "
        f"{len(log.hosts())} hosts, on Spark {args.master}"
    )
    print(_shiviz_note(report.checked))
    print(report.summary(args.witnesses))
    print(f"report written to {args.out}/ (violations/, invalid/, summary.json)")
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


def _run_reference(args: argparse.Namespace, props: list[str], fmt: str) -> int:
    from mailroom.trace.checkers import check
    from mailroom.trace.jsonl import read_jsonl

    if fmt == "shiviz":
        return _run_reference_shiviz(args)
    if "clock" in props:
        return _fail("the reference engine checks JSON Lines or Parquet traces, without 'clock'")
    events = []
    for path in args.traces:
        try:
            if fmt == "parquet":
                from mailroom.trace.parquet import read_parquet

                events += read_parquet(path)
            else:
                events += read_jsonl(path)
        except OSError as exc:
            return _fail(f"cannot read {path}: {exc.strerror or exc}")
        except TraceError as exc:
            return _fail(_first_line(exc))
        except (ImportError, ValueError) as exc:  # pyarrow: a truncated or foreign file
            return _fail(f"cannot read {path}: {_first_line(exc)}")
    report = check(events, props)
    print(f"checked {len(events)} events")
    print(report.summary())
    return 0 if report.ok else 1
