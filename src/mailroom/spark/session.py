"""The SparkSession the pipeline runs on: ``local[*]`` by default, any master by URL.

Sized to the master, not to Spark's defaults: Spark's 200 shuffle partitions
cost a task each per shuffle, and on a trace of a million events their fixed
cost (scheduling, task deserialization) outweighs the work. The session uses
``PARTITIONS_PER_CORE`` partitions per core the master offers (at least 2),
unless told otherwise. Spark's own logging is quiet: fatal errors only, from the
start of the JVM (``log4j2.properties`` beside this module). A local master's JVM
runs the parallel (throughput) garbage collector: nobody waits on its pauses.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import attrs

from mailroom.core.extras import need

#: Shuffle partitions per core of the master (enough to balance skew, few enough to be cheap).
PARTITIONS_PER_CORE = 2
LOG4J2 = Path(__file__).with_name("log4j2.properties")
#: The garbage collector of a local master's JVM (see ``get_session``).
LOCAL_GC = "-XX:+UseParallelGC"


def local_driver_memory() -> str:
    """Heap for a local master (driver and executors share it): a quarter of RAM, 1g to 8g."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "2g"
    return f"{max(1, min(8, total // 4 // 2**30))}g"


def get_session(
    master: str = "local[*]",
    *,
    app: str = "mailroom",
    shuffle_partitions: int | None = None,
    checkpoint_dir: str | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
) -> Any:
    """Create (or reuse) a SparkSession sized to ``master``, UI off, checkpoint directory set.

    ``shuffle_partitions`` defaults to ``PARTITIONS_PER_CORE`` times the cores the
    master offers; ``driver_memory`` to ``local_driver_memory()`` on a local master;
    ``checkpoint_dir`` to a temporary directory removed when the process exits.
    """
    SparkSession = need("pyspark.sql", "a Spark session").SparkSession

    # executors run Python code of this package: use the interpreter that has it
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    quiet = f"-Dlog4j2.configurationFile={LOG4J2}"
    # a local master's one JVM is driver and executors: a batch job, where the
    # throughput collector beats the default low-pause one (measured: 10% of a
    # 1M-event check); executors on a cluster keep their JVM's default
    driver_jvm = f"{quiet} {LOCAL_GC}" if master.startswith("local") else quiet
    settings = {
        "spark.master": master,
        "spark.app.name": app,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        # the checks' persisted table lives for one run: compressing it costs more CPU
        # than it saves (measured: a tenth of the checks' executor time on 1M events)
        "spark.sql.inMemoryColumnarStorage.compressed": "false",
        # a JSON object with a repeated key keeps the last value, as Python's json does
        "spark.sql.mapKeyDedupPolicy": "LAST_WIN",
        "spark.driver.extraJavaOptions": driver_jvm,
        "spark.executor.extraJavaOptions": quiet,
    }
    if driver_memory is None and master.startswith("local"):
        driver_memory = local_driver_memory()
    if driver_memory is not None:
        settings["spark.driver.memory"] = driver_memory
    settings.update(conf or {})
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = _quietly(builder.getOrCreate)
    spark.sparkContext.setLogLevel("FATAL")
    if shuffle_partitions is None:
        shuffle_partitions = max(2, PARTITIONS_PER_CORE * spark.sparkContext.defaultParallelism)
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    _set_checkpoint_dir(spark.sparkContext, checkpoint_dir)
    return spark


def _set_checkpoint_dir(context: Any, asked: str | None) -> None:
    """Checkpoint into ``asked``, or into a temporary directory of the context's own,
    made once (a reused session keeps it) and removed when the process exits."""
    if asked is not None:
        context.setCheckpointDir(asked)
    elif context.getCheckpointDir() is None:
        made = tempfile.mkdtemp(prefix="mailroom-ckpt-")
        atexit.register(shutil.rmtree, made, ignore_errors=True)
        context.setCheckpointDir(made)


#: What the JVM prints on stderr at start-up whatever its logging says (Spark 4
#: loads an incubating module); the JVM's stderr is forwarded without it.
_JVM_NOISE = ("WARNING: Using incubator modules",)


@attrs.define
class _Forwarder:
    """Copies a JVM's standard error to ours, line by line, but for its start-up noise.

    Lines are held until the start is over: kept if the start succeeded, dropped if it
    failed (the one-line error says why; a JVM that cannot start prints its stack)."""

    out: IO[bytes]
    held: list[bytes] = attrs.field(factory=list)
    started: bool | None = None
    lock: threading.Lock = attrs.field(factory=threading.Lock)

    def run(self, stream: IO[bytes]) -> None:
        with stream:
            for raw in iter(stream.readline, b""):
                if not raw.decode(errors="replace").startswith(_JVM_NOISE):
                    self._write([raw])
        with self.lock:
            self.out.close()

    def _write(self, lines: list[bytes]) -> None:
        with self.lock:
            if self.started is None:
                self.held += lines
            elif self.started and lines and not self.out.closed:
                self.out.writelines(lines)
                self.out.flush()

    def settle(self, started: bool) -> None:
        with self.lock:
            self.started, held, self.held = started, self.held, []
        if started:
            self._write(held)


def _quietly(start: Callable[[], Any]) -> Any:
    """``start()`` with the standard error of any process it starts (the JVM) filtered.

    A JVM inherits file descriptor 2: for the duration of ``start`` that descriptor is
    a pipe whose lines a thread copies to the real standard error (``_Forwarder``).
    Once ``start`` returns, only a process it started still holds the pipe; when none
    did (a JVM already ran), the thread sees the pipe closed and ends.
    """
    read, write = os.pipe()
    forwarder = _Forwarder(os.fdopen(os.dup(2), "wb"))
    reader = os.fdopen(read, "rb")
    threading.Thread(target=forwarder.run, args=(reader,), daemon=True).start()
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(write, 2)
    started = False
    try:
        spark = start()
        started = True
        return spark
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        os.close(write)
        forwarder.settle(started)


def describe_error(exc: BaseException) -> str:
    """One line for a failed Spark call: the root cause, not the JVM's stack trace."""
    java = getattr(exc, "java_exception", None)
    if java is not None:  # py4j: walk to the innermost cause
        try:
            while java.getCause() is not None and java.getCause() != java:
                java = java.getCause()
            text = str(java.toString())
        except Exception:  # the JVM is gone: fall back to the Python text
            text = str(exc)
    else:
        text = getattr(exc, "desc", None) or str(exc)
    lines = [line.strip() for line in str(text).strip().splitlines() if line.strip()]
    line = lines[0] if lines else type(exc).__name__
    for prefix in ("org.apache.spark.SparkException: ", "java.io.IOException: "):
        line = line.removeprefix(prefix)
    return line[:300]
