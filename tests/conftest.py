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
