"""``mailroom check --model MODEL HISTORY...``: is a service's history linearizable?

The histories (Jepsen EDN, Jepsen console logs, JSON Lines; ``mailroom.linearizable``)
are read and paired, then checked per key against the model by the local engine or,
for histories larger than ``AUTO_LIMIT_BYTES`` (``--engine auto``), on Spark; both
give the same verdict and witness.

Exit codes: 0 linearizable, 1 not linearizable (the witness is printed, and drawn
with ``--svg``), 3 unknown (a key's search went past ``--budget``; how far it got is
printed), 2 unusable input or options (one line on stderr, naming the row's line).
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import attrs

from mailroom.cli.check_inputs import fail, first_line, progress, say, size
from mailroom.linearizable import (
    DEFAULT_BUDGET,
    MODELS,
    NOT_LINEARIZABLE,
    UNKNOWN,
    Call,
    HistoryError,
    Verdict,
    check_calls,
    pair,
    read_history,
    verdict_lines,
    witness_svg,
)

#: the exit code of a history whose verdict is unknown (a search went past the budget)
EXIT_UNKNOWN = 3
HISTORY_FORMATS = ("auto", "edn", "log", "jsonl")
#: histories up to this many bytes in all are checked locally by ``--engine auto``
AUTO_LIMIT_BYTES = 64 * 1024 * 1024

__all__ = ["AUTO_LIMIT_BYTES", "EXIT_UNKNOWN", "HISTORY_FORMATS", "run_history_check"]


def _bad_option(args: argparse.Namespace) -> str | None:
    if args.model not in MODELS:
        return f"unknown model {args.model!r}; use one of {', '.join(MODELS)}"
    if args.format not in HISTORY_FORMATS:
        return f"--format {args.format} is for traces; histories are {', '.join(HISTORY_FORMATS)}"
    if args.budget is not None and args.budget < 1:
        return "--budget must be at least 1"
    return None


def _read(paths: list[str], fmt: str) -> list[Call] | str:
    """The calls of every history (each file paired on its own), or a one-line error."""
    calls: list[Call] = []
    for path in paths:
        progress(f"reading {path}")
        try:
            ops = read_history(path, fmt)
            offset = len(calls)
            calls += pair(ops, source=path)
        except OSError as exc:
            return f"cannot read {path}: {exc.strerror or exc}"
        except HistoryError as exc:
            return first_line(exc)
        if len(paths) > 1:  # histories are separate: each file's keys are its own
            calls[offset:] = [_tag(c, path) for c in calls[offset:]]
    return calls


def _local(args: argparse.Namespace, budget: int) -> Verdict | str:
    """The local engine: read and pair on this process, check every key here."""
    calls = _read(list(args.traces), args.format)
    if isinstance(calls, str):
        return calls
    return check_calls(calls, MODELS[args.model], budget=budget)


def _tag(c: Call, path: str) -> Call:
    return attrs.evolve(c, key=(path, c.key))


def _engine(args: argparse.Namespace) -> str:
    if args.engine in ("local", "reference"):
        return "local"
    if args.engine == "spark" or args.master is not None:
        return "spark"
    if importlib.util.find_spec("pyspark") is None:
        return "local"
    return "local" if size(args.traces) <= AUTO_LIMIT_BYTES else "spark"


def _spark(args: argparse.Namespace, budget: int) -> Verdict | str:
    """The Spark engine: the executors read, pair and check the histories."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'mailroom[spark]'), or use --engine local"
    from mailroom.linearizable.spark import check_files_on_spark
    from mailroom.spark import get_session
    from mailroom.spark.session import describe_error

    for path in args.traces:
        if not Path(path).is_file():
            return f"cannot read {path}: not a file"
    master = args.master or "local[*]"
    try:
        spark = get_session(master)
    except Exception as exc:  # no Java, a bad master URL...
        return f"cannot start Spark at {master}: {describe_error(exc)}"
    model = MODELS[args.model]
    progress(f"checking {', '.join(args.traces)} on Spark {master}")
    try:
        return check_files_on_spark(spark, args.traces, model, fmt=args.format, budget=budget)
    except HistoryError:
        raise
    except Exception as exc:  # Spark reports unreadable input as assorted JVM errors
        return f"cannot check {', '.join(args.traces)} on Spark: {describe_error(exc)}"


def _write_svg(verdict: Verdict, where: str) -> str | None:
    witness = verdict.witness
    if witness is None:
        say(f"no witness to draw: {where} not written")
        return None
    try:
        Path(where).write_text(witness_svg(witness), encoding="utf-8")
    except OSError as exc:
        return f"cannot write {where}: {exc.strerror or exc}"
    say(f"witness drawn in {where}")
    return None


def run_history_check(args: argparse.Namespace) -> int:
    """Check the histories of ``args.traces`` against ``args.model``; the exit code."""
    why = _bad_option(args)
    if why:
        return fail(why)
    budget = args.budget or DEFAULT_BUDGET
    engine, start = _engine(args), time.perf_counter()
    try:
        verdict = _local(args, budget) if engine == "local" else _spark(args, budget)
    except HistoryError as exc:
        return fail(first_line(exc))
    if isinstance(verdict, str):
        return fail(verdict)
    if not verdict.keys:
        return fail(f"no operation in {', '.join(args.traces)}")
    say(*verdict_lines(verdict))
    say(f"checked on the {engine} engine in {time.perf_counter() - start:.1f} s")
    if args.svg is not None:
        why = _write_svg(verdict, args.svg)
        if why:
            return fail(why)
    return {NOT_LINEARIZABLE: 1, UNKNOWN: EXIT_UNKNOWN}.get(verdict.verdict, 0)
