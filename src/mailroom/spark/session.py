"""The SparkSession the pipeline runs on: ``local[*]`` by default, any master by URL."""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any


def get_session(
    master: str = "local[*]",
    *,
    app: str = "mailroom",
    shuffle_partitions: int | None = None,
    checkpoint_dir: str | None = None,
    driver_memory: str | None = None,
    conf: dict[str, str] | None = None,
) -> Any:
    """Create (or reuse) a SparkSession with the UI off and a checkpoint directory set."""
    from pyspark.sql import SparkSession

    # executors run Python code of this package: use the interpreter that has it
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if shuffle_partitions is not None:
        builder = builder.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.sparkContext.setCheckpointDir(checkpoint_dir or tempfile.mkdtemp(prefix="mailroom-ckpt-"))
    return spark
