"""``mailroom check TRACE...``: check traces with the reference checkers or on Spark.

What is checked: ``--properties`` if given (any property of the registry,
``mailroom.trace.properties``); else what the trace's header says its protocol
promises (``mailroom.trace.header``); else the five ordering properties, plus the
four view properties (group membership) when the trace has view events. The
properties a header's protocol does not promise are shown as "not promised" and
never fail the check (the view properties only when the header promises some: a
trace of a run without membership does not list them).

Engines (``mailroom.cli.check_engines``): ``reference`` (pure Python, in memory),
``spark`` (local or a cluster) and ``auto`` (the default): the reference engine for
traces up to ``AUTO_LIMIT_BYTES`` in all, Spark for larger traces and Parquet
directories (and whenever ``--master`` names a cluster). Both engines print the same
lines, counts and exit codes for the same trace and mode, and write the same report
files with ``--out`` (no report directory is written without it), whatever the
format, ShiViz logs included.

Exit codes: 0 when no checked property is violated and no row is invalid, 1 when
there are violations or invalid rows (deliveries of messages never sent, events
recorded in a view their process's installations contradict), 2 when the input
cannot be used (a file that does not exist or cannot be read, a malformed row,
named with its line, a bad regex, no event at all, a bad option), with a one-line
reason on stderr.

With ``--model MODEL`` the inputs are black-box histories of a service's clients,
checked for linearizability (``mailroom.cli.check_history``): exit code 0
linearizable, 1 not linearizable, 3 unknown (past ``--budget``), 2 unusable input.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
from pathlib import Path
from typing import Any

from mailroom.cli.check_engines import Checked, Plan, run_reference, run_spark
from mailroom.cli.check_history import EXIT_UNKNOWN, HISTORY_FORMATS, run_history_check
from mailroom.cli.check_inputs import fail, first_line, format_of, say, size, unreadable
from mailroom.cli.options import COMMAND_HELP
from mailroom.linearizable import DEFAULT_BUDGET, MODELS
from mailroom.trace.header import TraceHeader, read_header
from mailroom.trace.properties import ALL_PROPERTIES as PROMISABLE
from mailroom.trace.properties import CHECKABLE, PROPERTIES, VIEW_PROPERTIES, unknown
from mailroom.trace.report import MODE_WORDS, write_report

FORMATS = ("auto", "jsonl", "parquet", "shiviz")
#: Every property ``--properties`` may name (the registry's).
ALL_PROPERTIES = CHECKABLE
ENGINES = ("auto", "reference", "spark")
#: ``--engine auto`` checks traces up to this many bytes (all files together) with the
#: reference engine, Spark beyond. Measured on the project's 2-core machine (see
#: docs/getting-started.md, "Checking a trace"): the reference engine checked an
#: 18 MB trace (96,000 events) in 7.7 s where Spark took 124 s, and a 65 MB trace
#: (336,000 events) in 86 s with 334 MB of memory; so below this size the reference
#: is the faster engine, and the limit bounds its memory (about 5 bytes per byte).
AUTO_LIMIT_BYTES = 64 * 1024 * 1024
#: The most witnesses per property ``--witnesses`` may ask for (they are fetched).
MAX_WITNESSES = 1000

__all__ = [
    "ALL_PROPERTIES",
    "AUTO_LIMIT_BYTES",
    "ENGINES",
    "FORMATS",
    "MAX_WITNESSES",
    "MODE_WORDS",
    "add_check_parser",
    "run_check",
]


def _options(chk: argparse.ArgumentParser) -> None:
    """The options that choose what is checked, how, and what is written."""
    chk.add_argument(
        "--format",
        choices=(*FORMATS, *(f for f in HISTORY_FORMATS if f not in FORMATS)),
        default="auto",
        help="input format (auto: .parquet is Parquet, .log is ShiViz, anything else JSON "
        "Lines); with --model: edn, log (Jepsen's console log) or jsonl (auto: by the "
        "first line)",
    )
    chk.add_argument(
        "--properties",
        type=str.lower,
        default=None,
        help=f"comma-separated properties to check, from {', '.join(ALL_PROPERTIES)} "
        "(default: what the trace's protocol promises, or the five ordering properties "
        "when the trace has no header, plus the four view properties if it has view events)",
    )
    chk.add_argument(
        "--engine",
        type=str.lower,
        choices=(*ENGINES, "local"),
        default="auto",
        help=f"auto (default): reference up to {AUTO_LIMIT_BYTES >> 20} MB of JSON Lines "
        "or Parquet, Spark for more and for Parquet directories (reference for everything "
        "it reads when pyspark is not installed)",
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
        "--model",
        type=str.lower,
        default=None,
        help="check black-box histories of a service's clients for linearizability "
        f"against this model ({', '.join(MODELS)}); see docs/checking-histories.md",
    )
    chk.add_argument(
        "--budget",
        type=int,
        default=None,
        help=f"with --model: the states one key's search may explore (default "
        f"{DEFAULT_BUDGET}); past it the verdict is unknown (exit code {EXIT_UNKNOWN})",
    )
    chk.add_argument(
        "--svg", default=None, help="with --model: draw the witness's timeline in this SVG file"
    )
    chk.add_argument(
        "--out",
        default=None,
        help="write a report directory (summary.json, summary.txt, violations/, invalid/); "
        "none without it",
    )


_DESCRIPTION = (
    "Check traces for integrity, FIFO, causal and total order, liveness, vector clocks, "
    "and for group membership runs view agreement, self-inclusion, same-view delivery and "
    "virtual synchrony. By default the properties the trace's header says its protocol "
    "promises are checked; the others are shown as 'not promised'. --engine auto (the "
    f"default) uses the reference checkers for traces up to {AUTO_LIMIT_BYTES >> 20} MB and "
    "Spark beyond (measured: the reference engine is faster below that size; the limit "
    "bounds its memory, about 5 bytes per byte of trace; see docs/getting-started.md)."
)


def add_check_parser(sub: Any) -> argparse.ArgumentParser:
    what = COMMAND_HELP["check"]
    chk: argparse.ArgumentParser = sub.add_parser("check", help=what, description=_DESCRIPTION)
    chk.add_argument("traces", nargs="+", help="trace files (JSON Lines, Parquet or ShiViz logs)")
    _options(chk)
    chk.add_argument("--parser", help="ShiViz parser regex (JavaScript named groups accepted)")
    chk.add_argument("--delimiter", help="ShiViz execution delimiter regex")
    chk.add_argument("--send-regex", help="ShiViz: regex naming the sent message (group 'message')")
    chk.add_argument(
        "--deliver-regex", help="ShiViz: regex naming the delivered message (group 'message')"
    )
    chk.add_argument(
        "--witnesses",
        type=int,
        default=3,
        help=f"witnesses to print per property (0 to {MAX_WITNESSES}, default 3)",
    )
    chk.set_defaults(subparser=chk)
    return chk


def _bad_option(args: argparse.Namespace) -> str | None:
    """Why an option cannot be used, or None."""
    if args.properties is not None:
        why = unknown([p.strip() for p in args.properties.split(",") if p.strip()])
        if why:
            return why
    if not 0 <= args.witnesses <= MAX_WITNESSES:
        return f"--witnesses must be between 0 and {MAX_WITNESSES}"
    if args.in_flight is not None and not (math.isfinite(args.in_flight) and args.in_flight >= 0):
        return "--in-flight must be a finite number of time units, at least 0"
    return None


def _choose(
    args: argparse.Namespace, headers: list[TraceHeader | None]
) -> tuple[tuple[str, ...], tuple[str, ...], str | None]:
    """The properties to check, those not promised, and the protocol that promised them."""
    if args.properties is not None:
        return tuple(p.strip() for p in args.properties.split(",") if p.strip()), (), None
    if headers and all(h is not None and h.promises for h in headers):
        known = [h for h in headers if h is not None]
        promised = {p for h in known for p in h.promises}
        protocols = sorted({h.protocol for h in known if h.protocol})
        # a run without membership promises no view property: they are not listed
        listed = PROMISABLE if promised & set(VIEW_PROPERTIES) else PROPERTIES
        props = tuple(p for p in CHECKABLE if p in promised)
        return props, tuple(p for p in listed if p not in promised), ", ".join(protocols) or None
    return PROPERTIES, (), None


def _engine(args: argparse.Namespace) -> str:
    """The engine ``--engine`` names, or for "auto" the one the traces' size calls for."""
    if args.engine != "auto":
        return "reference" if args.engine == "local" else str(args.engine)
    if args.master is not None:  # a cluster was named: the user wants Spark
        return "spark"
    if importlib.util.find_spec("pyspark") is None:
        return "reference"
    if any(Path(p).is_dir() for p in args.traces):
        return "spark"
    return "reference" if size(args.traces) <= AUTO_LIMIT_BYTES else "spark"


def _plan(args: argparse.Namespace) -> Plan | str:
    """What to check and how, or a one-line reason the command line cannot be used."""
    why = _bad_option(args)
    if why:
        return why
    formats = {format_of(p, args.format) for p in args.traces}
    if len(formats) > 1:
        return f"mixed formats {sorted(formats)}; check them separately or pass --format"
    fmt = formats.pop()
    for path in args.traces:
        why = unreadable(path, fmt)
        if why:
            return why
    headers = [read_header(p, fmt) for p in args.traces]
    props, not_promised, protocol = _choose(args, headers)
    why = unknown(props)
    if why:
        return why
    if not props:
        return "no property to check; name some with --properties"
    if protocol is not None:
        producer = headers[0].producer if headers[0] is not None else "?"
        say(f"trace of {protocol} ({producer}); it promises {', '.join(props)}")
    promised = bool(headers) and all(h is not None and h.promises for h in headers)
    return Plan(
        tuple(args.traces),
        fmt,
        props,
        not_promised,
        protocol,
        views_by_default=args.properties is None and not promised,
        mode=args.mode,
        in_flight=args.in_flight,
        witnesses=args.witnesses,
        master=args.master or "local[*]",
        propagation=args.propagation,
        parser=args.parser,
        delimiter=args.delimiter,
        send_regex=args.send_regex,
        deliver_regex=args.deliver_regex,
    )


def _finish(checked: Checked, out: str | None, k: int) -> int:
    """Print the verdict, write the report directory if asked; the exit code."""
    verdict = checked.verdict
    say(*verdict.head, *verdict.lines(k))
    if out is not None:
        where = Path(out)
        try:
            write_report(where, verdict, checked.write_rows, k)
        except OSError as exc:
            return fail(f"cannot write the report to {where}: {exc.strerror or exc}")
        except Exception as exc:  # Spark reports an unwritable directory as a JVM error
            return fail(f"cannot write the report to {where}: {first_line(exc)}")
        say(f"report written to {where}/ (summary.json, summary.txt, violations/, invalid/)")
    return 0 if verdict.ok else 1


def run_check(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.model is not None:
        return run_history_check(args)
    if args.format in ("edn", "log") or args.budget is not None or args.svg is not None:
        return fail("--format edn|log, --budget and --svg are for histories: add --model")
    plan = _plan(args)
    if isinstance(plan, str):
        return fail(plan)
    engine = _engine(args)
    if engine == "spark" and importlib.util.find_spec("pyspark") is None:
        return fail(
            "pyspark is not installed (pip install 'mailroom[spark]'), or use --engine reference"
        )
    checked = run_reference(plan) if engine == "reference" else run_spark(plan)
    if isinstance(checked, str):
        return fail(checked)
    return _finish(checked, args.out, plan.witnesses)
