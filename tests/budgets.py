"""Hypothesis budgets shared by the property tests: examples per profile, and the
derandomized search that must find a known-buggy variant's counterexample."""

from __future__ import annotations

from hypothesis import HealthCheck, settings


def examples(k: int) -> int:
    """``k`` examples on the ci profile; a fifth of the profile's count when it asks for more
    (the thorough profile runs 1,000 per test)."""
    return max(k, settings.default.max_examples // 5)


SEARCH = settings(
    max_examples=1000,
    database=None,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
