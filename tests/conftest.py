"""Shared test configuration: Hypothesis profiles.

``ci`` (the default) is derandomized and bounded so CI is reproducible;
``thorough`` is for long local runs: ``HYPOTHESIS_PROFILE=thorough pytest``.

Hypothesis biases some draws towards constants found in the project's loaded modules,
so a derandomized test's examples would depend on which modules the tests that ran
before it happened to import. Every ``mailroom`` module is imported here, before any
test, so the examples of a test are the same whether it runs alone or in the suite.
"""

from __future__ import annotations

import importlib
import os
import pkgutil

import pytest
from hypothesis import HealthCheck, settings

import mailroom


def _import_everything() -> None:
    """Import every mailroom module (those whose optional dependency is missing aside)."""
    for info in pkgutil.walk_packages(mailroom.__path__, "mailroom."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:
            continue  # an extra that is not installed: its tests skip


_import_everything()

settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=120,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", max_examples=60, deadline=None)
# the fast tier (./scripts/test --quick): every property still runs, on a few examples
settings.register_profile(
    "quick",
    derandomize=True,
    max_examples=12,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "thorough",
    max_examples=5000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


#: The test files that take longest in the whole suite (seconds on a quiet 2-core
#: machine, with coverage, from CI's durations), longest first. The suite runs on two
#: pytest-xdist workers that take whole files (``--dist loadfile``) in collection order
#: as they become free (``./scripts/test`` passes ``--no-loadscope-reorder``, which
#: keeps that order): handing out the longest files first leaves only short ones for
#: the end, so neither worker waits long for the other. A file that grows slow goes
#: here; a stale entry costs only a few seconds of idle worker, never a test.
LONGEST_FIRST = (
    "tests/test_membership_properties.py",  # ~300 s: the strategy's reachability searches
    "tests/test_open_ended.py",  # ~290 s: Lamport under steady traffic alone ~145 s
    "tests/test_nemesis.py",  # ~280 s: real process groups under real faults
    "tests/test_notebooks.py",  # ~215 s: the Spark notebook alone ~165 s
    "tests/spark/test_cluster.py",  # ~190 s: a standalone cluster, two CLI runs
    "tests/test_membership_safe.py",  # ~185 s
    "tests/test_docs.py",  # ~150 s
    "tests/spark/test_differential.py",  # ~145 s
    "tests/spark/test_check_paths.py",  # ~145 s
    "tests/spark/test_cli_check.py",  # ~145 s: a fresh JVM's check ~65 s
    "tests/test_properties.py",  # ~135 s
    "tests/test_net_benchmark.py",  # ~125 s
    "tests/test_batch_properties.py",  # ~120 s
    "tests/test_reliable_faults.py",  # ~105 s
    "tests/test_hostile.py",  # ~85 s
    "tests/spark/test_clock_check.py",  # ~85 s
    "tests/spark/test_linearizable_spark.py",  # ~80 s
    "tests/test_kv_service.py",  # ~75 s
    "tests/test_carried_message_id.py",  # ~75 s
    "tests/test_cli.py",  # ~70 s: the README's flow ~65 s
    "tests/test_contract_all.py",  # ~65 s
    "tests/test_lab.py",  # ~60 s
    "tests/test_net_membership.py",  # ~60 s
    "tests/test_codec.py",  # ~60 s
    "tests/test_replicated_properties.py",  # ~55 s
    "tests/spark/test_views_spark.py",  # ~55 s
    "tests/spark/test_bad_input.py",  # ~55 s
    "tests/test_total_properties.py",  # ~40 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the files of ``LONGEST_FIRST`` first, in its order; the other files follow
    in collection order, and every file keeps its own tests' order (the sort is stable).
    Only the order changes: the same tests run, with the same examples."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))
