"""Hypothesis budgets shared by the property tests: examples per profile, and the
derandomized search that must find a known-buggy variant's counterexample."""

from __future__ import annotations

from hypothesis import HealthCheck, Phase, settings


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

#: ``SEARCH`` for a state the strategy must reach, where the test asserts only what the
#: search's condition already guarantees of the example found (and that a correct group
#: survives it, which holds for every example): the first example found is the proof,
#: so it is not shrunk. Shrinking replays it over and over to make it smaller, about
#: three quarters of such a search's time (measured: "crash mid-flush", 3.1 s of CPU
#: to find, 11.8 s with the shrink); the derandomized search finds the same example.
REACH_ONLY = settings(SEARCH, phases=(Phase.explicit, Phase.generate))


def thorough() -> bool:
    """Is this the ``thorough`` profile's run (a long local one, not CI)?"""
    return settings.default.max_examples >= 1000


def schedule(ci: int, longer: int) -> int:
    """The length of a real-process schedule (kills, messages): ``ci`` in CI and the
    quicker tiers, ``longer`` in the ``thorough`` run, which repeats it at full length."""
    return longer if thorough() else ci
