"""The Hypothesis harness for any endpoint, shipped for users (needs ``hypothesis``)."""

from mailroom.testing.harness import (
    Factory,
    Op,
    Run,
    Scenario,
    assert_properties,
    find_counterexample,
    replay,
    scenarios,
)
from mailroom.testing.open_ended import (
    ShiftedClock,
    Steady,
    SteadyRun,
    open_ended_problems,
    run_steady,
    steady_scenarios,
)
from mailroom.testing.tagged import (
    delivered_tags,
    stability_violations,
    tag_violations,
    unstable_violations,
)
from mailroom.testing.variants import (
    CBCASTNoOneGreater,
    CBCASTSenderOnly,
    KSDestOnly,
    KSForgetOnSend,
    NaiveTagged,
    ReliableNoDedup,
    ReliableNoRetransmit,
    RSTColumnOnly,
    RSTSelfDoubleCount,
)
from mailroom.testing.variants_total import (
    SequencerNoHold,
    SkeenEagerDelivery,
    SkeenNoClockRaise,
)

__all__ = [
    "CBCASTNoOneGreater",
    "CBCASTSenderOnly",
    "Factory",
    "KSDestOnly",
    "KSForgetOnSend",
    "NaiveTagged",
    "Op",
    "RSTColumnOnly",
    "RSTSelfDoubleCount",
    "ReliableNoDedup",
    "ReliableNoRetransmit",
    "Run",
    "Scenario",
    "SequencerNoHold",
    "ShiftedClock",
    "SkeenEagerDelivery",
    "SkeenNoClockRaise",
    "Steady",
    "SteadyRun",
    "assert_properties",
    "delivered_tags",
    "find_counterexample",
    "open_ended_problems",
    "replay",
    "run_steady",
    "scenarios",
    "stability_violations",
    "steady_scenarios",
    "tag_violations",
    "unstable_violations",
]
