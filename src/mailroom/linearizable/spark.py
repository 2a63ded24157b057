"""The Spark engine: the same per-key rule as the local engine, in Spark tasks.

The history's calls are partitioned by key on the driver (``partitions``), the keys
cut into contiguous groups in key order, one Spark task per group; each task applies
``check_key`` (the one implementation of the search) to its keys, and the driver
combines the keys' verdicts with ``gather``. Verdicts and witnesses are therefore the
same as the local engine's for the same history, model and budget.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator, Sequence
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
from mailroom.linearizable.history import Call
from mailroom.linearizable.models import Model

#: tasks per core of the session when ``groups`` is not given (keys vary in cost)
TASKS_PER_CORE = 4


def _check_group(
    model: Model, budget: int, group: Iterator[tuple[Hashable, list[Call]]]
) -> Iterator[KeyVerdict]:
    for key, calls in group:
        yield check_key(key, calls, model, budget)


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
    cores = int(spark.sparkContext.defaultParallelism)
    tasks = max(1, min(len(parts), groups or cores * TASKS_PER_CORE))
    rdd = spark.sparkContext.parallelize(parts, tasks)
    found = rdd.mapPartitions(lambda group: _check_group(model, budget, group)).collect()
    return gather(model, found)
