"""``mailroom sweep`` on Spark: run a grid of simulations as tasks, one Parquet row per run.

The driver expands the grid into run configs and parallelizes them one per
partition, so each run is one Spark task and progress counts runs; executors
call ``mailroom.sim.sweep.run_one`` (pure) and the rows are written as Parquet
with the explicit schema ``SWEEP_DDL``. Only the small summary (means over seeds
by protocol, network and n) comes back to the driver, for the table and plots.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import attrs

from mailroom.sim.sweep import COLUMNS, RunConfig, SweepGrid, run_one

_SQL_TYPES = {"str": "string", "int": "long", "float": "double", "bool": "boolean"}
#: The schema of a sweep's Parquet rows: the fields of ``RunResult``, in order.
SWEEP_DDL = ", ".join(f"{name} {_SQL_TYPES[kind]}" for name, kind in COLUMNS)
#: The summary's key columns, and the measures it averages over seeds.
SUMMARY_KEYS = ("protocol", "network", "n")
SUMMARY_MEANS = (
    "delay_mean",
    "delay_p99",
    "buffer_mean",
    "buffer_max",
    "meta_mean",
    "meta_p99",
    "meta_per_message",
    "wall_s",
)


@attrs.frozen
class SweepResult:
    """Where the rows went, how many runs there were, and the summary rows."""

    path: Path
    runs: int
    summary: list[dict[str, Any]]


def _run_partition(configs: Iterator[RunConfig]) -> Iterator[tuple[Any, ...]]:
    """Executor side: one row (a tuple in ``SWEEP_DDL`` order) per config."""
    for config in configs:
        yield attrs.astuple(run_one(config), recurse=False)


@attrs.define
class Progress:
    """A driver thread that polls Spark's status tracker and prints "runs done k/N".

    On a terminal the line updates in place; otherwise each change is a new line.
    """

    sc: Any
    group: str
    total: int
    stream: TextIO
    interval: float = attrs.field(default=0.5, kw_only=True)
    shown: int = attrs.field(default=-1, init=False)
    _stop: threading.Event = attrs.field(factory=threading.Event, init=False)
    _thread: threading.Thread = attrs.field(init=False)

    @_thread.default
    def _poller(self) -> threading.Thread:
        return threading.Thread(target=self._poll, name="mailroom-progress", daemon=True)

    @property
    def tty(self) -> bool:
        return bool(getattr(self.stream, "isatty", lambda: False)())

    def done(self) -> int:
        """Tasks of this job group completed so far (each task is one run)."""
        tracker = self.sc.statusTracker()
        count = 0
        for job in tracker.getJobIdsForGroup(self.group):
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None:
                    count += stage_info.numCompletedTasks
        return min(count, self.total)

    def show(self) -> None:
        k = self.done()
        if k != self.shown:
            self.shown = k
            line = f"runs done {k}/{self.total}"
            self.stream.write(f"\r{line}" if self.tty else f"{line}\n")
            self.stream.flush()

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.show()

    def __enter__(self) -> Progress:
        self.show()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.show()
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()


def run_sweep(
    spark: Any,
    grid: SweepGrid,
    out: str | Path,
    *,
    progress: TextIO | None = None,
    interval: float = 0.5,
) -> SweepResult:
    """Run every run of ``grid`` as a Spark task; write ``out/runs.parquet`` (one row per
    run) and return the summary (means over seeds), which is all the driver collects."""
    configs = grid.runs()
    sc = spark.sparkContext
    group = f"mailroom-sweep-{uuid.uuid4().hex[:8]}"
    sc.setJobGroup(group, f"mailroom sweep: {len(configs)} runs")
    rows = sc.parallelize(configs, numSlices=len(configs)).mapPartitions(_run_partition)
    frame = spark.createDataFrame(rows, SWEEP_DDL).persist()
    path = Path(out) / "runs.parquet"
    try:
        if progress is None:
            frame.count()  # the runs: one task each
        else:
            with Progress(sc, group, len(configs), progress, interval=interval):
                frame.count()
        # from the cached rows (not read back: Hadoop would take [ ] in a path as a glob)
        frame.coalesce(1).write.mode("overwrite").parquet(str(path))
        summary = summarize(frame)
    finally:
        frame.unpersist()
        sc.setLocalProperty("spark.jobGroup.id", None)
    return SweepResult(path, len(configs), summary)


def summarize(table: Any) -> list[dict[str, Any]]:
    """Means over seeds, by protocol, network setting and n, of a table of sweep rows."""
    from pyspark.sql import functions as F

    summary = (
        table.groupBy(*SUMMARY_KEYS)
        .agg(
            F.count("*").alias("runs"),
            F.sum("violations").alias("violations"),
            *(F.avg(c).alias(c) for c in SUMMARY_MEANS),
        )
        .orderBy(*SUMMARY_KEYS)
    )
    return [row.asDict() for row in summary.collect()]


__all__ = [
    "SUMMARY_KEYS",
    "SUMMARY_MEANS",
    "SWEEP_DDL",
    "Progress",
    "SweepResult",
    "run_sweep",
    "summarize",
]
