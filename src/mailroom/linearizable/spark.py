"""The Spark engine: the same rules as the local engine, in Spark tasks.

``check_on_spark`` takes calls already paired on the driver; ``check_files_on_spark``
reads the history files on the executors, for histories no single process holds:
each line is read by the row readers of ``mailroom.linearizable.readers`` where it
lies, the rows are grouped by process and paired (``pair_process``), the calls grouped
by key and each key searched (``check_key``), the keys in groups (by their hash), one
Spark task per group. The driver gathers the keys' verdicts with ``gather``, so verdicts and
witnesses are the local engine's for the same history, model and budget; and a bad
row is reported as the local engine reports it (parse errors first, then pairing
errors, then calls the model cannot take, each the first in the file).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Sequence
from functools import partial
from typing import Any

from mailroom.linearizable.check import (
    DEFAULT_BUDGET,
    KeyVerdict,
    Verdict,
    check_key,
    gather,
    partitions,
    validate,
)
from mailroom.linearizable.history import Call, HistoryError, Op, pair_process
from mailroom.linearizable.models import Model
from mailroom.linearizable.readers import format_of, parse_lines

#: tasks per core of the session when ``groups`` is not given (keys vary in cost)
TASKS_PER_CORE = 4
#: the order in which kinds of bad input are reported (as the local engine finds them)
_READ, _PAIR, _CALL = 0, 1, 2


def _check_group(
    model: Model, budget: int, group: Iterator[tuple[Hashable, list[Call]]]
) -> Iterator[KeyVerdict]:
    for key, calls in group:
        yield check_key(key, calls, model, budget)


def _tasks(spark: Any, keys: int, groups: int | None) -> int:
    cores = int(spark.sparkContext.defaultParallelism)
    return max(1, min(keys, groups or cores * TASKS_PER_CORE))


def check_on_spark(
    spark: Any,
    calls: Sequence[Call],
    model: Model,
    *,
    budget: int = DEFAULT_BUDGET,
    groups: int | None = None,
) -> Verdict:
    """Check ``calls`` on Spark, one task per group of keys (``groups`` tasks, by default
    ``TASKS_PER_CORE`` per core of the session, never more than there are keys)."""
    validate(calls, model)
    parts = partitions(calls)
    rdd = spark.sparkContext.parallelize(parts, _tasks(spark, len(parts), groups))
    found = rdd.mapPartitions(partial(_check_group, model, budget)).collect()
    return gather(model, found)


#: a bad row as the executors report it: (kind, file's place, line, message)
Bad = tuple[int, int, int, str]


def _bad(kind: int, fileno: int, exc: HistoryError) -> tuple[str, Bad]:
    return "error", (kind, fileno, exc.line or 0, str(exc))


def _read_rows(
    fmt: str, source: str, tag: Any, fileno: int, rows: Iterable[tuple[str, int]]
) -> Iterator[Any]:
    """("op", ((tag, process), (line, op))) per row, or ("error", Bad)."""
    for text, index in rows:
        try:
            for op in parse_lines([text], fmt, source=source, start=index + 1):
                yield "op", ((tag, op.process), (op.line, op))
        except HistoryError as exc:
            yield _bad(_READ, fileno, exc)


def _pair_rows(
    files: dict[Any, tuple[int, str]], item: tuple[Any, Iterable[tuple[int, Op]]]
) -> Iterator[Any]:
    """("call", (key, call)) per call of one process, ("error", Bad) for its first error."""
    (tag, _), rows = item
    fileno, source = files[tag]
    calls, error = pair_process(sorted(rows, key=lambda r: r[0]), source=source)
    for c in calls:
        yield "call", (c.key if tag is None else (tag, c.key), c)
    if error is not None:
        yield _bad(_PAIR, fileno, error)


def _search_key(
    model: Model, budget: int, files: dict[Any, tuple[int, str]], item: tuple[Any, Iterable[Call]]
) -> Any:
    """("verdict", KeyVerdict) for one key, or ("error", Bad) for the first call the
    model cannot take (checked first, as ``validate`` does)."""
    key, calls = item
    ordered = sorted(calls, key=lambda c: c.called)
    try:
        validate(ordered, model)
    except HistoryError as exc:
        return _bad(_CALL, files[key[0] if len(files) > 1 else None][0], exc)
    return "verdict", check_key(key, ordered, model, budget)


def _raise(first: list[Bad]) -> None:
    if first:
        error = HistoryError(first[0][3])
        error.line = first[0][2]
        raise error


def check_files_on_spark(
    spark: Any,
    paths: Sequence[str],
    model: Model,
    *,
    fmt: str = "auto",
    budget: int = DEFAULT_BUDGET,
    groups: int | None = None,
) -> Verdict:
    """Read, pair and check the history files ``paths`` on Spark (see the module doc).
    With several files each is its own history: its keys become ``(path, key)``.
    HistoryError for a row the local engine would refuse (the same one)."""
    sc = spark.sparkContext
    files = {(p if len(paths) > 1 else None): (n, p) for n, p in enumerate(paths)}
    read = [
        sc.textFile(path)
        .zipWithIndex()
        .mapPartitions(partial(_read_rows, format_of(path, fmt), path, tag, n))
        for tag, (n, path) in files.items()
    ]
    rows = sc.union(read).cache()
    paired = rows.filter(lambda r: r[0] == "op").map(lambda r: r[1]).groupByKey()
    paired = paired.flatMap(partial(_pair_rows, files)).cache()
    try:
        bad = rows.union(paired).filter(lambda r: r[0] == "error").map(lambda r: r[1])
        _raise(bad.takeOrdered(1))
        calls = paired.filter(lambda r: r[0] == "call").map(lambda r: r[1])
        by_key = calls.groupByKey(numPartitions=_tasks(spark, 1 << 30, groups))
        found = by_key.map(partial(_search_key, model, budget, files)).collect()
        _raise(sorted(r[1] for r in found if r[0] == "error")[:1])
        return gather(model, (r[1] for r in found))
    finally:
        rows.unpersist()
        paired.unpersist()
