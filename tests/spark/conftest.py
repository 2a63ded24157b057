"""One local SparkSession for the whole test run (local[2], few shuffle partitions, no UI)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from mailroom.spark import get_session


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    session = get_session(
        "local[2]",
        app="mailroom-tests",
        shuffle_partitions=2,
        checkpoint_dir=str(tmp_path_factory.mktemp("checkpoints")),
        conf={"spark.sql.adaptive.enabled": "false", "spark.default.parallelism": "2"},
    )
    yield session
    session.stop()


SHIVIZ_DIR = Path(__file__).resolve().parents[1] / "data" / "shiviz"


@pytest.fixture(scope="session")
def shiviz_dir() -> Path:
    """ShiViz's example logs, vendored under tests/data/shiviz (MIT, see its README)."""
    return SHIVIZ_DIR
